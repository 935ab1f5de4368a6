"""Open a gapfuzz HTML report in headless Chromium and check that every plot is shown.

    python scripts/check_report.py RUN_DIR_OR_REPORT.html [--screenshot FILE.png]

A run folder is rendered to a temporary report first. The report is loaded from a copy with
a small script that, after the load event, marks every <img> with its decoded size
(naturalWidth x naturalHeight); Chromium's --dump-dom returns the marked DOM. Every
section must hold a plot that decoded to a non-empty image, nothing may be fetched
from the network, and every relative link (a cluster's reproducer) must name a file that
exists. Exit status: 0 all shown, 1 a plot missing or a link broken, 2 Chromium not installed.
"""
from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "chrome")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars"]
MARKER = """<script>window.addEventListener("load", () => { for (const img of document.images)
  img.setAttribute("data-rendered", img.complete ? img.naturalWidth + "x" + img.naturalHeight : "0x0"); });
</script>"""


class Sections(HTMLParser):
    """Sections by id and the images inside each, with their attributes."""

    def __init__(self):
        super().__init__()
        self.sections: dict[str, list[dict]] = {}
        self.external: list[str] = []
        self.links: list[str] = []  # every <a href>
        self._current: str | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for key in ("src", "href"):
            if re.match(r"^\s*(https?:)?//", a.get(key) or ""):
                self.external.append(f"<{tag} {key}={a[key][:80]}>")
        if tag == "a" and a.get("href"):
            self.links.append(a["href"])
        if tag == "section":
            self._current = a.get("id", f"section-{len(self.sections)}")
            self.sections[self._current] = []
        elif tag == "img" and self._current is not None:
            self.sections[self._current].append(a)


def broken_links(report: Path) -> tuple[int, list[str]]:
    """(relative links in the report, those that name no file beside it)."""
    parsed = Sections()
    parsed.feed(report.read_text(encoding="utf-8"))
    relative = [h for h in parsed.links if not urlsplit(h).scheme and not h.startswith(("#", "//"))]
    return len(relative), [h for h in relative if not (report.parent / unquote(urlsplit(h).path)).is_file()]


def browser() -> str | None:
    return next((p for p in map(shutil.which, BROWSERS) if p), None)


def chromium(exe: str, page: Path, profile: str, *args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    return subprocess.run([exe, *FLAGS, f"--user-data-dir={profile}", "--virtual-time-budget=10000", *args,
                           page.resolve().as_uri()], capture_output=True, text=True, timeout=timeout)


def check(report: Path, screenshot: Path | None = None) -> tuple[bool, list[str]]:
    """(every plot shown, lines saying what was found)."""
    exe = browser()
    if exe is None:
        raise FileNotFoundError("chromium is not installed (apt-get install -y chromium)")
    html = report.read_text(encoding="utf-8")
    with tempfile.TemporaryDirectory(prefix="gf-chromium-") as tmp:
        marked = Path(tmp) / "marked.html"
        marked.write_text(html.replace("</body>", MARKER + "</body>"), encoding="utf-8")
        dom = chromium(exe, marked, str(Path(tmp) / "profile"), "--dump-dom")
        if screenshot is not None:
            chromium(exe, report, str(Path(tmp) / "profile"), f"--screenshot={screenshot.resolve()}",
                     "--window-size=1280,6000")
    parsed = Sections()
    parsed.feed(dom.stdout)
    lines, ok = [], bool(parsed.sections)
    if not parsed.sections:
        lines.append(f"no sections in the DOM Chromium returned (exit {dom.returncode}): {dom.stderr[-300:]}")
    for name, imgs in parsed.sections.items():
        sizes = [img.get("data-rendered", "not marked") for img in imgs]
        shown = [s for s in sizes if re.fullmatch(r"[1-9]\d*x[1-9]\d*", s)]
        good = len(imgs) == 1 and len(shown) == 1
        ok &= good
        alt = imgs[0].get("alt", "") if imgs else ""
        lines.append(f"{'ok  ' if good else 'FAIL'} {name:<12} {len(imgs)} plot(s), rendered {', '.join(sizes) or '-'}"
                     f"  {alt}")
    if parsed.external:
        ok = False
        lines.append("FAIL external resources: " + ", ".join(parsed.external[:5]))
    links, broken = broken_links(report)
    ok &= not broken
    lines.append(f"FAIL broken links: {', '.join(broken[:5])}" if broken else f"links: {links} relative, all resolve")
    return ok, lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("target", help="a report .html, or a run folder to render one from")
    ap.add_argument("--screenshot", type=Path, help="also write a full-page PNG screenshot here")
    args = ap.parse_args()
    target = Path(args.target)
    with tempfile.TemporaryDirectory(prefix="gf-report-") as tmp:
        if target.is_dir():
            from gapfuzz.analysis.api import load_run
            from gapfuzz.analysis.report import write_report

            target = write_report(load_run(target), Path(tmp) / "report.html")
        try:
            ok, lines = check(target, args.screenshot)
        except FileNotFoundError as e:
            print(f"check_report: {e}", file=sys.stderr)
            return 2
    print("\n".join(lines))
    if args.screenshot:
        print(f"screenshot: {args.screenshot}")
    print("every plot is shown" if ok else "a plot is missing or not rendered")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

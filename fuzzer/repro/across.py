"""A reproducer checked on every release: those of its stack the campaign ran, and any the user adds
(``gapfuzz repro ... --against onnxruntime==1.33.0``, the newest), each in its own environment
(``workers.run.releases``), so that a report names the release that broke it and none is filed against a
defect the newest release has fixed.
"""
from __future__ import annotations

import re
import sys

from packaging.version import InvalidVersion, Version

from gapfuzz.core.registry import did_you_mean
from gapfuzz.workers.run.registry import BackendSpec
from gapfuzz.workers.run.releases import VERSION_PATTERN, Release, ReleaseError, environment

SHOWS, ABSENT = "shows it", "does not show it"
SCRIPT_FAILED = 4  # verify's exit status for a repro.py that raised (fuzzer.repro.verify)


class AgainstError(ValueError):
    """A ``--against`` that names no release of the target's stack (one line)."""


def against_form(given: str, example: str = "onnxruntime") -> tuple[str, str]:
    """``STACK==RELEASE`` as (stack, release), checked as text before any work (``gapfuzz repro --all`` has no
    target yet): a name, and a release as a package index spells one."""
    name, mark, version = given.partition("==")
    if not mark or not name.strip() or not VERSION_PATTERN.match(version):
        raise AgainstError(f"--against {given!r}: STACK==RELEASE is expected, e.g. {example}==1.0")
    return name, version


def against_names(stack: str, dist: str | None) -> dict[str, str]:
    """The names a ``--against`` may give a target of ``stack`` by (lowercase), each to the distribution it pins."""
    return {n.lower(): d for n, d in ((stack, dist), (dist, dist), ("torch", "torch")) if n and d}


def parse_against(target: BackendSpec, given: str) -> Release:
    """``STACK==RELEASE`` (the stack or its distribution, or torch) as the target's release with that pin."""
    name, version = against_form(given, target.stack)
    names = against_names(target.stack, target.backend_cls().release_distribution())
    if name.lower() not in names:
        raise AgainstError(f"--against {given!r}: {name!r} is not {target.name}'s stack or torch"
                           f"{did_you_mean(name, list(names))}")
    return Release.of({**dict(target.release.pins if target.release else ()), names[name.lower()]: version})


def campaign_releases(specs: list[BackendSpec], target: BackendSpec) -> list[Release | None]:
    """The releases the campaign ran of the target's line (None: the installed one), when it ran several."""
    line = [s for s in specs if s.line == target.line]
    return [s.release for s in line] if len(line) > 1 else []


def _order(release: Release):
    try:
        return tuple(Version(v) for _, v in release.pins)
    except InvalidVersion:
        return ()


def check_releases(releases: list[Release | None], verify, say) -> dict[str, str]:
    """``verify(python)`` (one fresh run of repro.py: how many showed the bug, and its output) in each release's
    environment (None: the installed one), oldest first: {release in words: shows it / does not show it /
    why it says nothing there (the script itself fails: another error first)}."""
    installed = Release.installed({d for r in releases if r for d, _ in r.pins})
    unique = {str(r or installed): r or installed for r in releases if (r or installed).pins}
    out = {}
    for text, release in sorted(unique.items(), key=lambda item: _order(item[1])):
        try:
            python = sys.executable if release.installed_here else environment(release, say).python
        except ReleaseError as e:
            out[text] = f"not checked: {e}"
            continue
        say(f"repro.py under {text}")
        shown, output = verify(python)
        out[text] = SHOWS if shown else ABSENT if not output.rstrip().endswith(f"[exit status {SCRIPT_FAILED}]") else \
            f"repro.py fails there before it can tell: {_last_error(output)}"
    return out


def _last_error(output: str) -> str:
    """What a traceback's output says went wrong: its exception line and, where the message goes on over more
    lines (a C++ stack's checks), its last line; cut short."""
    lines = [line.strip() for line in output.splitlines() if line.strip() and not line.startswith("[exit status")]
    raised = [i for i, line in enumerate(lines) if re.match(r"[\w.]+(?:Error|Exception|Failure|Exit)\b", line)]
    if not raised:
        return " ".join((lines or ["no output"])[-1].split())[:200]
    first, last = lines[raised[-1]], lines[-1]
    return " ".join((first if last == first else f"{first} ... {last}").split())[:240]


def in_words(checked: dict[str, str]) -> str:
    """``worked in onnxruntime 1.31.1, wrong in 1.32.0`` (a regression), ``fixed in ...``, ``in every release
    checked``; empty when fewer than two releases ran."""
    ran = [(r, v) for r, v in checked.items() if v in (SHOWS, ABSENT)]
    if len(ran) < 2:
        return ""
    shows = [v == SHOWS for _, v in ran]
    if all(shows):
        return f"shows in every release checked ({', '.join(r for r, _ in ran)})"
    if shows[-1]:
        last_absent = max(i for i, s in enumerate(shows) if not s)
        return f"a regression: worked in {ran[last_absent][0]}, wrong in {ran[last_absent + 1][0]}" + \
            (f" (and every later one checked, up to {ran[-1][0]})" if last_absent + 1 < len(ran) - 1 else "")
    if any(shows):
        return f"fixed in {ran[-1][0]}, the newest release checked (shown in " \
               f"{', '.join(r for (r, _), s in zip(ran, shows) if s)}); check before filing"
    return f"not shown by any release checked here ({', '.join(r for r, _ in ran)})"


def torch_apart(target: BackendSpec, reference: BackendSpec) -> list[str]:
    """Why a finding of a target under another torch than its reference's may not show again here: minimised
    in one interpreter, the target's torch is eager's too (a note; none where both ran one torch)."""
    def torch_of(spec):
        return dict(spec.release.pins).get("torch") if spec.release else None
    if torch_of(target) == torch_of(reference):
        return []
    return [f"{target.name} ran under torch {torch_of(target) or 'as installed'}, its reference {reference.name} under "
            f"torch {torch_of(reference) or 'as installed'}: minimised in one interpreter, eager is the target's torch "
            f"too, so a difference that is eager's own between releases does not show (compare eager across them: a "
            f"target {{backend: eager@cpu, torch: ...}})"]

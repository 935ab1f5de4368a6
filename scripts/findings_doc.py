#!/usr/bin/env python
"""Write docs/findings.md from a study's run folder.

    python scripts/findings_doc.py runs/cpu-study [--out docs/findings.md]
        [--annotations docs/findings/annotations.yaml]

The class and note of each finding are read from the annotations file (cluster id ->
{class: defect|documented|tolerance|reference|open|harness, note: ...}; ``_title``: the heading;
``_summary``: a paragraph;
``_by_message``: rules {name, match, class, note} for clusters with no entry of their own),
so that regenerating the tables never loses them. Reproducers are linked when
``docs/findings/<cluster-id>/repro.py`` exists.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analysis.api import load_run  # noqa: E402
from analysis.findings import CLASSES, render  # noqa: E402
from analysis.store import ResultsError  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_dir")
    p.add_argument("--out", default="docs/findings.md")
    p.add_argument("--annotations", default="docs/findings/annotations.yaml")
    a = p.parse_args()
    notes_file = Path(a.annotations)
    try:
        run = load_run(a.run_dir)
        notes = yaml.safe_load(notes_file.read_text()) or {} if notes_file.exists() else {}
    except (ResultsError, yaml.YAMLError) as e:
        print(f"findings_doc: {e}".splitlines()[0], file=sys.stderr)
        return 2
    bad = [k for k, v in notes.items() if not k.startswith("_") and (v or {}).get("class") not in CLASSES]
    bad += [f"_by_message rule {r.get('name')!r}" for r in notes.get("_by_message") or []
            if r.get("class") not in CLASSES or not {"name", "match", "note"} <= set(r)]
    if bad:
        print(f"findings_doc: {notes_file}: unknown class for {', '.join(bad)} "
              f"(one of {', '.join(CLASSES)})", file=sys.stderr)
        return 2
    command = f"python scripts/findings_doc.py {a.run_dir}"
    if a.out != p.get_default("out") or a.annotations != p.get_default("annotations"):
        command += f" --out {a.out} --annotations {a.annotations}"
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render(run, notes, notes_file.parent, command, a.annotations))
    print(f"wrote {out} ({len(run)} records)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

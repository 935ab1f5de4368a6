#!/usr/bin/env python
"""Write docs/findings.md from a study's run folder.

    python scripts/findings_doc.py runs/cpu-study [--out docs/findings.md]
        [--annotations docs/findings/annotations.yaml]

The class and note of each finding are read from the annotations file, a known-issues file
(``analysis/known.py``: cluster id -> {class, note, same_as}; ``_known``: issues matched on
cluster columns; ``_by_message``: rules {name, match, class, note}; ``_title``: the heading;
``_summary``: a paragraph), so that regenerating the tables never loses them; a cluster none
matches but an explanation does is classed ``explained``. Reproducers are linked when
``docs/findings/<folder>/repro.py`` exists (the cluster's id, a merged one's, or the entry's
``reproducer``).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gapfuzz.analysis.api import load_run
from gapfuzz.analysis.findings import render
from gapfuzz.analysis.known import KnownIssues
from gapfuzz.results.store import ResultsError


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_dir")
    p.add_argument("--out", default="docs/findings.md")
    p.add_argument("--annotations", default="docs/findings/annotations.yaml")
    a = p.parse_args()
    notes_file = Path(a.annotations)
    try:
        known = KnownIssues.load(notes_file if notes_file.exists() else None)
        run = load_run(a.run_dir, notes_file if notes_file.exists() else None)
    except ResultsError as e:
        print(f"findings_doc: {e}".splitlines()[0], file=sys.stderr)
        return 2
    command = f"python scripts/findings_doc.py {a.run_dir}"
    if a.out != p.get_default("out") or a.annotations != p.get_default("annotations"):
        command += f" --out {a.out} --annotations {a.annotations}"
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render(run, known, notes_file.parent, command, a.annotations))
    print(f"wrote {out} ({len(run)} records)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

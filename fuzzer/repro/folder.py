"""A reproducer's folder: what ``gapfuzz repro`` writes there, and never anyone else's files.

``shrink.json`` (a ``ReproResult``) is written first and again after every outcome, so a folder holding
it is a reproducer's whatever stopped the reproduction: the stage that stopped it and why are in it
(``stopped_at``, ``reason``), with each stage's seconds. ``repro.py`` is written only once checked to
carry no value of its record as code (``core.codegen.vet``).
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from gapfuzz.core.bugs import ReproStatus
from gapfuzz.core.codegen import ScriptRefused, strings_in, vet
from gapfuzz.core.files import OutsideFolder, inside
from gapfuzz.fuzzer.repro.record import ReproError
from gapfuzz.fuzzer.repro.reproducers.case import Case, Script

FILES = ("repro.py", "inputs.pt", "model.onnx")  # what a reproducer's folder ships, and verify copies
WRITTEN = (*FILES, "report.md", "shrink.json")  # all that repro writes into its folder


@dataclass
class ReproResult:
    folder: str
    status: ReproStatus
    failures: int = 0
    tries: int = 0
    nodes_before: int = 0
    nodes_after: int = 0
    predicate_calls: int = 0
    candidates_bisected: int = 0  # shrink candidates whose run was bisected (none: bisection is the campaign's)
    mutations_dropped: int = 0
    seconds: float = 0.0
    stats: dict = field(default_factory=dict)
    # what the minimised bug is, for merging clusters whose reproducers are the same (analysis.merge)
    backend: str = ""
    stack: str = ""
    kind: str = ""
    symptom: str = ""  # a divergence's symptom, or a failure's status and exception type
    ops: list = field(default_factory=list)  # the minimised graph's operators, in graph order
    form: str = ""  # how repro.py shows the bug: in the stack's own API (fuzzer.repro.reproducers) or "generic"
    lines: int = 0
    notes: list = field(default_factory=list)  # what the report must say (index-only, explained, ...)
    releases: dict = field(default_factory=dict)  # release in words -> whether repro.py shows it there (across)
    stopped_at: str = ""  # the stage that ended the reproduction before its report, or failed ("": none did)
    reason: str = ""  # why, in one line
    stages: dict = field(default_factory=dict)  # each stage's seconds (``minimise.Reproduction``)


def own_folder(out: Path) -> None:
    """``out`` is new, empty or a reproducer's folder (what repro writes, and its shrink.json): files of
    anyone else's there are never replaced."""
    try:
        there = sorted(p.name for p in out.iterdir()) if out.is_dir() and not out.is_symlink() else []
    except OSError as e:
        raise ReproError(f"{out}: cannot read the folder: {e.strerror or e}") from None
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise ReproError(f"{out}: is {'a symbolic link' if out.is_symlink() else 'a file'}; give --out a new folder")
    others = [n for n in there if n not in WRITTEN]
    if others or (there and "shrink.json" not in there):  # shrink.json: written first, so the folder is repro's
        raise ReproError(f"{out}: holds files gapfuzz repro did not write ({', '.join((others or there)[:3])}); "
                         f"give --out a new or empty folder")


def clear(out: Path) -> None:
    """The reproducer and report of an earlier repro into ``out`` removed (shrink.json stays: the folder's mark)."""
    for stale in (*FILES, "report.md"):
        inside(out, stale).unlink(missing_ok=True)


def write_script(out: Path, script: Script, case: Case) -> None:
    """repro.py and the files it ships, once ``script`` is checked to carry no value of ``case`` as code."""
    try:
        vet(script.text, strings_in(vars(case.record), case.title, case.options, case.error_type, case.phrase,
                                    case.class_path), str(out / "repro.py"))
        for stale in FILES[1:]:
            inside(out, stale).unlink(missing_ok=True)
        inside(out, "repro.py").write_text(script.text)
        for name, data in script.files.items():
            inside(out, name).write_bytes(data)
    except (ScriptRefused, OutsideFolder) as e:
        raise ReproError(str(e)) from None


def finish(result: ReproResult, t0: float) -> ReproResult:
    """shrink.json, with the seconds since ``t0``."""
    result.seconds = time.perf_counter() - t0
    inside(result.folder, "shrink.json").write_text(json.dumps(asdict(result), indent=1, default=str))
    return result

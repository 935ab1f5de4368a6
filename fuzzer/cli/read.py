"""The commands that read a run folder: ``triage``, ``report`` (and its vendor digest) and ``diff``.

They import neither torch nor Ray (``analysis`` needs neither), so a notebook's environment or a laptop
reads a run folder in about a second; ``tests/analysis/test_triage.py`` checks it. What they print is a run folder's
data, so it goes through ``show``: a record's terminal escapes are printed as text, never obeyed.
"""
from __future__ import annotations

from pathlib import Path

from gapfuzz.core.files import inside
from gapfuzz.core.ids import BackendName
from gapfuzz.core.text import printable
from gapfuzz.fuzzer.cli.parser import EXIT_FOUND, UserError


def show(text: str) -> None:
    """Print what a run folder holds, its control characters as visible escapes (``core.text.printable``)."""
    print(printable(str(text)))


def open_run(run_dir: str, args=None):
    from gapfuzz.analysis.api import load_run
    from gapfuzz.results.store import ResultsError

    try:
        return load_run(run_dir, getattr(args, "known", None), getattr(args, "catalog", None))
    except ResultsError as e:
        raise UserError(str(e)) from None


def cmd_triage(args) -> int:
    from gapfuzz.analysis.releases import Mark
    from gapfuzz.analysis.triage import no_regressions, render_clusters

    run = open_run(args.run_dir, args)
    if args.why:
        show(run.why(args.why))
        return 0
    regressions = getattr(args, "regressions", False)
    c = run.clusters(benign=args.benign, mark=Mark.REGRESSION if regressions else None)
    if regressions and c.empty:
        show(no_regressions(run.release_lines()))
        return 0
    show(render_clusters(c, limit=args.limit, benign_runs=0 if regressions else run.benign_runs(),
                         benign_shown=args.benign, models=run.catalog_models()))
    return 0


def cmd_report(args) -> int:
    try:
        from gapfuzz.analysis.report import write_report
    except ImportError as e:
        raise UserError(f"gapfuzz report needs the module {e.name}: install gapfuzz's dependencies (the README "
                        f"says which a run is read with)") from None

    run = open_run(args.run_dir, args)
    if args.vendor:
        return _vendor_digest(run, args)
    if args.out:
        _check_report_out(Path(args.out), run)
    try:
        path = write_report(run, args.out)
    except OSError as e:
        raise UserError(f"{args.out or args.run_dir}: cannot write the report: {e.strerror or e}") from None
    show(path)
    return 0


def _check_report_out(out: Path, run) -> None:
    """A report is written beside the run's own files or outside every run folder, never into
    another run's folder nor into a ``records/`` (where every later triage would read it)."""
    from gapfuzz.results.folder import run_folder_around

    if out.is_dir():
        raise UserError(f"{out}: is a folder; give --out the report's file name ({out / 'report.html'})")
    around = run_folder_around(out)
    if around is None:
        return
    own = run.path.resolve() if run.path is not None else None
    if around != own:
        raise UserError(f"{out}: inside the run folder {around}; a run folder holds only its own files, so "
                        f"write the report elsewhere")
    if (around / "records") in out.resolve().parents:
        raise UserError(f"{out}: inside {around / 'records'}, which holds only records (every triage reads "
                        f"what is there); write the report elsewhere")


def cmd_diff(args) -> int:
    from gapfuzz.analysis.triage import diff, render_diff

    before, after = open_run(args.run_a, args), open_run(args.run_b, args)
    d = diff(before.clusters(), after.clusters())
    show(render_diff(d, limit=args.limit))
    return EXIT_FOUND if args.exit_code and (d["state"] == "new").any() else 0


def _vendor_digest(run, args) -> int:
    from gapfuzz.analysis.table import format_table
    from gapfuzz.analysis.vendor import digest

    if run.path is None:
        raise UserError(f"{args.run_dir}: the vendor digest is written from a local run folder")
    stacks = sorted({BackendName.stack_of(b) for b in run.records(["backend"])["backend"].unique()})
    if BackendName.stack_of(args.vendor) not in stacks:  # before anything is written
        raise UserError(f"{args.run_dir}: no stack {args.vendor!r} ran here (its stacks: {', '.join(stacks)})")
    try:
        out = Path(args.out) if args.out else inside(run.path, "vendor", BackendName.stack_of(args.vendor))
        found = digest(run, args.vendor, out)
    except OSError as e:
        raise UserError(f"{out}: cannot write the digest: {e.strerror or e}") from None
    except ValueError as e:  # a stack name that is a path, a link in the folder, a script that would carry code
        raise UserError(str(e)) from None
    show(format_table(["behaviour", "operators", "clusters", "runs", "reproducers"],
                       [[b.name + (" (explained)" if b.explained else ""), ", ".join(b.ops), len(b.clusters), b.runs,
                         b.reproducers] for b in found]))
    show(f"digest: {out}/README.md")
    return 0

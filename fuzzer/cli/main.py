"""The ``gapfuzz`` console script."""
from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from dataclasses import astuple
from pathlib import Path

from gapfuzz.core.ids import BackendName
from gapfuzz.core.text import printable
from gapfuzz.fuzzer.cli.parser import (
    EXIT_BAD_INPUT,
    EXIT_FOUND,
    EXIT_INFRASTRUCTURE,
    InfrastructureError,
    UserError,
    build_parser,
    overrides,
    setting,
)
from gapfuzz.fuzzer.cli.read import cmd_diff, cmd_report, cmd_triage
from gapfuzz.fuzzer.cli.repro import cmd_explain, cmd_repro
from gapfuzz.fuzzer.cli.stopping import EXIT_INTERRUPTED, EXIT_TERMINATED, end_children, sigterm_raises, stop_status

EXIT_PIPE_CLOSED = 141  # what a shell reports for a command that SIGPIPE stopped (128 + 13)
SUMMARY_COLUMNS = ["variant_id", "seed_id", "backend", "status", "verdict", "stage", "mutations"]


def _records(run_dir: str, columns: list[str] | None = None):
    from gapfuzz.results.folder import FolderError
    from gapfuzz.results.store import RecordStore

    try:
        store = RecordStore(run_dir)
        found = store.folder.is_dir()
    except FolderError as e:
        raise UserError(str(e)) from None
    if not found:
        raise UserError(f"{run_dir}: no such run folder")
    if not store.files():
        raise UserError(f"{run_dir}: holds no records (is it a gapfuzz run folder?)")
    return store.read(columns).to_pandas()


def cmd_run(args) -> int:
    from gapfuzz.fuzzer.config.backends import exec_options_allowed
    from gapfuzz.fuzzer.config.campaign import load_campaign
    from gapfuzz.fuzzer.config.plan import select_seeds, sized_seeds

    settings = _settings(args)
    with exec_options_allowed(args.allow_exec_options):  # options naming a program: only when the user says so
        campaign = load_campaign(args.campaign, overrides(settings))
    # bad selections, and a plan past its bound, fail here, before anything is written or built
    seed_ids = sized_seeds(campaign, select_seeds(campaign), None if args.quiet else _planning_ticker())
    if args.check:
        return _check(campaign, seed_ids)
    driver, run_dir, again = _launch(args, campaign, settings)
    try:
        driver.run(seed_ids, sized=True)
    except BaseException as e:  # noqa: BLE001 - _stopped re-raises what it does not turn into a status
        return _stopped(e, run_dir, again)
    if driver.out_of_time and driver.progress.done == 0 and not args.resume:  # no record to sum up
        print(f"time budget of {driver.budget_s:g} s spent before a pair ended; continue with: {again}")
        return 0
    _sum_up(str(run_dir))
    if driver.out_of_time:
        p = driver.progress
        print(f"time budget of {driver.budget_s:g} s spent: {p.done} of {p.total} pairs run; continue with: "
              f"{again}")
    return _fail_on(args.fail_on, str(run_dir))


def _launch(args, campaign, settings):
    """The driver, its run folder (made, with campaign.yaml and run.json) and the command that resumes it;
    a folder, cache or cluster that will not do is said here, before anything is written."""
    from gapfuzz.fuzzer.cli.launch import LaunchError, check_address, check_cache, check_run_dir, resume_command
    from gapfuzz.fuzzer.driver import Driver
    from gapfuzz.results.folder import Folder, FolderError, run_folder_around

    try:
        run_dir = Folder(args.out or f"{campaign.output}/{campaign.name}")  # a path, or a URI (s3://...)
    except FolderError as e:
        raise UserError(str(e)) from None
    around = run_folder_around(run_dir.local_path) if run_dir.local_path is not None else None
    if around is not None:
        raise UserError(f"{run_dir}: inside the run folder {around}; a run folder writes only inside itself, "
                        f"so give --out a folder of its own")
    again = resume_command(args.campaign, run_dir, args.address, tuple(text for _, _, text in settings))
    address = args.address or campaign.address or os.environ.get("RAY_ADDRESS")  # inside a Ray job: its cluster
    driver = Driver(campaign, run_dir, address=address, progress=not args.quiet, budget_s=args.time_budget)
    try:
        check_run_dir(run_dir, campaign, args.resume)
        check_cache(campaign)
        check_address(address)
        if address:
            driver.connect()  # a cluster that does not answer is said before anything is written
        else:
            driver.check_available()
        run_dir.mkdir()
        run_dir.write_bytes(campaign.to_yaml().encode(), "campaign.yaml")
        driver.pools.manifest().write(run_dir)  # run.json beside it: the backends that run here, by record name
    except ConnectionError as e:  # Ray found no cluster where it was told to look, or did not start here
        where = (f"--address {address}" if args.address or campaign.address else f"RAY_ADDRESS={address}") \
            if address else "Ray"
        raise UserError(f"{where}: {' '.join(str(e).split())[:200]}") from None
    except (LaunchError, OSError, FolderError) as e:
        raise UserError(str(e) if isinstance(e, LaunchError) else f"{run_dir}: cannot write: {e.strerror or e}") \
            from None
    return driver, run_dir, again


def _stopped(e: BaseException, run_dir, again: str) -> int:
    """A campaign that stopped early: Ray lost, a pool stranded, the disk, Ctrl-C or SIGTERM. What was recorded
    stays, and the message says how to go on; anything else is raised again."""
    from gapfuzz.workers.run.jobs import Stranded

    if isinstance(e, (ConnectionError, Stranded)):  # Ray did not start, or a pool lost its nodes
        where = "Ray: " if isinstance(e, ConnectionError) else ""
        raise InfrastructureError(f"{where}{' '.join(str(e).split())[:200]}; continue with: {again}") from None
    if isinstance(e, OSError):  # the run folder's disk: what was written before stays
        raise UserError(f"{run_dir}: cannot write: {e.strerror or e}; the records written so far are kept "
                        f"(continue with: {again})") from None
    status = stop_status(e)
    if status is None:
        raise e
    print(f"\n{'interrupted' if status == EXIT_INTERRUPTED else 'terminated'}: records so far are kept in "
          f"{run_dir}; continue with: {again}", file=sys.stderr)
    return status


def _sum_up(run_dir: str) -> None:
    """The finished campaign's summary: clusters, unmutated seeds, counts by status, where the results are."""
    from gapfuzz.analysis.triage import render_summary, render_unmutated
    from gapfuzz.core.bugs import Status, Verdict

    df = _records(run_dir, SUMMARY_COLUMNS)
    print(render_summary(df))
    unmutated = render_unmutated(df)
    if unmutated:
        print(unmutated)
    counts = df["status"].value_counts()
    vendor = int((df["verdict"] == Verdict.TARGET_DIVERGENT).sum()) if "verdict" in df else 0
    print(f"\n{len(df)} runs of {df['variant_id'].nunique()} variants from {df['seed_id'].nunique()} seeds: "
          f"{int(counts.get(Status.MISMATCH, 0))} mismatches ({vendor} blamed on the target), "
          f"{int(counts.get(Status.CRASH, 0))} crashes, {int(counts.get(Status.ERROR, 0))} errors, "
          f"{int(counts.get(Status.TIMEOUT, 0))} timeouts")
    print(f"results: {run_dir}   (triage: gapfuzz triage {run_dir})")


def _fail_on(what: str, run_dir: str) -> int:
    """``--fail-on``: 1 when the run has vendor findings (``findings``) or ones no known issue matches (``new``)."""
    if what == "never":
        return 0
    from gapfuzz.analysis.api import load_run

    found = load_run(run_dir).clusters(vendor=True)
    if what == "new" and "known" in found:
        found = found[found["known"].isna()]
    if found.empty:
        return 0
    print(f"--fail-on {what}: {len(found)} {'new ' if what == 'new' else ''}vendor finding(s): "
          f"{', '.join(found['cluster'].head(5))}{' ...' if len(found) > 5 else ''}")
    return EXIT_FOUND


def _settings(args) -> list:
    """The KEY=VALUE words of ``run``; the first stands where the campaign file would when no file is given."""
    given = list(args.settings)
    if args.campaign and "=" in args.campaign and not Path(args.campaign).exists():
        try:
            given.insert(0, setting(args.campaign))
        except argparse.ArgumentTypeError as e:
            raise UserError(str(e)) from None
        args.campaign = None
    return given


def _check(campaign, seed_ids: list[str]) -> int:
    """``gapfuzz run --check``: the file is valid (it loaded) and this is what it would run."""
    from gapfuzz.fuzzer.config.plan import plan_lines

    print("\n".join(plan_lines(campaign, seed_ids)))
    if not (campaign.address or os.environ.get("RAY_ADDRESS")):  # a cluster's nodes check their own
        for spec in campaign.backends.all():
            why = spec.unavailable_reason()
            if why:
                print(f"{spec.name}: not available here: {why}" + (" (skipped: backends.skip_unavailable)"
                      if campaign.backends.skip_unavailable else " (the run would stop)"))
    return 0


def _planning_ticker(every_s: float = 2.0):
    """``tick(done, total)`` for ``plan.with_sizes``: a line on stderr every few seconds while the seeds' sizes
    are chosen (up to a second a model seed), so that ``run --check`` of a thousand models says how far it is."""
    t0 = last = time.monotonic()

    def tick(done: int, total: int) -> None:
        nonlocal last
        now = time.monotonic()
        if now - last >= every_s:
            last = now
            left = f", about {(now - t0) / done * (total - done):.0f} s left" if done else ""
            print(f"planning: sizes of {done} of {total} seeds chosen ({now - t0:.0f} s{left})", file=sys.stderr,
                  flush=True)
    return tick


def cmd_schema(args) -> int:
    import json

    from gapfuzz.fuzzer.config.schema import json_schema

    print(json.dumps(json_schema(), indent=2))
    return 0


def cmd_mutators(args) -> int:
    from gapfuzz.analysis.table import format_table
    from gapfuzz.fuzzer.mutators import mutator_table

    rows = [[n, fam, "yes" if keep else "no", doc] for n, fam, keep, doc in mutator_table()]
    print(format_table(["mutator", "family", "preserves semantics", "what it does"], rows))
    return 0


def cmd_backends(args) -> int:
    from gapfuzz.analysis.table import format_table
    from gapfuzz.workers.run.registry import backend_class, list_backends

    rows = []
    for name in list_backends(args.filter):
        stack, device = astuple(BackendName.parse(name))
        cls = backend_class(stack)
        why = cls.unavailable_reason(device)
        rows.append([name, "yes" if why is None else "no", "yes" if cls.trains else "no",
                     cls.version() if why is None else "", why or ""])
    print(format_table(["backend", "available", "trains", "version", "why not"], rows))
    return 0


def _seed_ids(args) -> list[str]:
    from gapfuzz.seeds import get_source, list_seeds

    if args.source:
        get_source(args.source)  # an unknown source is one clear line
    ids = list_seeds(filter=args.filter, source=args.source, exclude=args.exclude)
    if not ids:
        raise UserError(f"no seed matches source={args.source or 'any'} filter={args.filter or '*'}")
    return ids


def cmd_seeds(args) -> int:
    for sid in _seed_ids(args):
        print(sid)
    return 0


def cmd_seeds_scan(args) -> int:
    from gapfuzz.analysis.seed_report import render_scan_summary
    from gapfuzz.fuzzer.catalog_scan import pick, scan
    from gapfuzz.fuzzer.cli.launch import LaunchError, check_address
    from gapfuzz.workers.run.jobs import Stranded

    ids = pick(_seed_ids(args), args.sample, args.seed)
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise UserError(f"{out}: exists and is not a folder; give --out a folder")
    try:
        check_address(args.address)
    except LaunchError as e:
        raise UserError(str(e)) from None
    if "://" not in args.out:  # a folder that cannot be made is said now, not after the whole scan
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise UserError(f"{out}: cannot write the catalog there: {e.strerror or e}") from None
    try:
        catalog = scan(ids, args.out, workers=args.workers, timeout_s=args.timeout, max_params=args.max_params,
                       memory_gb=args.memory_gb, address=args.address, progress=not args.quiet)
    except Stranded as e:
        raise UserError(f"seeds scan: {e}") from None
    except OSError as e:  # the catalog's disk, at the end
        if isinstance(e, ConnectionError):
            raise
        raise UserError(f"{out}: cannot write the catalog: {e.strerror or e}") from None
    df = catalog.read().to_pandas()
    print(render_scan_summary(df[df["seed_id"].isin(ids)]))
    print(f"catalog: {catalog.dir}")
    return 0


COMMANDS = {"run": cmd_run, "triage": cmd_triage, "report": cmd_report, "diff": cmd_diff, "seeds list": cmd_seeds,
            "seeds scan": cmd_seeds_scan, "repro": cmd_repro, "explain": cmd_explain, "mutators": cmd_mutators,
            "backends": cmd_backends, "schema": cmd_schema}


def _tolerant_output() -> None:
    """Text the terminal's encoding cannot show (an ellipsis under PYTHONIOENCODING=ascii) is escaped,
    not a UnicodeEncodeError after the work is done."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(errors="backslashreplace")
        except (AttributeError, ValueError, OSError):  # not a TextIOWrapper (a test's StringIO), or closed
            pass


def _pipe_closed() -> int:
    """The reader of stdout went away (``gapfuzz mutators | head -3``): stop quietly, as every CLI
    does. Python would report the failed flush of stdout at exit, so it is pointed at /dev/null."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, AttributeError, ValueError):
        pass
    return EXIT_PIPE_CLOSED


class _PrintableFormatter(logging.Formatter):
    """A warning's text (a file's or a record's) with its control characters shown, never obeyed."""

    def format(self, record) -> str:
        return printable(super().format(record))


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="gapfuzz: %(message)s")
    for handler in logging.getLogger().handlers:
        if type(handler.formatter) is logging.Formatter:
            handler.setFormatter(_PrintableFormatter(handler.formatter._fmt))
    _tolerant_output()
    with sigterm_raises():
        try:
            status = _main(argv)
        except BrokenPipeError:
            return _pipe_closed()
        except BaseException as e:
            status = stop_status(e)
            if status is None:
                raise
            print(f"gapfuzz: {'interrupted' if status == EXIT_INTERRUPTED else 'terminated'}", file=sys.stderr)
    if status in (EXIT_INTERRUPTED, EXIT_TERMINATED):
        end_children()
    return status


def _main(argv: list[str] | None) -> int:
    args = build_parser(COMMANDS).parse_args(argv)
    try:
        return args.fn(args)
    except Exception as e:
        if not isinstance(e, _bad_input_errors()):
            raise
        print(f"gapfuzz: {printable(str(e), newlines=False)}", file=sys.stderr)  # a file's text, shown not obeyed
        return EXIT_INFRASTRUCTURE if isinstance(e, InfrastructureError) else EXIT_BAD_INPUT


# The errors that mean bad input, by the module that defines each. They are looked up only among the
# modules a command imported (one it did not import cannot have raised), so that reading a run
# (triage, report, diff) never imports the seeds (torch) or the workers and the campaign (Ray).
BAD_INPUT_ERRORS = [("gapfuzz.results.folder", "ResultsError"), ("gapfuzz.core.registry", "PluginError"),
                    ("gapfuzz.core.ids", "IdError"), ("gapfuzz.seeds.errors", "SeedError"),
                    ("gapfuzz.workers.run.registry", "BackendError"),
                    ("gapfuzz.fuzzer.config.campaign", "CampaignError"),
                    ("gapfuzz.fuzzer.mutators.base", "MutatorError")]


def _bad_input_errors() -> tuple[type[Exception], ...]:
    found = [getattr(sys.modules[m], name) for m, name in BAD_INPUT_ERRORS if m in sys.modules]
    return (UserError, InfrastructureError, *found)


if __name__ == "__main__":
    sys.exit(main())

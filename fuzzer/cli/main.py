"""The ``gapfuzz`` console script."""
from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from dataclasses import astuple
from pathlib import Path

from gapfuzz.core.ids import BackendName
from gapfuzz.core.text import printable

from gapfuzz.fuzzer.cli.parser import EXIT_BAD_INPUT, UserError, build_parser
from gapfuzz.fuzzer.cli.read import cmd_diff, cmd_report, cmd_triage, open_run


EXIT_PIPE_CLOSED = 141  # what a shell reports for a command that SIGPIPE stopped (128 + 13)
EXIT_INTERRUPTED, EXIT_TERMINATED = 130, 143  # and one that Ctrl-C (SIGINT) or SIGTERM stopped


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread as Ctrl-C raises KeyboardInterrupt (``main`` installs the handler):
    every ``finally`` on the way out runs (a sandbox's executor is killed, a file closed), no ``except Exception``
    takes it for an error, and code that stops cleanly on Ctrl-C does on it too (Ray's waits, for one, turn any
    other exception raised inside them into a SystemError; they raise a KeyboardInterrupt of their own instead,
    so ``_terminated`` remembers the signal)."""


_terminated = False  # SIGTERM arrived during this command


def stop_status(e: BaseException) -> int | None:
    """130 or 143 for an exception that means the user stopped the command (Ctrl-C or SIGTERM), else None."""
    if isinstance(e, KeyboardInterrupt):
        return EXIT_TERMINATED if isinstance(e, Terminated) or _terminated else EXIT_INTERRUPTED
    return None


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
    from gapfuzz.results.folder import Folder, FolderError, run_folder_around
    from gapfuzz.analysis.triage import render_summary, render_unmutated
    from gapfuzz.core.bugs import Status, Verdict

    from gapfuzz.fuzzer.config.campaign import load_campaign
    from gapfuzz.fuzzer.config.backends import exec_options_allowed
    from gapfuzz.fuzzer.driver import Driver
    from gapfuzz.fuzzer.cli.launch import LaunchError, check_address, check_cache, check_run_dir, resume_command
    from gapfuzz.fuzzer.config.plan import select_seeds, sized_seeds

    with exec_options_allowed(args.allow_exec_options):  # options naming a program: only when the user says so
        campaign = load_campaign(args.campaign)
    # bad selections, and a plan past its bound, fail here, before anything is written or built
    seed_ids = sized_seeds(campaign, select_seeds(campaign), None if args.quiet else _planning_ticker())
    if args.check:
        return _check(campaign, seed_ids)
    try:
        run_dir = Folder(args.out or f"{campaign.output}/{campaign.name}")  # a path, or a URI (s3://...)
    except FolderError as e:
        raise UserError(str(e)) from None
    around = run_folder_around(run_dir.local_path) if run_dir.local_path is not None else None
    if around is not None:
        raise UserError(f"{run_dir}: inside the run folder {around}; a run folder writes only inside itself, "
                        f"so give --out a folder of its own")
    address = args.address or campaign.address
    driver = Driver(campaign, run_dir, address=args.address, progress=not args.quiet)
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
        where = f"--address {address}" if address else "Ray"
        raise UserError(f"{where}: {' '.join(str(e).split())[:200]}") from None
    except (LaunchError, OSError, FolderError) as e:
        raise UserError(str(e) if isinstance(e, LaunchError) else f"{run_dir}: cannot write: {e.strerror or e}") \
            from None
    try:
        driver.run(seed_ids, sized=True)
    except ConnectionError as e:  # the embedded Ray did not start (workers.run.pool.connect): nothing is lost
        raise UserError(f"Ray: {' '.join(str(e).split())[:200]}; continue with: "
                        f"{resume_command(args.campaign, run_dir, args.address)}") from None
    except OSError as e:  # the run folder's disk: what was written before stays
        raise UserError(f"{run_dir}: cannot write: {e.strerror or e}; the records written so far are kept "
                        f"(continue with: {resume_command(args.campaign, run_dir, args.address)})") from None
    except BaseException as e:  # Ctrl-C or SIGTERM: what was recorded stays, and says how to go on
        status = stop_status(e)
        if status is None:
            raise
        print(f"\n{'interrupted' if status == EXIT_INTERRUPTED else 'terminated'}: records so far are kept in "
              f"{run_dir}; continue with: {resume_command(args.campaign, run_dir, args.address)}", file=sys.stderr)
        return status
    df = _records(str(run_dir), SUMMARY_COLUMNS)
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
    return 0


def _check(campaign, seed_ids: list[str]) -> int:
    """``gapfuzz run --check``: the file is valid (it loaded) and this is what it would run."""
    from gapfuzz.fuzzer.config.plan import plan_lines

    print("\n".join(plan_lines(campaign, seed_ids)))
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


def cmd_repro(args) -> int:
    from gapfuzz.results.store import ResultsError

    from gapfuzz.fuzzer.repro.across import AgainstError, against_form
    from gapfuzz.fuzzer.repro.minimise import ReproError, reproduce_cluster

    try:
        for given in args.against:  # each release as text now; whose stack it is, once a cluster's target is known
            against_form(given)
    except AgainstError as e:
        raise UserError(str(e)) from None
    run = open_run(args.run_dir)  # a bad folder is one clear line before anything is built
    if args.all:
        return _repro_all(run, args)
    if not args.cluster_id:
        raise UserError("gapfuzz repro: name a cluster id (from gapfuzz triage), or give --all")
    try:
        r = reproduce_cluster(args.run_dir, args.cluster_id, args.out, max_calls=args.max_calls, tries=args.tries,
                              allow_plugins=args.allow_plugins, allow_exec_options=args.allow_exec_options,
                              against=tuple(args.against))
    except (ResultsError, ReproError) as e:
        raise UserError(str(e)) from None
    if r.status == "not-reproduced" and not r.nodes_after:
        print(f"the cluster's representative did not show the bug again ({r.predicate_calls} tries): "
              f"not minimised; see {r.folder}/shrink.json")
        for note in r.notes:
            print(f"note: {printable(note)}")
        return 1
    print(f"{r.status}: {r.nodes_before} -> {r.nodes_after} operator calls with {r.predicate_calls} checks "
          f"in {r.seconds:.0f} s; repro.py ({r.form}, {r.lines} lines) failed {r.failures} of {r.tries} fresh runs")
    for release, shows in r.releases.items():
        print(f"under {printable(release)}: {shows}")
    for note in r.notes:
        print(f"note: {printable(note)}")
    print(f"reproducer: {r.folder}/repro.py   report: {r.folder}/report.md")
    return 0 if r.status == "reproducible" else 1


def _repro_all(run, args) -> int:
    """Every vendor cluster under one time budget, the unreproduced first; a table of what each gave."""
    import time

    from gapfuzz.analysis.table import format_table
    from gapfuzz.results.store import ResultsError

    from gapfuzz.fuzzer.repro.minimise import ReproError, reproduce_cluster

    if run.path is None:
        raise UserError(f"{args.run_dir}: gapfuzz repro minimises from a local run folder")
    ids = list(run.clusters(vendor=True)["cluster"])
    todo = [c for c in ids if not (run.path / "repros" / c / "shrink.json").is_file()]
    t0, rows, applied = time.perf_counter(), [], set()
    for i, cluster in enumerate(todo):
        if time.perf_counter() - t0 > args.budget_s:
            rows.append([cluster, "not started: budget spent", "", "", ""])
            continue
        print(f"[{i + 1}/{len(todo)}] {cluster}", flush=True)
        against = _against_for(run, cluster, args.against)
        applied.update(against)
        try:
            r = reproduce_cluster(args.run_dir, cluster, None, max_calls=args.max_calls, tries=args.tries,
                                  allow_plugins=args.allow_plugins, allow_exec_options=args.allow_exec_options,
                                  against=against)
            rows.append([cluster, r.status, r.form, r.lines, f"{r.seconds:.0f}"])
        except (ResultsError, ReproError) as e:
            rows.append([cluster, f"not minimised: {e}"[:100], "", "", ""])
    print(format_table(["cluster", "status", "form", "lines", "seconds"], rows))
    print(f"{len(ids) - len(todo)} of {len(ids)} vendor clusters had a reproducer already")
    for given in dict.fromkeys(a for a in args.against if a not in applied):
        print(f"note: --against {printable(given)!r}: no cluster minimised here is on that stack")
    return 0


def _against_for(run, cluster: str, against: list[str]) -> tuple[str, ...]:
    """The ``--against`` releases that name the stack of ``cluster``'s representative (its distribution, or torch):
    with ``--all``, each cluster is checked on the releases of its own stack. Where the stack cannot be told (an
    old folder, a plug-in), all of them, for ``reproduce`` to judge."""
    from gapfuzz.fuzzer.repro.across import against_form, against_names
    from gapfuzz.workers.run.registry import backend_class

    if not against:
        return ()
    try:
        stack = str(run.cluster(cluster, ["stack"])["stack"].iloc[0])
        names = against_names(stack, backend_class(stack).release_distribution())
    except Exception:  # noqa: BLE001 - the stack is a filter; reproduce says what is wrong with the cluster
        return tuple(against)
    return tuple(a for a in against if against_form(a)[0].lower() in names)


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

    from gapfuzz.workers.run.jobs import Stranded

    from gapfuzz.fuzzer.catalog_scan import pick, scan
    from gapfuzz.fuzzer.cli.launch import LaunchError, check_address

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
            "seeds scan": cmd_seeds_scan, "repro": cmd_repro, "mutators": cmd_mutators, "backends": cmd_backends,
            "schema": cmd_schema}


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
    with _sigterm_raises():
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
        _end_children()
    return status


def _raise_terminated(signum, frame):
    global _terminated
    _terminated = True
    raise Terminated


class _sigterm_raises:
    """SIGTERM raises ``Terminated`` in the main thread while a command runs (Python's default would end the
    process at once: no ``finally``, a sandbox's executor left running), as SIGINT raises KeyboardInterrupt."""

    def __enter__(self):
        global _terminated
        _terminated = False
        self.main = threading.current_thread() is threading.main_thread()
        if self.main:
            self.previous = signal.getsignal(signal.SIGTERM)
            signal.signal(signal.SIGTERM, _raise_terminated)

    def __exit__(self, *exc):
        if self.main:
            signal.signal(signal.SIGTERM, self.previous if self.previous is not None else signal.SIG_DFL)
        return False


def _end_children() -> None:
    """After Ctrl-C or SIGTERM, once every ``finally`` ran: Ray stopped if this process started it, then any
    process still left of this one's making killed: its descendants, the process group each leads (a sandbox's
    executor, a reproducer's run are each in a session of their own), and what was orphaned in this process's
    own group (a package installer's children). Linux only (``/proc``); elsewhere the ``finally`` blocks are all.
    A second Ctrl-C meanwhile is ignored: the command has ended, and a traceback would say it had not."""
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if main_thread else None
    try:
        _end_processes()
    finally:
        if main_thread:
            signal.signal(signal.SIGINT, previous if previous is not None else signal.default_int_handler)


def _end_processes() -> None:
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        try:
            ray.shutdown()
        except Exception:  # noqa: BLE001 - on the way out: what is left is killed below
            pass
    for pid, group in _left_behind():
        try:
            if group:
                os.killpg(pid, signal.SIGKILL)
            else:
                os.kill(pid, signal.SIGKILL)
        except OSError:  # gone already, or not ours to kill
            pass


def _left_behind() -> list[tuple[int, bool]]:
    """(pid, whether it leads a process group of its own) of every process to end: this one's descendants, and
    the members of the group this one leads whose parent is neither in it nor this one's parent (orphans; not
    a pipeline's other commands)."""
    me, parent, group = os.getpid(), os.getppid(), os.getpgrp()
    table = {}  # pid -> (parent, group)
    try:
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/stat") as f:
                        fields = f.read().rsplit(")", 1)[1].split()
                    table[int(entry)] = (int(fields[1]), int(fields[2]))
                except (OSError, IndexError, ValueError):
                    continue
    except OSError:
        return []
    out, todo = {}, [me]
    while todo:
        p = todo.pop()
        for pid, (pp, pg) in table.items():
            if pp == p and pid not in out:
                out[pid] = pg == pid and pg != group
                todo.append(pid)
    if group == me:
        out.update({pid: False for pid, (pp, pg) in table.items() if pg == me and pid != me and pid not in out
                    and pp != parent and table.get(pp, (0, 0))[1] != me})
    return list(out.items())


def _main(argv: list[str] | None) -> int:
    args = build_parser(COMMANDS).parse_args(argv)
    try:
        return args.fn(args)
    except Exception as e:
        if not isinstance(e, _bad_input_errors()):
            raise
        print(f"gapfuzz: {printable(str(e), newlines=False)}", file=sys.stderr)  # a file's text, shown not obeyed
        return EXIT_BAD_INPUT


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
    return (UserError, *found)


if __name__ == "__main__":
    sys.exit(main())

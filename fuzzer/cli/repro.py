"""``gapfuzz repro``: one cluster minimised into a reproducer, or every vendor cluster under one time budget."""
from __future__ import annotations

import time

from gapfuzz.core.text import printable
from gapfuzz.fuzzer.cli.parser import UserError
from gapfuzz.fuzzer.cli.read import open_run


def cmd_repro(args) -> int:
    from gapfuzz.fuzzer.repro.across import AgainstError, against_form
    from gapfuzz.fuzzer.repro.minimise import ReproError, reproduce_cluster
    from gapfuzz.results.store import ResultsError

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
    if r.stopped_at == "confirm":  # the stage that found the bug gone (shrink.json says why)
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


def cmd_explain(args) -> int:
    from gapfuzz.fuzzer.repro.attribute import attribute_cluster, lines
    from gapfuzz.fuzzer.repro.replayed import ReproError
    from gapfuzz.results.store import ResultsError

    open_run(args.run_dir)
    try:
        a = attribute_cluster(args.run_dir, args.cluster_id, allow_plugins=args.allow_plugins,
                              allow_exec_options=args.allow_exec_options)
    except (ResultsError, ReproError) as e:
        raise UserError(str(e)) from None
    print("\n".join(printable(line) for line in lines(a)))
    return 0


def _repro_all(run, args) -> int:
    """Every vendor cluster under one time budget, the unreproduced first; a table of what each gave."""
    from gapfuzz.analysis.table import format_table
    from gapfuzz.fuzzer.repro.minimise import ReproError, reproduce_cluster
    from gapfuzz.results.store import ResultsError

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

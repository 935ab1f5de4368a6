"""Minimise a cluster's representative and write a reproducer and a bug report a vendor can act on.

Steps: replay the representative's recipe (checking its graph hash), confirm the bug, drop
mutations from the recipe, shrink the graph (passes in ``fuzzer.repro.shrink``), write ``repro.py``,
``inputs.pt`` and ``report.md``, then run ``repro.py`` in fresh processes where gapfuzz cannot be
imported; a reproducer that does not fail every time is marked flaky, with how often it failed.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from gapfuzz.core.bugs import GRADIENT_SYMPTOMS, LIMITS, MISSING, Kind, ReproStatus, Status, Symptom, Verdict
from gapfuzz.core.codegen import ScriptRefused, strings_in, vet
from gapfuzz.core.files import OutsideFolder, inside
from gapfuzz.core.modes import mode_of
from gapfuzz.core.templates import template
from gapfuzz.fuzzer.generate import replay
from gapfuzz.fuzzer.recipe import Recipe
from gapfuzz.fuzzer.repro.across import ABSENT, SCRIPT_FAILED, campaign_releases, check_releases
from gapfuzz.fuzzer.repro.across import in_words as release_words
from gapfuzz.fuzzer.repro.code import plugin_path, reproducer, save_inputs
from gapfuzz.fuzzer.repro.replayed import ReproError, folder_of, replayed, representative
from gapfuzz.fuzzer.repro.report import bug_report
from gapfuzz.fuzzer.repro.reproducers.case import Case, Script, check_of
from gapfuzz.fuzzer.repro.reproducers.stacks import native_scripts
from gapfuzz.fuzzer.repro.shrink.core import Shrinker, counted
from gapfuzz.fuzzer.repro.shrink.passes import STRUCTURE, VALUES, cut_after, isolating
from gapfuzz.fuzzer.repro.shrink.predicate import SameBug
from gapfuzz.workers.run.probes import Probe, probed
from gapfuzz.workers.run.registry import BackendSpec
from gapfuzz.workers.run.sandbox import Sandbox

log = logging.getLogger("gapfuzz.fuzzer")
FILES = ("repro.py", "inputs.pt", "model.onnx")  # what a reproducer's folder ships, and verify copies
WRITTEN = (*FILES, "report.md", "shrink.json")  # all that repro writes into its folder
BLOCK_GAPFUZZ = "for m in ('fuzzer', 'workers', 'seeds', 'analysis'):\n    sys.modules[m] = None\n"


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


def verify(folder: Path, tries: int = 3, timeout: float = 300, block_gapfuzz: bool = True,
           reproduced: tuple = (1,), hang_reproduces: bool = False, python: str | None = None) -> tuple[int, str]:
    """Run repro.py ``tries`` times in fresh interpreters (that cannot import gapfuzz, unless the backend
    is a plug-in whose class needs it); returns how many reproduced the bug: ended with an exit status
    in ``reproduced`` (1; a crash's signal as its negative), or, with ``hang_reproduces`` (the bug is a
    hang), ran past ``timeout``, the campaign's. Each runs in a scratch folder holding only ``repro.py``
    and ``inputs.pt``, with no script folder on ``sys.path`` (``-P``): a run folder is data, and a
    ``torch.py`` shipped beside a reproducer must not stand in for torch. ``python``: the interpreter (a
    release's environment's; this one by default)."""
    failures, last = 0, ""
    code = "import sys\n" + (BLOCK_GAPFUZZ if block_gapfuzz else "") + \
        "try:\n    exec(compile(open('repro.py').read(), 'repro.py', 'exec'), {'__name__': '__main__'})\n" \
        "except Exception:  # the script itself failed (exit 1 would read as the bug)\n" \
        f"    import traceback\n    traceback.print_exc()\n    sys.exit({SCRIPT_FAILED})\n"
    safe_path = ["-P"] if sys.version_info >= (3, 11) else []  # Python 3.10 has no -P; the scratch folder stands
    for _ in range(tries):
        # output to a file and the process in its own group: a child that a crashing stack forked and
        # left behind (seen with OpenVINO) would otherwise hold the pipes open until the timeout
        with tempfile.TemporaryFile("w+") as log, tempfile.TemporaryDirectory(prefix="gapfuzz-verify-") as scratch:
            for name in FILES:
                if (folder / name).is_file():
                    shutil.copyfile(folder / name, Path(scratch) / name)
            proc = subprocess.Popen([python or sys.executable, *safe_path, "-c", code], cwd=scratch, stdout=log,
                                    stderr=subprocess.STDOUT, text=True, start_new_session=True)
            try:
                rc = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                rc = None
            finally:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait()
            log.seek(0)
            if rc is None:
                failures += hang_reproduces
                last = log.read()[-4000:] + f"\n[no result within {timeout:g} s: " + \
                    ("the hang is reproduced]" if hang_reproduces else "not the bug]")
            else:
                failures += rc in reproduced
                last = log.read()[-4000:] + f"\n[exit status {rc}]"
    return failures, last


def reproduced_by(record: dict, key) -> tuple:
    """The exit statuses of repro.py that mean the bug is there: 1, and for a crash what it died of
    (a signal, as Popen gives it: its negative; an exit status)."""
    cause = str(record.get("cause") or "")
    if key.kind != Kind.FAILURE or record["status"] != Status.CRASH:
        return (1,)
    if cause.startswith("signal:") and hasattr(signal, cause[7:].split()[0]):
        return 1, -int(getattr(signal, cause[7:].split()[0]))
    if cause.startswith("exit ") and cause[5:].strip().lstrip("-").isdigit():
        return 1, int(cause[5:].strip())
    return (1,)


def reproduce(run_dir, record: dict, out_dir, cluster: dict | None = None, max_calls: int = 300,
              tries: int = 3, allow_plugins: bool = False, progress=None,
              allow_exec_options: bool = False, against: tuple = ()) -> ReproResult:
    """Minimise ``record``'s variant to the smallest graph that shows its bug key, write the reproducer
    and report into ``out_dir``; ``progress(line)`` hears each step (default: standard error). The reproducer
    is then checked on every release of the target's stack the campaign ran, and on ``against`` (``STACK==
    RELEASE``: ``fuzzer.repro.across``)."""
    t0 = time.perf_counter()
    say = progress or _say
    out = Path(out_dir)
    _own_folder(out)  # before any work: a folder of someone else's files is refused, not emptied
    r = replayed(run_dir, record, allow_plugins, allow_exec_options, against, say)
    c, key, target, reference, python, variant, settings = (r.campaign, r.key, r.target, r.reference, r.python,
                                                            r.variant, r.settings)
    recipe, extra, probe = r.recipe, r.against, r.probe
    output_kind = record.get("output_kind") or "tensor"
    # checked in one warm worker; a crash, a hang or running out of memory (the process goes) in a fresh one each
    same_bug = SameBug(target, reference, c.oracle, key, settings, record["seed_id"], output_kind,
                       fresh=record["status"] in (Status.CRASH, *LIMITS), sandbox=Sandbox(python=python),
                       probe=record.get("probe"))
    predicate, counts = counted(same_bug)
    out.mkdir(parents=True, exist_ok=True)
    result = ReproResult(str(out), ReproStatus.NOT_REPRODUCED, nodes_before=variant.node_count, backend=target.name,
                         stack=f"{target.stack}@{target.device}", kind=str(key.kind),
                         symptom=key["symptom"] if key.kind != Kind.FAILURE else
                         f"{key['status']} {key['error_type']} {key['template']}")
    _finish(result, t0)  # shrink.json from the start: the folder is a reproducer's, whatever stops it
    say(f"{record['variant_id']} on {target.name}: {variant.node_count} operator calls; confirming the bug")
    try:
        # the op the key names, alone: when it is the bug, one check confirms it and removes the rest
        shrinker = Shrinker(variant, _announced(predicate, say), max_calls=max_calls)
        if shrinker.apply(isolating(key.op, record.get("first_div_node")), "isolate"):
            say(f"the bug shows at {key.op} alone: {shrinker.current.node_count} operator call(s)")
        else:
            variant = _start(variant, record, predicate, say)
            if variant is None:
                result.predicate_calls = same_bug.calls
                result.notes += torch_apart(target, reference)
                return _finish(result, t0)
            shrinker = Shrinker(variant, shrinker.predicate, max_calls=max_calls, seen=shrinker.seen,
                                stats=shrinker.stats, calls=shrinker.calls)
        dropped = []
        shrinker.apply(lambda sh: dropped.append(_drop_mutations(sh, recipe, c.capture.max_params, probe)),
                       "drop_mutations")
        shrinker.run(STRUCTURE)  # fewer calls first: the values of what remains are cheaper to shrink
        final = shrinker.run(VALUES)
        result.stats = shrinker.report()
        say(f"shrunk to {final.node_count} operator call(s) with {same_bug.calls} checks")
        unexplained = key.kind == Kind.DISCREPANCY and key["explanation"] == MISSING  # a behaviour is its explanation
        explained = same_bug.explanation(final) if unexplained else None
    finally:
        same_bug.close()
    result.nodes_after, result.predicate_calls, result.mutations_dropped = final.node_count, same_bug.calls, dropped[0]
    result.candidates_bisected = same_bug.bisected
    result.ops = [str(n.target) for n in final.gm.graph.nodes if n.op == "call_function"]
    title = _title(record, target.name, final)
    compare = {k: c.config["compare"][k] for k in ("tolerances", "multiplier", "far")}
    failure_type, failure_phrase = _failure_words(key)
    for stale in (*FILES, "report.md"):
        inside(out, stale).unlink(missing_ok=True)
    check = dict(timeout=settings.timeout_s, block_gapfuzz=target.backend_cls().prepare_fn is not None,
                 reproduced=reproduced_by(record, key), hang_reproduces=record["status"] == Status.TIMEOUT,
                 python=python)
    case = Case(final, target, record, title,
                check=check_of(record, key["symptom"] if key.kind == Kind.DISCREPANCY else ""),
                tolerance=c.compare.settings.tolerances.get(str(record.get("output_dtype") or "float32"),
                                                            (1.3e-6, 1e-5)),
                options=dict(target.options), error_type=failure_type, phrase=failure_phrase,
                class_path=plugin_path(target) if target.backend_cls().prepare_fn is None else "",
                timeout_s=settings.timeout_s)
    script, first, output = _native(case, out, check, say) if not explained else (None, 0, "")
    if script is None:  # the generic form: gapfuzz's own harness, copied, with inputs.pt
        say("writing the generic reproducer (inputs.pt beside it)")
        script = Script(reproducer(final, target, record, title, compare, output_kind, c.compare.detection_adapter,
                                   settings.timeout_s), "generic", [])
        _write(out, script, case)
        save_inputs(final, inside(out, "inputs.pt"))
    say(f"running repro.py in {tries - first} more fresh processes" if first else
        f"running repro.py in {tries} fresh processes")
    more, output = verify(out, tries - first, **check) if tries > first else (0, output)
    result.failures = first + more
    result.tries, result.form, result.lines, result.notes = tries, script.form, script.lines, list(script.notes)
    if explained:
        result.notes.append(f"the minimised graph's divergence is explained as {explained} (what triage says of a "
                            f"precision or option behaviour): it is not this cluster's defect, so not offered")
        result.failures = 0
    result.status = (ReproStatus.REPRODUCIBLE if result.failures == tries else
                     ReproStatus.FLAKY if result.failures else ReproStatus.NOT_REPRODUCED)
    releases = [*campaign_releases(c.backends.all(), target), *extra]
    if releases and result.failures:
        result.releases = check_releases(releases, lambda py: verify(out, 1, **{**check, "python": py}), say)
        if ABSENT in result.releases.values() and list(result.releases.values())[-1] == ABSENT:
            words = release_words(result.releases)
            result.notes.append(words[:1].upper() + words[1:])
    inside(out, "report.md").write_text(bug_report(title, record, target, final, recipe, (out / "repro.py").read_text(),
                                              output, result, cluster or {}, script))
    say(f"{result.status}: repro.py ({script.form}, {script.lines} lines) failed {result.failures} of {tries} runs")
    return _finish(result, t0)


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


def _say(line: str) -> None:
    print(f"[repro] {line}", file=sys.stderr, flush=True)


def _native(case: Case, out: Path, check: dict, say) -> tuple[Script | None, int, str]:
    """The first reproducer in the stack's own API that shows the bug in one fresh run (it stays written
    in ``out``), that run's count and output; None when no form does."""
    output = ""
    for candidate in native_scripts(case):
        say(f"checking a reproducer in the stack's own API ({candidate.form}, {candidate.lines} lines)")
        _write(out, candidate, case)
        first, output = verify(out, 1, **check)
        if first:
            return candidate, first, output
        log.info("the %s reproducer does not show the bug: %s", candidate.form, output[-1500:])
    return None, 0, output


def _start(variant, record: dict, predicate, say):
    """Where shrinking starts: the graph cut right after the located node, whose outputs then show the
    node's own symptom; else the whole variant. None when neither shows the bug."""
    node = record.get("first_div_node")
    if node and record.get("symptom") not in GRADIENT_SYMPTOMS and not mode_of(variant.mode).backward and \
            any(n.name == node for n in variant.gm.graph.nodes if n.op == "call_function"):
        try:
            cut = cut_after(variant, node)
        except Exception:  # noqa: BLE001 - a node whose prefix is no graph of its own: start whole
            cut = None
        if cut is not None and predicate(cut):
            say(f"the bug shows at {record.get('first_div_op')} ({node}): {cut.node_count} operator calls")
            return cut
    if predicate(variant):
        return variant
    say("the representative did not show its bug again")
    return None


def _announced(predicate, say):
    """``predicate``, telling each accepted candidate's size and every tenth check."""
    calls = [0]

    def check(v):
        calls[0] += 1
        ok = predicate(v)
        if ok or calls[0] % 10 == 0:
            say(f"check {calls[0]}: {v.node_count} operator calls" + (" (kept)" if ok else ""))
        return ok
    return check


def _failure_words(key) -> tuple[str, str]:
    """A failure's exception type (its last name) and the fixed start of its message template."""
    if key.kind != Kind.FAILURE:
        return "", ""
    words = key["template"].split(" | ")[0].split("<")[0].strip()
    return key["error_type"].rsplit(".", 1)[-1], words[:60] if len(words) >= 8 else ""


def _own_folder(out: Path) -> None:
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


def _write(out: Path, script: Script, case: Case) -> None:
    """repro.py and the files it ships, once ``script`` is checked to carry no value of ``case`` as code."""
    try:
        vet(script.text, strings_in(case.record, case.title, case.options, case.error_type, case.phrase,
                                    case.class_path), str(out / "repro.py"))
        for stale in FILES[1:]:
            inside(out, stale).unlink(missing_ok=True)
        inside(out, "repro.py").write_text(script.text)
        for name, data in script.files.items():
            inside(out, name).write_bytes(data)
    except (ScriptRefused, OutsideFolder) as e:
        raise ReproError(str(e)) from None


def _finish(result: ReproResult, t0: float) -> ReproResult:
    result.seconds = time.perf_counter() - t0
    inside(result.folder, "shrink.json").write_text(json.dumps(asdict(result), indent=1, default=str))
    return result


def _drop_mutations(sh: Shrinker, recipe: Recipe, max_params, probe: Probe) -> int:
    """Recipe-level pass: remove mutations one at a time (last first) while the bug stays. Each
    candidate goes through ``consider``, not larger than the current variant: a mutation that only
    lays an input out differently changes no size, and stays if the bug needs it."""
    dropped = 0
    for i in reversed(range(len(recipe.mutations))):
        fewer = Recipe(recipe.seed, recipe.mutations[:i] + recipe.mutations[i + 1:], recipe.rng, recipe.mode,
                       recipe.train_layers)
        try:
            candidate = probed(replay(fewer, max_params), probe)
        except Exception:  # noqa: BLE001 - later mutations may need earlier ones; keep them then
            candidate = None
        if sh.consider(candidate, no_larger=True):
            recipe.mutations, dropped = fewer.mutations, dropped + 1
    return dropped


def _title(record: dict, backend: str, v) -> str:
    if record["status"] == Status.MISMATCH and record.get("symptom") in GRADIENT_SYMPTOMS:
        op = record.get("first_div_op") or (v.ops[0] if v.ops else "a graph")
        return (f"{backend}: the backward of {op} diverges from PyTorch eager in training "
                f"({record.get('worst_output') or 'a gradient'}, {record.get('output_dtype')})")
    if record["status"] == Status.MISMATCH and record.get("symptom") == Symptom.MISSING_ERROR:
        op = record.get("first_div_op") or (v.ops[0] if v.ops else "a graph")
        raised = (record.get("message") or "an error").splitlines()[0][:100]
        return f"{backend}: {op} returns a result where PyTorch eager raises ({raised})"
    if record["status"] == Status.MISMATCH:
        op = record.get("first_div_op") or (v.ops[0] if v.ops else "a graph")
        blame = " (float64 blames eager)" if record.get("verdict") == Verdict.REFERENCE_DIVERGENT else ""
        return (f"{backend}: {op} diverges from PyTorch eager{blame} ({record.get('symptom')}, "
                f"{record.get('output_dtype')})")
    what = (record.get("error_type") or record.get("cause") or record["status"]).rsplit(".", 1)[-1]
    message = template(record.get("message"))[:80]
    return f"{backend}: {record['status']} at {record.get('stage')} ({what}{': ' + message if message else ''})"


def reproduce_cluster(run_dir, cluster_id: str, out_dir=None, max_calls: int = 300, tries: int = 3,
                      allow_plugins: bool = False, progress=None, allow_exec_options: bool = False,
                      against: tuple = ()) -> ReproResult:
    """Minimise the representative (smallest graph) of cluster ``cluster_id`` of a run folder."""
    record, row, run_path = representative(run_dir, cluster_id)
    out = Path(out_dir) if out_dir else folder_of(run_path, "repros", row["cluster"])
    return reproduce(run_dir, record, out, cluster=row, max_calls=max_calls, tries=tries,
                     allow_plugins=allow_plugins, progress=progress, allow_exec_options=allow_exec_options,
                     against=against)

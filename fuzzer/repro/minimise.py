"""Minimise a cluster's representative and write a reproducer and a bug report a vendor can act on.

A ``Reproduction`` is a staged job, as a backend's run is (``workers.run.backend_run``): the replay's
stages (``replayed.Replay``: the key, the campaign and target, the release, the recipe and probe, the
variant, the settings), then the predicate, confirming the bug, shrinking (the recipe's mutations, then
the graph: ``fuzzer.repro.shrink``), explaining, writing ``repro.py`` (in the stack's own API, else the
generic form with ``inputs.pt``), verifying it in fresh processes where gapfuzz cannot be imported (one
that does not fail every time is flaky), checking it across releases, and ``report.md``. shrink.json
says which stage stopped it and why, and what each stage took.
"""
from __future__ import annotations

import logging
import sys
import time
from pathlib import Path

from gapfuzz.core.bugs import GRADIENT_SYMPTOMS, LIMITS, MISSING, Kind, ReproStatus, Status
from gapfuzz.core.files import inside
from gapfuzz.core.tolerances import DEFAULT_TOLERANCES
from gapfuzz.fuzzer.repro.across import ABSENT, campaign_releases, check_releases, torch_apart
from gapfuzz.fuzzer.repro.across import in_words as release_words
from gapfuzz.fuzzer.repro.code import plugin_path, reproducer, save_inputs
from gapfuzz.fuzzer.repro.folder import ReproResult, clear, finish, own_folder, write_script
from gapfuzz.fuzzer.repro.record import ReproError
from gapfuzz.fuzzer.repro.replayed import Replay, folder_of, representative, stage
from gapfuzz.fuzzer.repro.report import bug_report, failure_words, title
from gapfuzz.fuzzer.repro.reproducers.case import Case, Script, check_of
from gapfuzz.fuzzer.repro.reproducers.stacks import native_scripts
from gapfuzz.fuzzer.repro.shrink.core import Shrinker, announced
from gapfuzz.fuzzer.repro.shrink.passes import STRUCTURE, VALUES, cut_after, dropping_mutations, isolating
from gapfuzz.fuzzer.repro.verify import reproduced_by, verify

log = logging.getLogger("gapfuzz.fuzzer")
# what callers import from here: the result, its error, the fresh-process check and the release note
__all__ = ["Reproduction", "ReproError", "ReproResult", "reproduce", "reproduce_cluster", "reproduced_by",
           "torch_apart", "verify"]


class Reproduction(Replay):
    """One record's variant minimised into a reproducer in ``out_dir``, stage by stage: the replay's stages
    (``Replay``), then ``predicate``, ``confirm``, ``shrink``, ``explain``, ``write``, ``verify``, ``across`` and
    ``report``. A stage that ends it early, or fails, is named in shrink.json with why (``stopped_at``,
    ``reason``); ``progress(line)`` hears each step (default: standard error)."""

    def __init__(self, run_dir, record, out_dir, cluster: dict | None = None, max_calls: int = 300, tries: int = 3,
                 allow_plugins: bool = False, progress=None, allow_exec_options: bool = False, against: tuple = ()):
        super().__init__(run_dir, record, allow_plugins, allow_exec_options, against, progress or _say)
        self.out, self.cluster, self.max_calls, self.tries = Path(out_dir), cluster or {}, max_calls, tries
        self.result: ReproResult | None = None  # once the folder is the reproducer's (its shrink.json written)

    def run(self) -> ReproResult:
        """The reproducer, its report and shrink.json; a ``ReproError`` (one line) where a stage cannot go on."""
        self.t0 = time.perf_counter()
        self.claim()  # before any work: a folder of someone else's files is refused, not emptied
        try:
            self.replayed = self.replay()  # the replay's stages: all a run of the variant needs
            self.begin()
            final, explained = self.minimise()
            if final is None:
                return self.finish()
            script, first, output = self.write(final, explained)
            output = self.verify_script(script, first, output, explained)
            self.across()
            self.report(final, script, output)
        except Exception as e:
            self.failed(e)
            raise
        return self.finish()

    @stage("folder")
    def claim(self) -> None:
        own_folder(self.out)  # new, empty, or a reproducer's

    @stage("folder")
    def begin(self) -> None:
        """The folder made the reproducer's: shrink.json from the start, whatever stops it."""
        r, key = self.replayed, self.replayed.key
        self.mode = r.variant.mode  # its RunMode: whether its runs go backward
        self.out.mkdir(parents=True, exist_ok=True)
        self.result = ReproResult(str(self.out), ReproStatus.NOT_REPRODUCED, nodes_before=r.variant.node_count,
                                  backend=r.target.name, stack=f"{r.target.stack}@{r.target.device}",
                                  kind=str(key.kind), symptom=key["symptom"] if key.kind != Kind.FAILURE else
                                  f"{key['status']} {key['error_type']} {key['template']}")
        self.finish()

    def minimise(self) -> tuple:
        """The smallest variant that still shows the bug, and what explains it (None: nothing does); (None,
        None) when the representative does not show it again."""
        self.same_bug = self.predicate()
        try:
            shrinker = self.confirm()
            if shrinker is None:
                return None, None
            final = self.shrink(shrinker)
            return final, self.explain(final)
        finally:
            self.result.predicate_calls, self.result.candidates_bisected = self.same_bug.calls, self.same_bug.bisected
            self.same_bug.close()

    @stage("predicate")
    def predicate(self):
        """The predicate "still this bug": checked in one warm worker; a crash, a hang or running out of memory
        (the process goes) in a fresh one each."""
        return self.replayed.same_bug(fresh=self.replayed.record.status in (Status.CRASH, *LIMITS))

    @stage("confirm")
    def confirm(self) -> Shrinker | None:
        """The bug shown again: by the op the key names alone (one check, and the rest is gone), else by the
        graph cut after the located node, else by the whole variant; None when none shows it."""
        r, say = self.replayed, self.say
        say(f"{r.record.variant_id} on {r.target.name}: {r.variant.node_count} operator calls; confirming the bug")
        shrinker = Shrinker(r.variant, announced(self.same_bug, say), max_calls=self.max_calls)
        if shrinker.apply(isolating(r.key.op, r.record.first_div_node), "isolate"):
            say(f"the bug shows at {r.key.op} alone: {shrinker.current.node_count} operator call(s)")
            return shrinker
        start = self._start(shrinker.predicate)
        if start is None:
            self.stop("the representative did not show its bug again")
            self.result.notes += torch_apart(r.target, r.reference)
            return None
        return Shrinker(start, shrinker.predicate, max_calls=self.max_calls, seen=shrinker.seen,
                        stats=shrinker.stats, calls=shrinker.calls)

    def _start(self, predicate):
        """Where shrinking starts: the graph cut right after the located node, whose outputs then show the
        node's own symptom; else the whole variant. None when neither shows the bug."""
        variant, record = self.replayed.variant, self.replayed.record
        node = record.first_div_node
        if node and record.symptom not in GRADIENT_SYMPTOMS and not self.mode.backward and \
                any(n.name == node for n in variant.gm.graph.nodes if n.op == "call_function"):
            try:
                cut = cut_after(variant, node)
            except Exception:  # noqa: BLE001 - a node whose prefix is no graph of its own: start whole
                cut = None
            if cut is not None and predicate(cut):
                self.say(f"the bug shows at {record.first_div_op} ({node}): {cut.node_count} operator calls")
                return cut
        if predicate(variant):
            return variant
        self.say("the representative did not show its bug again")
        return None

    @stage("shrink")
    def shrink(self, shrinker: Shrinker):
        """The recipe's mutations the bug does not need dropped, then fewer calls (the values of what remains
        are cheaper to shrink), then smaller and simpler values."""
        r = self.replayed
        shrinker.apply(dropping_mutations(r.recipe, r.campaign.capture.max_params, r.probe))
        shrinker.run(STRUCTURE)
        final = shrinker.run(VALUES)
        self.result.stats = shrinker.report()
        self.result.mutations_dropped = shrinker.stats["drop_mutations"].accepted
        self.result.nodes_after = final.node_count
        self.result.ops = [str(n.target) for n in final.gm.graph.nodes if n.op == "call_function"]
        self.say(f"shrunk to {final.node_count} operator call(s) with {self.same_bug.calls} checks")
        return final

    @stage("explain")
    def explain(self, final) -> str | None:
        """What triage's hypotheses say of an unexplained divergence on the final graph (a behaviour is its
        explanation, not this cluster's defect); None for anything else."""
        key = self.replayed.key
        unexplained = key.kind == Kind.DISCREPANCY and key["explanation"] == MISSING
        return self.same_bug.explanation(final) if unexplained else None

    @stage("write")
    def write(self, final, explained: str | None) -> tuple[Script, int, str]:
        """repro.py: the first form in the stack's own API that shows the bug in one fresh run, else the generic
        form (gapfuzz's own harness, copied, with inputs.pt); that run's count and output."""
        r = self.replayed
        self.title = title(r.record, r.target.name, final)
        clear(self.out)
        case, self.check = self.case(final), self.checking()
        script, first, output = self._native(case) if not explained else (None, 0, "")
        if script is None:
            self.say("writing the generic reproducer (inputs.pt beside it)")
            script = Script(reproducer(final, r.target, r.record, self.title, r.campaign.compare.settings,
                                       r.output_kind, r.campaign.compare.detection_adapter, r.settings.timeout_s),
                            "generic", [])
            write_script(self.out, script, case)
            save_inputs(final, inside(self.out, "inputs.pt"))
        return script, first, output

    def checking(self) -> dict:
        """How a fresh run of repro.py is checked (``verify``'s arguments): the campaign's timeout, gapfuzz out
        of reach unless a plug-in class needs it, the exit statuses that are the bug, and the interpreter."""
        r = self.replayed
        return dict(timeout=r.settings.timeout_s, block_gapfuzz=r.target.backend_cls().prepare_fn is not None,
                    reproduced=reproduced_by(r.record, r.key), hang_reproduces=r.record.status == Status.TIMEOUT,
                    python=r.python)

    def case(self, final) -> Case:
        """What the reproducer shows: the final graph on the target, the record's bug and how it is checked."""
        r, key = self.replayed, self.replayed.key
        plugin = r.target.backend_cls().prepare_fn is None
        error_type, phrase = failure_words(key)
        dtype = str(r.record.output_dtype or "float32")
        return Case(final, r.target, r.record, self.title,
                    check=check_of(r.record, key["symptom"] if key.kind == Kind.DISCREPANCY else ""),
                    tolerance=r.campaign.compare.settings.tolerances.get(dtype, DEFAULT_TOLERANCES["float32"]),
                    options=dict(r.target.options), error_type=error_type, phrase=phrase,
                    class_path=plugin_path(r.target) if plugin else "", timeout_s=r.settings.timeout_s)

    def _native(self, case: Case) -> tuple[Script | None, int, str]:
        """The first reproducer in the stack's own API that shows the bug in one fresh run (it stays written
        in the folder), that run's count and output; None when no form does."""
        output = ""
        for candidate in native_scripts(case):
            self.say(f"checking a reproducer in the stack's own API ({candidate.form}, {candidate.lines} lines)")
            write_script(self.out, candidate, case)
            first, output = verify(self.out, 1, **self.check)
            if first:
                return candidate, first, output
            log.info("the %s reproducer does not show the bug: %s", candidate.form, output[-1500:])
        return None, 0, output

    @stage("verify")
    def verify_script(self, script: Script, first: int, output: str, explained: str | None) -> str:
        """repro.py run in fresh processes until ``tries`` in all (the native form's first run counts); the
        last run's output."""
        result, tries = self.result, self.tries
        self.say(f"running repro.py in {tries - first} more fresh processes" if first else
                 f"running repro.py in {tries} fresh processes")
        more, output = verify(self.out, tries - first, **self.check) if tries > first else (0, output)
        result.failures = first + more
        result.tries, result.form, result.lines, result.notes = tries, script.form, script.lines, list(script.notes)
        if explained:
            result.notes.append(f"the minimised graph's divergence is explained as {explained} (what triage says "
                                f"of a precision or option behaviour): it is not this cluster's defect, so not offered")
            result.failures = 0
        result.status = (ReproStatus.REPRODUCIBLE if result.failures == tries else
                         ReproStatus.FLAKY if result.failures else ReproStatus.NOT_REPRODUCED)
        return output

    @stage("across")
    def across(self) -> None:
        """A reproducer that shows the bug, run on each release of the target's stack the campaign ran and on
        those asked for; a note when the newest does not show it."""
        r, result = self.replayed, self.result
        releases = [*campaign_releases(r.campaign.backends.all(), r.target), *r.against]
        if releases and result.failures:
            result.releases = check_releases(releases, lambda py: verify(self.out, 1, **{**self.check, "python": py}),
                                             self.say)
            if ABSENT in result.releases.values() and list(result.releases.values())[-1] == ABSENT:
                words = release_words(result.releases)
                result.notes.append(words[:1].upper() + words[1:])

    @stage("report")
    def report(self, final, script: Script, output: str) -> None:
        r, result = self.replayed, self.result
        inside(self.out, "report.md").write_text(bug_report(self.title, r.record, r.target, final, r.recipe,
                                                       (self.out / "repro.py").read_text(), output, result,
                                                       self.cluster, script))
        self.say(f"{result.status}: repro.py ({script.form}, {script.lines} lines) failed {result.failures} of "
                 f"{self.tries} runs")

    def stop(self, reason: str) -> None:
        """The reproduction ends at the stage running, for ``reason`` (one line)."""
        self.result.stopped_at, self.result.reason = self.current, reason

    def failed(self, error: Exception) -> None:
        """A stage that raised, recorded in shrink.json where the folder is already the reproducer's."""
        if self.result is None:
            return
        said = str(error) if isinstance(error, ReproError) else f"{type(error).__name__}: {error}"
        self.result.stopped_at, self.result.reason = getattr(error, "stage", "") or self.current, said[:500]
        try:
            self.finish()
        except OSError:  # shrink.json itself cannot be written: the error raised says enough
            pass

    def finish(self) -> ReproResult:
        self.result.stages = dict(self.seconds)
        return finish(self.result, self.t0)


def reproduce(run_dir, record, out_dir, cluster: dict | None = None, max_calls: int = 300, tries: int = 3,
              allow_plugins: bool = False, progress=None, allow_exec_options: bool = False,
              against: tuple = ()) -> ReproResult:
    """Minimise ``record``'s variant (a ``RunRecord``, or a row of one) to the smallest graph that shows its
    bug key, write the reproducer and report into ``out_dir``; ``progress(line)`` hears each step (default:
    standard error). The reproducer is then checked on every release of the target's stack the campaign ran,
    and on ``against`` (``STACK==RELEASE``: ``fuzzer.repro.across``)."""
    return Reproduction(run_dir, record, out_dir, cluster, max_calls, tries, allow_plugins, progress,
                        allow_exec_options, against).run()


def reproduce_cluster(run_dir, cluster_id: str, out_dir=None, max_calls: int = 300, tries: int = 3,
                      allow_plugins: bool = False, progress=None, allow_exec_options: bool = False,
                      against: tuple = ()) -> ReproResult:
    """Minimise the representative (smallest graph) of cluster ``cluster_id`` of a run folder."""
    row, cluster, run_path = representative(run_dir, cluster_id)
    out = Path(out_dir) if out_dir else folder_of(run_path, "repros", cluster["cluster"])
    return reproduce(run_dir, row, out, cluster=cluster, max_calls=max_calls, tries=tries,
                     allow_plugins=allow_plugins, progress=progress, allow_exec_options=allow_exec_options,
                     against=against)


def _say(line: str) -> None:
    print(f"[repro] {line}", file=sys.stderr, flush=True)

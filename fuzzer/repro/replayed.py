"""A cluster's representative made runnable again: what ``repro`` and ``explain`` start from.

From the run folder alone (its campaign.yaml and a record, both data), stage by stage (``Replay``): the
record typed and its bug key, the campaign and the target with the options the run had, the release's
interpreter, the recipe and probe checked, the recipe replayed to the variant on the probe the bug
showed on, and the settings a candidate is judged with. Whatever stops it is one ``ReproError`` line
naming the run, the field where a field is at fault, and the stage (``ReproError.stage``).
"""
from __future__ import annotations

import dataclasses
import functools
import logging
import time
from dataclasses import dataclass
from pathlib import Path

from gapfuzz.core.bugs import Kind, Verdict
from gapfuzz.core.files import OutsideFolder, inside
from gapfuzz.fuzzer.config.backends import exec_options_allowed
from gapfuzz.fuzzer.config.campaign import from_dict, plugin_classes, read_campaign_file
from gapfuzz.fuzzer.generate import replay
from gapfuzz.fuzzer.recipe import Recipe
from gapfuzz.fuzzer.repro.across import AgainstError, parse_against
from gapfuzz.fuzzer.repro.record import ReproError, bug_of, missing, parsed, record_of
from gapfuzz.fuzzer.repro.shrink.predicate import SameBug
from gapfuzz.results.schema import RunRecord
from gapfuzz.seeds.capture import CaptureError
from gapfuzz.workers.run.messages import JudgeSettings
from gapfuzz.workers.run.probe_check import checked_recipe, name_problem
from gapfuzz.workers.run.probes import probed
from gapfuzz.workers.run.registry import BackendSpec
from gapfuzz.workers.run.releases import ReleaseError, environment
from gapfuzz.workers.run.sandbox import Sandbox

log = logging.getLogger("gapfuzz.fuzzer")


def stage(name: str):
    """Mark a method as the job's stage ``name``: its seconds are counted (``seconds``), the stage running is
    ``current``, and a ``ReproError`` it raises is that stage's (``ReproError.stage``)."""
    def mark(method):
        @functools.wraps(method)
        def staged(self, *args, **kwargs):
            self.current, t0 = name, time.perf_counter()
            try:
                return method(self, *args, **kwargs)
            except ReproError as e:
                e.stage = e.stage or name
                raise
            finally:
                self.seconds[name] = round(self.seconds.get(name, 0.0) + time.perf_counter() - t0, 3)
        return staged
    return mark


@dataclass
class Replayed:
    campaign: object  # fuzzer.config.campaign.Campaign
    record: RunRecord
    key: object  # core.bugs.BugKey
    target: BackendSpec  # with the options its run had
    reference: BackendSpec  # what its verdict compared with
    python: str | None  # the release's interpreter; None: this one
    against: list  # more releases to check the reproducer on (``across.parse_against``)
    recipe: Recipe
    probe: object  # workers.run.probes.Probe: the input set the bug showed on
    variant: object  # core.ir.Variant, on that probe
    settings: JudgeSettings  # how a candidate is judged (``candidate_settings``)

    @property
    def output_kind(self) -> str:
        return self.record.output_kind or "tensor"

    def same_bug(self, fresh: bool) -> SameBug:
        """The predicate "still this bug" on the record's probe, in the release's interpreter; ``fresh``: a new
        worker for each candidate (a crash, a hang or running out of memory takes the process with it)."""
        return SameBug(self.target, self.reference, self.campaign.oracle, self.key, self.settings,
                       self.record.seed_id, self.output_kind, fresh=fresh, sandbox=Sandbox(python=self.python),
                       probe=self.record.probe)


class Replay:
    """A record's variant built again from its run folder, stage by stage: each stage a method whose
    ``ReproError`` names it. ``explain`` runs these; ``repro`` (``minimise.Reproduction``) goes on from them."""

    def __init__(self, run_dir, row, allow_plugins: bool = False, allow_exec_options: bool = False,
                 against: tuple = (), say=lambda line: None):
        self.run_dir, self.row, self.say = Path(run_dir), row, say
        self.allow_plugins, self.allow_exec_options, self.against = allow_plugins, allow_exec_options, against
        self.current, self.seconds = "", {}  # the stage running, and each stage's seconds

    def replay(self) -> Replayed:
        """All a run of the record's variant needs."""
        record, key = self.check_key()
        c, target = self.resolve(record)
        python, extra = self.release(record, target)
        recipe, probe = self.check_recipe(record)
        variant = self.rebuild(record, recipe, probe, c.capture.max_params)
        reference, settings = self.judged(record, c, target)
        return Replayed(c, record, key, target, reference, python, extra, recipe, probe, variant, settings)

    @stage("key")
    def check_key(self) -> tuple[RunRecord, object]:
        """The record, typed, and the bug it shows: one to minimise."""
        record, key = record_of(self.row), bug_of(self.row)
        if key is None:
            raise ReproError(f"{record.variant_id} on {record.backend} shows no bug: nothing to minimise")
        if record.verdict == Verdict.AMPLIFIED:
            raise ReproError(f"{record.variant_id} on {record.backend} is amplified rounding (a discontinuous op "
                             f"magnifies rounding-level differences in its inputs): not a defect, so not minimised")
        return record, key

    @stage("campaign")
    def resolve(self, record: RunRecord) -> tuple:
        """The run folder's campaign, and its target with the options the run had (given, or drawn from a space)."""
        c = _campaign(self.run_dir, self.allow_plugins, self.allow_exec_options)
        target = next((s for s in c.backends.all() if s.name == record.backend), None)
        if target is None:
            raise ReproError(f"{record.variant_id}: its backend {record.backend!r} is not one of the campaign's "
                             f"in {self.run_dir / 'campaign.yaml'}")
        if record.backend_options or target.option_space:  # replayed exactly
            target = dataclasses.replace(target, options=record.backend_options, option_space={})
        return c, target

    @stage("release")
    def release(self, record: RunRecord, target: BackendSpec) -> tuple:
        """The interpreter of the target's release (made when missing), the releases to check it across, and
        the run's options checked as any given options are (a record's are data too)."""
        try:
            extra = [parse_against(target, a) for a in self.against]
            python = None if target.pool == target.device else environment(target.release, self.say).python
        except (AgainstError, ReleaseError) as e:
            raise ReproError(f"{record.backend}: {e}") from None
        problem = target.backend_cls().check_options(target.options, self.allow_exec_options)
        if problem:
            raise ReproError(f"{record.variant_id} on {record.backend}: its record's backend_options: {problem}")
        return python, extra

    @stage("recipe")
    def check_recipe(self, record: RunRecord) -> tuple:
        """The recipe, in the record's mode, and the input set the bug showed on (it stays)."""
        recipe = parsed(record, "recipe", Recipe.from_json)
        if record.mode and record.mode != recipe.mode:
            raise ReproError(f"{record.variant_id}: the record ran in {record.mode} mode, its recipe says "
                             f"{recipe.mode}")
        probe = parsed(record, "probe_recipe", checked_recipe)
        named = name_problem(record.probe) if isinstance(record.probe, str) else None
        if named:  # the probe column a person reads (special:banana): a value no probe of gapfuzz has
            raise ReproError(f"{record.variant_id} on {record.backend}: its record's {named}")
        return recipe, probe

    @stage("replay")
    def rebuild(self, record: RunRecord, recipe: Recipe, probe, max_params):
        """The variant, built from its recipe and on the probe's inputs."""
        try:
            variant = replay(recipe, max_params)
        except CaptureError as e:  # a seed id that is not one, or a seed that no longer builds or captures here
            raise ReproError(f"{record.variant_id}: its recipe's seed {recipe.seed!r} cannot be built again "
                             f"({' '.join(str(e).split())[:200]})") from None
        except Exception as e:  # noqa: BLE001 - a mutation's parameters are data: one that does not apply is the record's
            raise ReproError(f"{record.variant_id}: its recipe's mutations {recipe.mutator_names} do not replay "
                             f"on {recipe.seed!r} ({type(e).__name__}: {' '.join(str(e).split())[:160]})") from None
        if record.graph_hash and variant.graph_hash != record.graph_hash:
            log.warning("replayed graph hash %s differs from the record's %s (library versions?)",
                        variant.graph_hash, record.graph_hash)
        return probed(variant, probe)

    @stage("settings")
    def judged(self, record: RunRecord, c, target: BackendSpec) -> tuple:
        """The reference the verdict compared with (eager on the target's device where the campaign judged so),
        and how a candidate is judged."""
        reference = next((s for s in c.backends.targets if s.name == record.judged_against), c.reference)
        return reference, candidate_settings(c, reference, target)


def replayed(run_dir, record, allow_plugins: bool = False, allow_exec_options: bool = False,
             against: tuple = (), say=lambda line: None) -> Replayed:
    """``record``'s variant (a ``RunRecord`` or a row) built again from the run folder ``run_dir``, with all a
    run of it needs."""
    return Replay(run_dir, record, allow_plugins, allow_exec_options, against, say).replay()


def candidate_settings(c, reference: BackendSpec, target: BackendSpec) -> JudgeSettings:
    """How each shrink candidate is judged: the campaign's settings, run once against the reference its
    record was judged against, without tier 2, explanations or bisection (``core.bugs``: a candidate's run
    is not bisected), on the example inputs the predicate gives it."""
    return c.judge_settings(reference.name, c.oracle.name if c.oracle else None, ledger=None, device_references={},
                            probes=None, timeout_s=target.timeout_s or c.run.timeout_s, repeats=1,
                            retry_faults=False, align=False, explain=False, bisect=False)


def representative(run_dir, cluster_id: str) -> tuple[dict, dict, Path]:
    """Cluster ``cluster_id`` (a prefix of its id) of a local run folder: its representative's row (the smallest
    graph; its record's columns and what triage derived, ``record.record_of`` types it), the cluster's triage
    row, and the folder."""
    from gapfuzz.analysis.api import load_run

    run = load_run(run_dir)
    records = run.cluster(cluster_id)
    clusters = run.clusters(benign=True)
    row = clusters[clusters["cluster"].str.startswith(cluster_id)].iloc[0].to_dict()
    if row["kind"] == Kind.BENIGN:
        raise ReproError(f"{row['cluster']} is a difference explained without a defect ({row['explanation']}): "
                         f"not minimised")
    if run.path is None:
        raise ReproError(f"{run_dir}: gapfuzz repro minimises from a local run folder; copy it here first "
                         f"(triage and report read it where it is)")
    return {k: (None if missing(v) else v) for k, v in records.iloc[0].to_dict().items()}, row, Path(run.path)


def folder_of(run_path: Path, *names: str) -> Path:
    """``run_path/names...``, refused (``ReproError``) past a link or a name that is no plain name."""
    try:
        return inside(run_path, *names)
    except OutsideFolder as e:
        raise ReproError(str(e)) from None


def _campaign(run_dir: Path, allow_plugins: bool, allow_exec_options: bool = False):
    """The run folder's campaign. A plug-in class it names is imported only when the user allows it:
    a run folder from someone else is data."""
    path = run_dir / "campaign.yaml"
    given = read_campaign_file(path)
    classes = plugin_classes(given)
    if classes and not allow_plugins:
        raise ReproError(f"{path}: names the plug-in backend class {classes[0]!r}; gapfuzz imports a run "
                         f"folder's plug-ins only with --allow-plugins")
    with exec_options_allowed(allow_exec_options):  # its options that name a program: only when allowed too
        return from_dict(given, str(path))

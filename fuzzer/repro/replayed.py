"""A cluster's representative made runnable again: what ``repro`` and ``explain`` start from.

From the run folder alone (its campaign.yaml and a record, both data): the campaign, the target with
the options the run had, the release's interpreter, the recipe replayed to the variant on the probe
the bug showed on, and the settings a candidate is judged with. Every field of the record that is not
what gapfuzz writes is one ``ReproError`` line naming the run and the field.
"""
from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from pathlib import Path

from gapfuzz.core.bugs import Kind, Verdict, bug_key
from gapfuzz.core.files import OutsideFolder, inside
from gapfuzz.fuzzer.config.backends import exec_options_allowed
from gapfuzz.fuzzer.config.campaign import from_dict, plugin_classes, read_campaign_file
from gapfuzz.fuzzer.generate import replay
from gapfuzz.fuzzer.recipe import Recipe
from gapfuzz.fuzzer.repro.across import AgainstError, parse_against
from gapfuzz.results.columns import backend_options_of, text
from gapfuzz.seeds.capture import CaptureError
from gapfuzz.workers.run.messages import JudgeSettings
from gapfuzz.workers.run.probe_check import checked_recipe, name_problem
from gapfuzz.workers.run.probes import probed
from gapfuzz.workers.run.registry import BackendSpec
from gapfuzz.workers.run.releases import ReleaseError, environment

log = logging.getLogger("gapfuzz.fuzzer")


class ReproError(ValueError):
    """A cluster that cannot be minimised or explained, for a reason a person can act on (one line)."""


@dataclass
class Replayed:
    campaign: object  # fuzzer.config.campaign.Campaign
    record: dict
    key: object  # core.bugs.BugKey
    target: BackendSpec  # with the options its run had
    reference: BackendSpec  # what its verdict compared with
    python: str | None  # the release's interpreter; None: this one
    against: list  # more releases to check the reproducer on (``across.parse_against``)
    recipe: Recipe
    probe: object  # workers.run.probes.Probe: the input set the bug showed on
    variant: object  # core.ir.Variant, on that probe
    settings: JudgeSettings  # how a candidate is judged (``candidate_settings``)


def replayed(run_dir, record: dict, allow_plugins: bool = False, allow_exec_options: bool = False,
             against: tuple = (), say=lambda line: None) -> Replayed:
    """``record``'s variant built again from the run folder ``run_dir``, with all a run of it needs."""
    run_dir = Path(run_dir)
    key = bug_key(record)
    if key is None:
        raise ReproError(f"{record['variant_id']} on {record['backend']} shows no bug: nothing to minimise")
    if record.get("verdict") == Verdict.AMPLIFIED:
        raise ReproError(f"{record['variant_id']} on {record['backend']} is amplified rounding (a discontinuous op "
                         f"magnifies rounding-level differences in its inputs): not a defect, so not minimised")
    c = _campaign(run_dir, allow_plugins, allow_exec_options)
    target = next((s for s in c.backends.all() if s.name == record["backend"]), None)
    if target is None:
        raise ReproError(f"{record['variant_id']}: its backend {record['backend']!r} is not one of the campaign's "
                         f"in {run_dir / 'campaign.yaml'}")
    recorded = _field(record, "backend_options", backend_options_of)  # a mapping, or an old folder's JSON text
    if recorded or target.option_space:  # the options the run had (given, or drawn from a space), replayed exactly
        target = dataclasses.replace(target, options=recorded, option_space={})
    try:
        extra = [parse_against(target, a) for a in against]
        python = None if target.pool == target.device else environment(target.release, say).python
    except (AgainstError, ReleaseError) as e:
        raise ReproError(f"{record['backend']}: {e}") from None
    problem = target.backend_cls().check_options(target.options, allow_exec_options)  # a record's are data too
    if problem:
        raise ReproError(f"{record.get('variant_id')} on {record.get('backend')}: its record's backend_options: "
                         f"{problem}")
    recipe = _field(record, "recipe", lambda v: Recipe.from_json(text("recipe", v)))
    if record.get("mode") and record["mode"] != recipe.mode:
        raise ReproError(f"{record['variant_id']}: the record ran in {record['mode']} mode, its recipe says "
                         f"{recipe.mode}")
    # the input set the bug showed on: it stays
    probe = _field(record, "probe_recipe", lambda v: checked_recipe(text("probe_recipe", v)))
    named = name_problem(record["probe"]) if isinstance(record.get("probe"), str) else None
    if named:  # the probe column a person reads (special:banana): a value no probe of gapfuzz has
        raise ReproError(f"{record.get('variant_id')} on {record.get('backend')}: its record's {named}")
    try:
        variant = replay(recipe, c.capture.max_params)
    except CaptureError as e:  # a seed id that is not one, or a seed that no longer builds or captures here
        raise ReproError(f"{record['variant_id']}: its recipe's seed {recipe.seed!r} cannot be built again "
                         f"({' '.join(str(e).split())[:200]})") from None
    except Exception as e:  # noqa: BLE001 - a mutation's parameters are data: one that does not apply is the record's
        raise ReproError(f"{record['variant_id']}: its recipe's mutations {recipe.mutator_names} do not replay on "
                         f"{recipe.seed!r} ({type(e).__name__}: {' '.join(str(e).split())[:160]})") from None
    if record.get("graph_hash") and variant.graph_hash != record["graph_hash"]:
        log.warning("replayed graph hash %s differs from the record's %s (library versions?)",
                    variant.graph_hash, record["graph_hash"])
    # the reference its verdict compared with: eager on the target's device where the campaign judged so
    reference = next((s for s in c.backends.targets if s.name == record.get("judged_against")), c.reference)
    return Replayed(c, record, key, target, reference, python, extra, recipe, probe, probed(variant, probe),
                    candidate_settings(c, reference, target))


def candidate_settings(c, reference: BackendSpec, target: BackendSpec) -> JudgeSettings:
    """How each shrink candidate is judged: the campaign's settings, run once against the reference its
    record was judged against, without tier 2, explanations or bisection (``core.bugs``: a candidate's run
    is not bisected), on the example inputs the predicate gives it."""
    return c.judge_settings(reference.name, c.oracle.name if c.oracle else None, ledger=None, device_references={},
                            probes=None, timeout_s=target.timeout_s or c.run.timeout_s, repeats=1,
                            retry_faults=False, align=False, explain=False, bisect=False)


def representative(run_dir, cluster_id: str) -> tuple[dict, dict, Path]:
    """Cluster ``cluster_id`` (a prefix of its id) of a local run folder: its representative record (the
    smallest graph), its triage row, and the folder."""
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
    return {k: (None if _missing(v) else v) for k, v in records.iloc[0].to_dict().items()}, row, Path(run.path)


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


def _field(record: dict, key: str, parse):
    """A record's JSON field parsed by ``parse``; a field that is not what gapfuzz writes there (a torn or
    foreign record) is one ``ReproError`` line naming the run and the field."""
    try:
        return parse(record.get(key))
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        detail = " ".join(str(e).split())[:160]
        raise ReproError(f"{record.get('variant_id')} on {record.get('backend')}: its record's {key} is not "
                         f"what gapfuzz writes there ({type(e).__name__}: {detail})") from None


def _missing(v) -> bool:
    try:
        return bool(v != v)  # NaN and pandas NA
    except (TypeError, ValueError):
        return False

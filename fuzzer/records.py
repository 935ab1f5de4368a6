"""Turn seed builds, built variants and worker outcomes into run records and catalog rows."""
from __future__ import annotations

import dataclasses
import json

from analysis.catalog import CatalogRow
from analysis.schema import COLUMNS, RunRecord
from core.bugs import COMPLETED, LIMITS, Stage, Status
from core.failures import signature
from seeds.spec import SeedInfo
from workers.outcome import RunOutcome

from .messages import BuiltVariant, SeedBuild

_JSON_FIELDS = {"options": "backend_options", "backend_info": "backend_info", "versions": "versions"}


def _seed_columns(seed: SeedInfo | None) -> dict:
    if seed is None:
        return {"seed_source": "", "family": "", "task": "", "output_kind": "", "params": None}
    return {"seed_source": seed.source, "family": seed.family, "task": seed.task, "output_kind": seed.output_kind,
            "params": seed.params}


def run_record(campaign: str, build: SeedBuild, variant: BuiltVariant, outcome: RunOutcome) -> RunRecord:
    cols = {"campaign": campaign, "variant_id": variant.variant_id, "seed_id": build.seed_id,
            **_seed_columns(build.seed), "recipe": variant.recipe.to_json(), "mutations": variant.recipe.mutator_names,
            "semantics_preserving": variant.semantics_preserving, "graph_hash": variant.graph_hash,
            "node_count": variant.node_count, "ops": variant.ops, "metamorphic_err": variant.metamorphic_err,
            "gen_s": variant.gen_s, "capture_s": build.capture_s, "mode": str(variant.mode)}
    for f in dataclasses.fields(outcome):
        value = getattr(outcome, f.name)
        if f.name in _JSON_FIELDS:
            cols[_JSON_FIELDS[f.name]] = json.dumps(value, sort_keys=True, default=str)
        elif f.name == "figures":
            cols.update({k: v for k, v in value.items() if k in COLUMNS})
        elif f.name in COLUMNS:
            cols[f.name] = value
    cols["torch_version"] = outcome.versions.get("torch", "")
    names = variant.output_names
    if isinstance(cols.get("worst_output"), int) and names:
        i = cols["worst_output"]
        cols["worst_output"] = names[i] if i < len(names) else str(i)
    elif cols.get("worst_output") is not None:
        cols["worst_output"] = str(cols["worst_output"])
    if cols.get("status") not in COMPLETED:
        cols["signature"] = signature(cols.get("stage"), cols.get("error_type"), cols.get("message"))
    return RunRecord(**cols)


def seed_failure_record(campaign: str, build: SeedBuild, backend: str, device: str, failure_id: str,
                        mode: str = "inference") -> RunRecord:
    """The one record of a seed that failed to build, fit the budget, capture or run on the reference:
    skipped, not a finding (the reference's own failure says nothing of a target), unless the
    worker running it was lost (the seed is tried again on ``--resume``)."""
    lost = build.error_type == "WorkerLost"
    status = build.status if lost or build.status in LIMITS or build.status == Status.CRASH else Status.SKIPPED
    message = build.message if status == build.status else f"the reference {build.status}: {build.message or ''}"
    rec = RunRecord(campaign=campaign, variant_id=failure_id, seed_id=build.seed_id, backend=backend, device=device,
                    mode=str(mode),
                    stack=backend.split("@")[0], status=status, stage=build.stage, error_type=build.error_type,
                    message=message, cause=build.cause, **_seed_columns(build.seed))
    rec.recipe = json.dumps({"seed": build.seed_id, "mutations": [], "rng": 0,
                             **({"mode": str(mode)} if mode != "inference" else {})})
    rec.signature = signature(rec.stage, rec.error_type, rec.message)
    return rec


def catalog_row(build: SeedBuild) -> CatalogRow:
    """What a campaign's build learned about a seed, as a seed catalog row."""
    seed = build.seed
    row = CatalogRow(seed_id=build.seed_id, source=seed.source if seed else build.seed_id.split("/")[0],
                     family=seed.family if seed else "", task=seed.task if seed else "",
                     output_kind=seed.output_kind if seed else "", params=seed.params if seed else None,
                     input_spec=json.dumps(seed.input_spec if seed else []), capture_s=build.capture_s)
    if not build.ok:
        row.status = Status.SKIPPED if build.stage == Stage.BUDGET else build.status
        row.stage, row.error_type, row.message = build.stage, build.error_type, build.message
        row.signature = signature(row.stage, row.error_type, row.message)
        return row
    row.node_count, row.ops = build.node_count, sorted(build.op_counts)
    row.op_counts = json.dumps(build.op_counts, sort_keys=True)
    row.output_names, row.build_s = build.output_names, build.build_s
    return row


"""A worker's records completed with their variant's columns, and the records of what never ran:
a seed that failed to build, and its catalog row."""
from __future__ import annotations

import dataclasses

from gapfuzz.core.bugs import COMPLETED, LIMITS, Stage, Status
from gapfuzz.core.failures import signature
from gapfuzz.core.ids import BackendName, SeedId
from gapfuzz.core.modes import DEFAULT_MODE
from gapfuzz.fuzzer.builds import BuiltVariant, SeedBuild
from gapfuzz.fuzzer.recipe import Recipe
from gapfuzz.results.catalog import CatalogRow
from gapfuzz.results.schema import RunRecord
from gapfuzz.seeds.spec import SeedInfo


def _seed_columns(seed: SeedInfo | None) -> dict:
    if seed is None:
        return {"seed_source": "", "family": "", "task": "", "output_kind": "", "params": None}
    return {"seed_source": seed.source, "family": seed.family, "task": seed.task, "output_kind": seed.output_kind,
            "params": seed.params}


def run_record(campaign: str, build: SeedBuild, variant: BuiltVariant, record: RunRecord) -> RunRecord:
    """A worker's record of the variant, with the campaign's, the seed's and the variant's columns."""
    record.update(campaign=campaign, variant_id=variant.variant_id, seed_id=build.seed_id, **_seed_columns(build.seed),
                  recipe=variant.recipe.to_json(), mutations=variant.recipe.mutator_names,
                  semantics_preserving=variant.semantics_preserving, graph_hash=variant.graph_hash,
                  node_count=variant.node_count, ops=variant.ops, gen_s=variant.gen_s, capture_s=build.capture_s,
                  mode=str(variant.mode))
    if record.metamorphic_err is None:  # the judge's, on the variant's own run, else the build's
        record.metamorphic_err = variant.metamorphic_err
    if record.status not in COMPLETED:
        record.signature = signature(record.stage, record.error_type, record.message)
    return record


def seed_failure_record(campaign: str, build: SeedBuild, backend: str, device: str, failure_id: str,
                        mode: str = DEFAULT_MODE) -> RunRecord:
    """The one record of a seed that failed to build, fit the budget, capture or run on the reference:
    skipped, not a finding (the reference's own failure says nothing of a target), unless the
    worker running it was lost (the seed is tried again on ``--resume``)."""
    f = build.failure
    lost = f.error_type == "WorkerLost"
    status = f.status if lost or f.status in LIMITS or f.status == Status.CRASH else Status.SKIPPED
    message = f.message if status == f.status else f"the reference {f.status}: {f.message or ''}"
    rec = RunRecord(campaign=campaign, variant_id=failure_id, seed_id=build.seed_id, backend=backend, device=device,
                    mode=str(mode), stack=BackendName.stack_of(backend), **_seed_columns(build.seed))
    dataclasses.replace(f, status=status, message=message).onto(rec, sign=True)
    rec.recipe = Recipe(build.seed_id, [], 0, str(mode)).to_json()
    return rec


def catalog_row(build: SeedBuild) -> CatalogRow:
    """What a campaign's build learned about a seed, as a seed catalog row."""
    seed = build.seed
    row = CatalogRow(seed_id=build.seed_id, source=seed.source if seed else SeedId.parse(build.seed_id).source,
                     family=seed.family if seed else "", task=seed.task if seed else "",
                     output_kind=seed.output_kind if seed else "", params=seed.params if seed else None,
                     input_spec=list(seed.input_spec if seed else []), capture_s=build.capture_s)
    if not build.ok:
        f = build.failure
        dataclasses.replace(f, status=Status.SKIPPED if f.stage == Stage.BUDGET else f.status).onto(row, sign=True)
        return row
    row.node_count, row.ops = build.node_count, sorted(build.op_counts)
    row.op_counts = dict(sorted(build.op_counts.items()))
    row.output_names, row.build_s = build.output_names, build.build_s
    return row

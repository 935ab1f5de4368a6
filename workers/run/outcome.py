"""Where a worker's record of one (variant, backend, probe) starts: a ``results.schema.RunRecord``
with the worker's part filled in. The judge adds its comparison columns, the driver the campaign's
and the variant's."""
from __future__ import annotations

from gapfuzz.core.failures import Failure
from gapfuzz.results.schema import RunRecord
from gapfuzz.workers.run.probes import EXAMPLE, Probe

EXAMPLE_RECIPE = Probe().recipe()


def new_outcome(spec, failure: Failure | None = None, probe: Probe | None = None, **columns) -> RunRecord:
    """A record of ``spec`` (a ``BackendSpec``) on ``probe`` (the example by default), failed with ``failure``."""
    record = RunRecord(campaign="", variant_id="", seed_id="", backend=spec.name, stack=spec.stack,
                       device=spec.device, probe=probe.name if probe else EXAMPLE,
                       probe_recipe=probe.recipe() if probe else EXAMPLE_RECIPE, worker_s=0.0, **columns)
    if failure is not None:
        failure.onto(record)  # its signature is the driver's, once the record has all its columns
    return record

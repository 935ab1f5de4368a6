"""Scan one seed: build, check the parameter cap, capture, run once on eager. Never raises.

Runs inside a worker sandbox, so a crash in a model's constructor or in torch.export
costs one catalog row, not the scan.
"""
from __future__ import annotations

import contextlib
import socket
import time
from collections import Counter

import torch

from gapfuzz.core.bugs import Stage, Status
from gapfuzz.core.failures import Failure
from gapfuzz.core.ir import target_name
from gapfuzz.results.catalog import CatalogRow

from .capture import CaptureError, capture
from .registry import SeedError, create_seed, source_of


def _fail(row: CatalogRow, stage: Stage, exc: BaseException) -> CatalogRow:
    cause = exc.__cause__ if isinstance(exc, CaptureError) and exc.__cause__ else exc
    Failure.from_exception(cause, stage, Status.ERROR).onto(row, sign=True)
    return row


def scan_seed(seed_id: str, max_params: int | None = None) -> CatalogRow:
    row = CatalogRow(seed_id=seed_id, torch_version=torch.__version__, host=socket.gethostname())
    t0 = time.perf_counter()
    try:
        built = create_seed(seed_id)
    except Exception as e:  # noqa: BLE001 - a seed that does not build is a row
        row.build_s = time.perf_counter() - t0
        with contextlib.suppress(SeedError):  # a failed build still counts under its source
            row.source = source_of(seed_id).name
        return _fail(row, Stage.BUILD, e)
    row.build_s = time.perf_counter() - t0
    info = built.info
    row.source, row.family, row.task, row.output_kind = info.source, info.family, info.task, info.output_kind
    row.params, row.input_spec = info.params, list(info.input_spec)
    try:
        cap = capture(built, max_params)
    except CaptureError as e:
        if e.stage == Stage.BUDGET:
            row.status, row.stage, row.message = Status.SKIPPED, Stage.BUDGET, str(e)
            return row
        row.capture_s = time.perf_counter() - t0 - row.build_s
        return _fail(row, e.stage, e)
    row.capture_s = cap.capture_s
    v = cap.variant
    counts = Counter(target_name(n.target) for n in v.gm.graph.nodes if n.op == "call_function")
    row.node_count, row.ops, row.op_counts = v.node_count, sorted(counts), dict(sorted(counts.items()))
    row.output_names = list(v.output_names)
    t1 = time.perf_counter()
    try:
        with torch.no_grad():
            v.gm(*v.inputs)
    except Exception as e:  # noqa: BLE001 - the captured graph fails on the reference
        row.run_s = time.perf_counter() - t1
        return _fail(row, Stage.RUN, e)
    row.run_s = time.perf_counter() - t1
    return row

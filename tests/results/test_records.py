"""One record type: its fields are the Parquet columns, both ways; every failure is spelled one way."""
from __future__ import annotations

import dataclasses

import pyarrow as pa

from gapfuzz.core.bugs import Stage, Status
from gapfuzz.core.failures import Failure
from gapfuzz.results.catalog import CatalogRow
from gapfuzz.results.schema import COLUMNS, RunRecord, arrow_schema
from gapfuzz.workers.judge.verdict import Judgement
from gapfuzz.workers.run.sandbox import Fault


def test_every_field_is_a_column_and_a_row_reads_back_as_the_record():
    assert [f.name for f in dataclasses.fields(RunRecord)] == arrow_schema().names == COLUMNS
    record = RunRecord(campaign="c", variant_id="timm/x#1", seed_id="timm/x", backend="inductor@cpu",
                       backend_options={"mode": "max-autotune"}, versions={"torch": "2.x"},
                       backend_info={"precision": "f32"}, ops=["aten.mm.default"], max_abs_err=0.5, runs=3)
    table = pa.Table.from_pylist([record.to_row()], schema=arrow_schema())
    assert RunRecord.from_row(table.to_pylist()[0]) == record
    assert table.column("backend_options").to_pylist() == [[{"key": "mode", "value": "max-autotune", "type": "str"}]]


def test_a_column_that_is_not_one_is_refused_not_dropped():
    record = RunRecord(campaign="c", variant_id="v", seed_id="s", backend="b")
    record.update(verdict="agree")
    try:
        record.update(input_tol_ratio=1.0)
    except AttributeError as e:
        assert "input_tol_ratio" in str(e)
    else:
        raise AssertionError("an unknown column was taken")


def test_the_judgement_gives_record_columns_only():
    names = {f.name for f in dataclasses.fields(RunRecord)}
    from gapfuzz.workers.judge.compare import Attribution, Closeness

    j = Judgement(Attribution("agree", Closeness()), None)
    assert set(j.columns()) <= names


def test_a_fault_is_spelled_one_way_for_runs_seed_builds_and_catalog_rows():
    fault = Fault(Status.CRASH, "signal:SIGSEGV", "Segmentation fault")
    f = Failure.from_fault(fault, Stage.RUN)
    assert (f.status, f.error_type, f.cause) == (Status.CRASH, "SIGSEGV", "signal:SIGSEGV")
    row = CatalogRow(seed_id="timm/x")
    Failure.from_fault(fault, Stage.BUILD).onto(row, sign=True)
    assert row.error_type == "SIGSEGV" and row.signature.startswith("build|SIGSEGV|")
    timeout = Failure.from_fault(Fault(Status.TIMEOUT, "limit:timeout 60s", ""), Stage.RUN)
    assert timeout.error_type == "timeout"
    lost = Failure.lost(RuntimeError("node gone"), Stage.RUN)
    assert lost.error_type == "WorkerLost" and Failure.lost(RuntimeError(), Stage.RUN, again=False).error_type == \
        "RuntimeError"

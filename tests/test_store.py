"""Records are written whole or not at all, and read back by pandas directly."""
from __future__ import annotations

import pandas as pd

from analysis.schema import COLUMNS, RunRecord, arrow_schema
from analysis.store import RecordStore


def _rec(vid: str, backend: str, status: str = "ok") -> RunRecord:
    return RunRecord(campaign="t", variant_id=vid, seed_id="timm/x", backend=backend, status=status,
                     mutations=["insert_unary"], ops=["aten.add.Tensor"])


def test_write_then_read_with_pandas(tmp_path):
    store = RecordStore(tmp_path)
    store.write([_rec("a#0", "eager@cpu"), _rec("a#0", "inductor@cpu", "crash"), _rec("a#1", "eager@cpu")])
    df = pd.read_parquet(tmp_path / "records")
    assert len(df) == 3 and set(df["backend"]) == {"eager@cpu", "inductor@cpu"}
    assert list(df.columns) == COLUMNS
    assert store.done_keys() == {("a#0", "eager@cpu"), ("a#0", "inductor@cpu"), ("a#1", "eager@cpu")}
    assert arrow_schema().metadata[b"gapfuzz_schema_version"] == b"3"


def test_unfinished_temporary_files_are_not_records(tmp_path):
    store = RecordStore(tmp_path)
    store.write([_rec("a#0", "eager@cpu")])
    tmp = tmp_path / "records" / ".tmp"
    tmp.mkdir(exist_ok=True)
    (tmp / "half.parquet").write_bytes(b"PAR1 truncated")
    assert store.count() == 1
    assert len(pd.read_parquet(tmp_path / "records")) == 1

"""Records are written whole or not at all, and read back by pandas directly."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from gapfuzz.results.schema import COLUMNS, RunRecord, arrow_schema
from gapfuzz.results.store import RecordStore


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
    assert arrow_schema().metadata[b"gapfuzz_schema_version"] == b"7"


def test_unfinished_temporary_files_are_not_records(tmp_path):
    store = RecordStore(tmp_path)
    store.write([_rec("a#0", "eager@cpu")])
    tmp = tmp_path / "records" / ".tmp"
    tmp.mkdir(exist_ok=True)
    (tmp / "half.parquet").write_bytes(b"PAR1 truncated")
    assert store.count() == 1
    assert len(pd.read_parquet(tmp_path / "records")) == 1


def test_a_run_folder_on_another_filesystem_is_written_and_triaged_there(tmp_path):
    """Through fsspec's in-memory filesystem (a pyarrow filesystem like S3's): records, catalog and campaign
    are written there, whole, and the analysis reads them where they are; nothing lands on the local disk."""
    import uuid

    from gapfuzz.analysis.api import Run
    from gapfuzz.results.catalog import Catalog, CatalogRow
    from gapfuzz.results.folder import Folder

    uri = f"memory://gapfuzz-{uuid.uuid4().hex[:8]}/runs/t"
    folder = Folder(uri)
    assert not folder.renames and folder.local_path is None
    folder.write_bytes(b"name: t\nbackends: {reference: eager@cpu, oracle: eager-fp64@cpu}\n", "campaign.yaml")
    store = RecordStore(uri)
    store.write([_rec("timm/x#0", "eager@cpu"), _rec("timm/x#0", "inductor@cpu", "crash")])
    Catalog(uri).write([CatalogRow(seed_id="timm/x", source="timm")])
    assert store.count() == 2 and len(store.files()) == 2 and all("/runs/t/records/" in f for f in store.files())
    run = Run(uri)
    assert run.name == "t" and len(run.records()) == 2 and list(run.catalog()["seed_id"]) == ["timm/x"]
    assert not (tmp_path / "memory:").exists() and not Path("memory:").exists()


def test_a_file_uri_is_the_local_folder(tmp_path):
    from gapfuzz.results.folder import Folder, FolderError

    RecordStore(f"file://{tmp_path}/run").write([_rec("a#0", "eager@cpu")])
    assert len(pd.read_parquet(tmp_path / "run" / "records")) == 1
    assert Folder(f"file://{tmp_path}/run").local_path == tmp_path / "run"
    with pytest.raises(FolderError, match="nosuchfs://x"):
        Folder("nosuchfs://x")

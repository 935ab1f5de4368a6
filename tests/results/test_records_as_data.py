"""Records as data: nested columns as Parquet structs and lists (old folders of JSON text still read the
same), and a finished run compacted to one file per backend without losing or doubling a row."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gapfuzz.analysis.api import Run
from gapfuzz.results.columns import NESTED, backend_options_of, recipe_of, text
from gapfuzz.results.compact import compact
from gapfuzz.results.folder import Folder, ResultsError
from gapfuzz.results.schema import RunRecord, arrow_schema, legacy_schema
from gapfuzz.results.sink import RecordSink
from gapfuzz.results.store import REPLACES, RecordStore

OPTIONS = {"mode": "max-autotune", "freezing": True, "threads": 4, "scale": 0.5, "unset": None, "one": "1",
           "sizes": [1, 2], "nested": {"a": "b"}}
RECIPE = '{"mutations":[["mul_one",{"node":"conv2d_14"}],["strided_input",{"how":"step","input":0}]],' \
         '"rng":450132361,"seed":"timm/test_vit"}'
PROBE = '{"kind": "special", "pattern": "single", "seed": 166540719, "value": "nan"}'
GROWTH = '[["conv2d", "aten.conv2d.default", 874.179848], ["relu_3", "aten.relu.default", 1554.357941]]'
KEY = ["variant_id", "backend", "probe"]


def _record(i: int, backend: str, **columns) -> RunRecord:
    return RunRecord(campaign="c", variant_id=f"timm/test_vit#{i}", seed_id="timm/test_vit", backend=backend,
                     probe=f"p{i % 3}", stack=backend.split("@")[0], device="cpu", status="mismatch",
                     recipe=RECIPE, probe_recipe=PROBE, div_growth=GROWTH, backend_options=dict(OPTIONS),
                     versions={"torch": "2.14.1", "python": "3.11.7"}, backend_info={"opset": 20, "plugin": "CPU"},
                     ops=["aten.mm.default"], tol_ratio=float(i), **columns)


def _records(n: int = 12, backends=("eager@cpu", "inductor@cpu", "openvino@cpu")) -> list[RunRecord]:
    return [_record(i, b) for i in range(n) for b in backends]


def _write_legacy(run_dir: Path, records: list[RunRecord], per_file: int = 4) -> None:
    """A schema-6 folder, written as gapfuzz wrote it then: the nested columns as JSON text."""
    for n, start in enumerate(range(0, len(records), per_file)):
        rows = []
        for r in records[start:start + per_file]:
            row = {**r.__dict__, "schema_version": 6}
            rows += [{k: json.dumps(v, sort_keys=True) if isinstance(v, dict) else v for k, v in row.items()}]
        for backend in sorted({r["backend"] for r in rows}):
            path = run_dir / "records" / backend / f"part-old-{n:03d}.parquet"
            path.parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(pa.Table.from_pylist([r for r in rows if r["backend"] == backend],
                                                schema=legacy_schema()), path)


def _sorted(table: pa.Table) -> pa.Table:
    return table.sort_by([(k, "ascending") for k in KEY])


def _parquet_files(run_dir: Path) -> list[Path]:
    return sorted((run_dir / "records").rglob("*.parquet"))


def test_nested_columns_are_structs_and_lists_that_read_back_as_written(tmp_path):
    records = _records(4)
    sink = RecordSink(Folder(tmp_path), flush_every=5)
    sink.records(records)
    sink.flush()
    schema = pq.read_schema(_parquet_files(tmp_path)[0])
    for name in NESTED:
        assert pa.types.is_struct(schema.field(name).type) or pa.types.is_list(schema.field(name).type), name
    table = RecordStore(tmp_path).read()
    back = {(r.variant_id, r.backend): r for r in map(RunRecord.from_row, table.to_pylist())}
    for r in records:
        again = back[(r.variant_id, r.backend)]
        assert again.backend_options == OPTIONS and type(again.backend_options["threads"]) is int
        assert (again.recipe, again.probe_recipe, again.div_growth) == (RECIPE, PROBE, GROWTH)
        assert again == dataclass_with(r, time=again.time)
    df = Run(tmp_path).records(["backend_options", "recipe", "probe_recipe", "div_growth", "versions"])
    assert all(o == OPTIONS for o in df["backend_options"])
    assert recipe_of(df["recipe"].iloc[0])["mutations"][1] == ["strided_input", {"how": "step", "input": 0}]
    assert df["probe_recipe"].iloc[0] == json.loads(PROBE) and df["div_growth"].iloc[0] == json.loads(GROWTH)


def dataclass_with(record: RunRecord, **changes) -> RunRecord:
    import dataclasses

    return dataclasses.replace(record, **changes)


def test_an_old_folder_of_json_text_reads_as_a_new_one(tmp_path):
    records = _records(6)
    _write_legacy(tmp_path / "old", records)
    new = RecordStore(tmp_path / "new")
    new.write([dataclass_with(r, schema_version=6) for r in records])
    old_table, new_table = RecordStore(tmp_path / "old").read(), new.read()
    assert old_table.schema.equals(new_table.schema)
    assert _sorted(old_table.drop_columns(["time"])).equals(_sorted(new_table.drop_columns(["time"])))
    for name in NESTED:  # each column's one function takes either form to the same value
        legacy = pq.read_table(_parquet_files(tmp_path / "old")[0]).column(name)[0].as_py()
        assert isinstance(legacy, str) and text(name, legacy) == text(name, new_table.column(name)[0].as_py())
    old_run, new_run = Run(tmp_path / "old"), Run(tmp_path / "new")
    columns = ["variant_id", "backend", "probe", "backend_options", "recipe", "versions", "backend_info"]
    a, b = (r.records(columns).sort_values(KEY).reset_index(drop=True) for r in (old_run, new_run))
    assert a.to_dict("records") == b.to_dict("records")
    assert backend_options_of(a["backend_options"].iloc[0]) == OPTIONS
    RecordStore(tmp_path / "old").write(_records(1))  # resumed with this gapfuzz: both formats in one folder
    both = RecordStore(tmp_path / "old").read(["variant_id", "backend_options"])
    assert both.num_rows == len(records) + 3 and both.schema.field("backend_options").type == \
        arrow_schema().field("backend_options").type


def test_a_torn_record_of_an_old_folder_is_one_line_naming_it(tmp_path):
    _write_legacy(tmp_path, _records(1, backends=("eager@cpu",)))
    path = _parquet_files(tmp_path)[0]
    table = pq.read_table(path)
    pq.write_table(table.set_column(table.schema.get_field_index("recipe"), "recipe", pa.array(["{not json"])),
                   path)
    with pytest.raises(ResultsError, match=r"timm/test_vit#0 on eager@cpu: its record's recipe is not what gapfuzz "
                                           r"writes there"):
        RecordStore(tmp_path).read()
    assert RecordStore(tmp_path).read(["variant_id"]).num_rows == 1  # the columns not asked for are not read


def test_compaction_keeps_every_row_once_in_one_file_per_backend(tmp_path):
    sink = RecordSink(Folder(tmp_path), flush_every=3)
    for r in _records(20):
        sink.records([r])
    sink.flush()
    store = RecordStore(tmp_path)
    before = _sorted(store.read())
    assert len(_parquet_files(tmp_path)) == 60  # a flush of three records: a file per backend
    figures = compact(store)
    files = _parquet_files(tmp_path)
    assert figures == {"before": 60, "after": 3} and len(files) == 3
    assert all(f.name.startswith("compact-") for f in files)
    assert not [p for p in tmp_path.rglob("*") if p.name.startswith(".")]  # no temporary left
    after = RecordStore(tmp_path)
    assert _sorted(after.read()).equals(before) and after.count() == 60
    assert json.loads(pq.read_schema(files[0]).metadata[REPLACES])  # the files it holds the rows of
    after.write(_records(2))  # --resume of a compacted run: more small files beside, read with it
    assert RecordStore(tmp_path).count() == 66 and len(RecordStore(tmp_path).done_keys()) == 60
    compact(RecordStore(tmp_path))
    assert len(_parquet_files(tmp_path)) == 3 and RecordStore(tmp_path).count() == 66
    assert compact(RecordStore(tmp_path)) == {"before": 3, "after": 3}  # one file each: nothing to do


def test_an_old_folder_compacts_into_the_nested_columns(tmp_path):
    records = _records(8)
    _write_legacy(tmp_path, records, per_file=3)
    before = _sorted(RecordStore(tmp_path).read())
    compact(RecordStore(tmp_path))
    assert len(_parquet_files(tmp_path)) == 3
    assert pq.read_schema(_parquet_files(tmp_path)[0]).field("recipe").type == arrow_schema().field("recipe").type
    assert _sorted(RecordStore(tmp_path).read()).equals(before)


def test_a_compaction_stopped_after_its_new_file_counts_no_row_twice(tmp_path, monkeypatch):
    sink = RecordSink(Folder(tmp_path), flush_every=4)
    for r in _records(12):
        sink.records([r])
    sink.flush()
    before = _sorted(RecordStore(tmp_path).read())
    monkeypatch.setattr(Folder, "remove", lambda self, path: (_ for _ in ()).throw(KeyboardInterrupt))
    with pytest.raises(KeyboardInterrupt):  # the new file in place, none of the old ones removed
        compact(RecordStore(tmp_path))
    monkeypatch.undo()
    names = [f.name for f in _parquet_files(tmp_path)]
    assert any(n.startswith("compact-") for n in names) and len(names) > 3
    store = RecordStore(tmp_path)
    assert _sorted(store.read()).equals(before) and store.count() == before.num_rows
    assert len(store.done_keys()) == 36 and len(store.files()) < len(names)
    df = Run(tmp_path).records(KEY)
    assert not df.duplicated().any() and len(df) == before.num_rows
    (tmp_path / "records" / "eager@cpu" / ".0123abcd.tmp").write_bytes(b"PAR1 half a file")  # stopped mid-write
    compact(RecordStore(tmp_path))  # the next compaction removes the leftovers first
    assert len(_parquet_files(tmp_path)) == 3 and _sorted(RecordStore(tmp_path).read()).equals(before)


@pytest.mark.parametrize("reader", ["pandas", "duckdb", "polars"])
def test_other_readers_read_every_column_without_parsing_json(tmp_path, reader):
    store = RecordStore(tmp_path)
    store.write(_records(2))
    compact(store)
    glob = f"{tmp_path}/records/*/*.parquet"
    if reader == "pandas":
        df = pd.read_parquet(tmp_path / "records")
        row = df.iloc[0]
        assert row["recipe"]["seed"] == "timm/test_vit" and row["probe_recipe"]["kind"] == "special"
        assert {e["key"]: e["value"] for e in row["backend_options"]}["mode"] == "max-autotune"
        assert row["div_growth"][0]["op"] == "aten.conv2d.default"
        strings = [c for c in df.columns if df[c].map(lambda v: isinstance(v, str) and v.startswith(("[", "{"))).any()]
        assert not strings, strings  # no column holds JSON text
    elif reader == "duckdb":
        duckdb = pytest.importorskip("duckdb")
        got = duckdb.sql(f"SELECT recipe.seed, recipe.mutations[1].name, probe_recipe.seed, div_growth[2].tol_ratio, "
                         f"o.value FROM read_parquet('{glob}'), unnest(backend_options) AS t(o) "
                         f"WHERE o.key = 'threads' LIMIT 1").fetchall()
        assert got == [("timm/test_vit", "mul_one", 166540719, 1554.357941, "4")]
        assert duckdb.sql(f"SELECT count(*) FROM (SELECT unnest(versions) AS v FROM read_parquet('{glob}')) "
                          f"WHERE v.key = 'torch' AND v.value = '2.14.1'").fetchall() == [(6,)]
    else:
        pl = pytest.importorskip("polars")
        df = pl.read_parquet(glob)
        assert {df.schema[n].__class__.__name__ for n in NESTED} <= {"Struct", "List"}
        assert df.select(pl.col("recipe").struct.field("rng")).to_series().to_list()[0] == 450132361
        kv = df.select(pl.col("backend_info").explode().struct.unnest()).filter(pl.col("key") == "opset")
        assert kv["value"].to_list()[0] == "20" and kv["type"].to_list()[0] == "int"


def test_a_run_on_an_object_store_compacts_too():
    pytest.importorskip("fsspec")
    store = RecordStore("memory://gapfuzz-compact/run")
    for r in _records(4):
        store.write([r])
    before = _sorted(store.read())
    assert compact(store) == {"before": 12, "after": 3}
    again = RecordStore("memory://gapfuzz-compact/run")
    assert _sorted(again.read()).equals(before) and all("/compact-" in f for f in again.files())


def test_the_seed_catalog_holds_lists_and_reads_an_old_catalog_of_json_text(tmp_path):
    """op_counts and input_spec are lists of structs that pandas reads as they are; a version-1 catalog (JSON
    text) reads as the same lists."""
    from gapfuzz.results.catalog import Catalog, CatalogRow, catalog_schema

    row = CatalogRow(seed_id="timm/test_vit", source="timm", ops=["aten.add.Tensor", "aten.mm.default"],
                     op_counts={"aten.mm.default": 3, "aten.add.Tensor": 1},
                     input_spec=[["arg0", [1, 3, 32, 32], "float32"]])
    Catalog(tmp_path / "new").write([row])
    df = pd.read_parquet(tmp_path / "new" / "catalog")
    assert [dict(e) for e in df.iloc[0]["op_counts"]] == [{"op": "aten.add.Tensor", "count": 1},
                                                           {"op": "aten.mm.default", "count": 3}]
    assert list(df.iloc[0]["input_spec"][0]["shape"]) == [1, 3, 32, 32]
    old = catalog_schema()
    for name in ("op_counts", "input_spec"):
        old = old.set(old.get_field_index(name), pa.field(name, pa.string()))
    path = tmp_path / "old" / "catalog" / "rows" / "part-old.parquet"
    path.parent.mkdir(parents=True)
    legacy = {**row.__dict__, "op_counts": json.dumps(row.op_counts), "input_spec": json.dumps(row.input_spec),
              "schema_version": 1}
    pq.write_table(pa.Table.from_pylist([legacy], schema=old), path)
    got, want = Catalog(tmp_path / "old").read(), Catalog(tmp_path / "new").read()
    assert got.select(["op_counts", "input_spec"]).equals(want.select(["op_counts", "input_spec"]))
    pq.write_table(pa.Table.from_pylist([{**legacy, "input_spec": '{"not": "a list"}'}], schema=old), path)
    with pytest.raises(ResultsError, match="input_spec"):
        Catalog(tmp_path / "old").read()

"""The seed catalog: one row per seed scanned (or built by a campaign), as Parquet.

It answers the export-coverage questions per source and family: how many seeds build,
fit the parameter cap, capture with torch.export and run on the reference, and why not.

``op_counts`` and ``input_spec`` are a list of structs each (from catalog version 2; version 1 held them as
JSON text, which ``read`` turns into the lists), so pandas, DuckDB and Polars read every column as it is.

A campaign resumed, a scan continued and a campaign's ``catalog:`` selection all trust its rows, so
``read`` checks them first: each file's columns against the catalog's (a file of another table, or of
wrong types, is refused) and each row's seed id, status and version; the first problem is one
``ResultsError`` line naming the file and the row.
"""
from __future__ import annotations

import dataclasses
import datetime as dt
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import pyarrow as pa

from gapfuzz.core.bugs import Status
from gapfuzz.core.ids import IdError, SeedId

from .folder import Folder
from .schema import arrow_schema_of

CATALOG_VERSION = 2


def _value(v):
    return json.loads(v) if isinstance(v, (str, bytes)) else v


class OpCounts:
    """``op_counts``: how many calls of each aten op the graph makes, ``[{op, count}]`` sorted by op."""

    arrow = pa.list_(pa.struct([("op", pa.string()), ("count", pa.int64())]))

    @staticmethod
    def encode(value) -> list[dict] | None:
        value = _value(value)
        if value is None:
            return None
        pairs = value.items() if isinstance(value, dict) else ((e["op"], e["count"]) for e in value)
        return [{"op": str(op), "count": int(n)} for op, n in sorted(pairs)]


class InputSpec:
    """``input_spec``: the seed's tensor inputs, ``[{name, shape, dtype}]``."""

    arrow = pa.list_(pa.struct([("name", pa.string()), ("shape", pa.list_(pa.int64())), ("dtype", pa.string())]))

    @staticmethod
    def encode(value) -> list[dict] | None:
        value = _value(value)
        if value is None:
            return None
        return [e if isinstance(e, dict) else {"name": e[0], "shape": [int(d) for d in e[1]], "dtype": e[2]}
                for e in value]


_NESTED = {"op_counts": OpCounts, "input_spec": InputSpec}


@dataclass
class CatalogRow:
    seed_id: str
    source: str = ""
    family: str = ""
    task: str = ""
    output_kind: str = ""
    status: str = Status.OK  # ok error crash timeout oom skipped (over the parameter cap)
    stage: str | None = None  # build budget capture run: where it stopped
    error_type: str | None = None
    message: str | None = None
    signature: str | None = None
    params: int | None = None
    node_count: int | None = None
    ops: list[str] = field(default_factory=list)
    op_counts: Annotated[dict, OpCounts] = field(default_factory=dict)  # {aten op: calls in the graph}
    input_spec: Annotated[list, InputSpec] = field(default_factory=list)  # [[name, shape, dtype], ...]
    output_names: list[str] = field(default_factory=list)
    build_s: float | None = None
    capture_s: float | None = None
    run_s: float | None = None
    torch_version: str = ""
    host: str = ""
    time: dt.datetime | None = None
    schema_version: int = CATALOG_VERSION


def as_row(row: CatalogRow) -> dict:
    """A catalog row as its Parquet columns hold it."""
    out = dataclasses.asdict(row)
    for name, codec in _NESTED.items():
        out[name] = codec.encode(out[name])
    return out


def catalog_schema() -> pa.Schema:
    return arrow_schema_of(CatalogRow, CATALOG_VERSION)


class Catalog:
    """``<dir>/catalog/rows/part-*.parquet``; whole files only, like the run records."""

    def __init__(self, run_dir: str | Path | Folder):
        self.folder = run_dir if isinstance(run_dir, Folder) else Folder(run_dir)
        self.dir = self.folder.path("catalog")

    def write(self, rows: list[CatalogRow]) -> str | None:
        if not rows:
            return None
        now = dt.datetime.now(dt.timezone.utc)
        data = [as_row(dataclasses.replace(r, time=r.time or now)) for r in rows]
        table = pa.Table.from_pylist(data, schema=catalog_schema())
        import uuid

        return self.folder.write_table(table, "catalog", "rows",
                                       f"part-{now:%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:12]}.parquet")

    def files(self) -> list[str]:
        return self.folder.files("catalog", "rows")  # a FolderError is a ResultsError

    def read(self) -> pa.Table:
        """One row per seed (the first written, should an older campaign have written one twice)."""
        import numpy as np
        import pyarrow.dataset as ds
        import pyarrow.parquet as pq

        from .store import ResultsError

        files = self.files()
        if not files:
            return catalog_schema().empty_table()
        try:
            legacy = [f for f in files if _check_columns(f, pq.read_schema(f, filesystem=self.folder.fs))]
            current = [f for f in files if f not in legacy]
            table = pa.concat_tables(
                [ds.dataset(current, schema=catalog_schema(), filesystem=self.folder.fs).to_table()] +
                [self._read_legacy(f) for f in legacy])
            if _bad_row(table) is not None:  # which file and row: each file read alone, on this path only
                for f in files:
                    found = _bad_row(self._read_legacy(f) if f in legacy else
                                     ds.dataset(f, schema=catalog_schema(), filesystem=self.folder.fs).to_table())
                    if found is not None:
                        raise ResultsError(f"{f}: row {found[0]}: {found[1]}; not a seed catalog row gapfuzz wrote")
        except (pa.ArrowException, OSError) as e:
            raise ResultsError(f"{self.dir}: cannot read the seed catalog: {' '.join(str(e).split())[:300]}") \
                from None
        _, first = np.unique(np.asarray(table.column("seed_id").to_pylist(), dtype=object), return_index=True)
        return table if len(first) == table.num_rows else table.take(np.sort(first))

    def _read_legacy(self, path: str) -> pa.Table:
        """A version 1 file: ``op_counts`` and ``input_spec`` JSON text, turned into their lists."""
        import pyarrow.dataset as ds

        schema = catalog_schema()
        old = schema
        for name in _NESTED:
            old = old.set(old.get_field_index(name), pa.field(name, pa.string()))
        table = ds.dataset(path, schema=old, filesystem=self.folder.fs).to_table()
        for name, codec in _NESTED.items():
            try:
                values = [codec.encode(v) for v in table.column(name).to_pylist()]
            except (ValueError, TypeError, KeyError, IndexError) as e:
                from .store import ResultsError
                raise ResultsError(f"{path}: its column {name!r} is not the JSON gapfuzz wrote there ({e})") from None
            table = table.set_column(table.schema.get_field_index(name), name, pa.array(values, codec.arrow))
        return table.cast(schema)

    def done(self) -> set[str]:
        return set(self.read().column("seed_id").to_pylist())


# a catalog column's type -> the file types that read as it without changing what it means
_READS_AS = ((pa.types.is_string, (pa.types.is_string, pa.types.is_large_string)),
             (pa.types.is_integer, (pa.types.is_integer,)), (pa.types.is_boolean, (pa.types.is_boolean,)),
             (pa.types.is_timestamp, (pa.types.is_timestamp,)),
             (pa.types.is_floating, (pa.types.is_floating, pa.types.is_integer)))


def _fits(have: pa.DataType, want: pa.DataType) -> bool:
    """Whether a file's column type reads as the catalog's without changing what it means."""
    if have == want or pa.types.is_null(have):
        return True
    if any(is_want(want) and any(k(have) for k in haves) for is_want, haves in _READS_AS):
        return True
    listed = pa.types.is_list(want) and (pa.types.is_list(have) or pa.types.is_large_list(have))
    return listed and _fits(have.value_type, want.value_type)


def _check_columns(path: str, schema: pa.Schema) -> bool:
    """A catalog file's columns: the catalog's own, of its types, seed_id among them; whether it is of version 1
    (``op_counts`` or ``input_spec`` as JSON text)."""
    from .store import ResultsError

    want, legacy = catalog_schema(), False
    for f in schema:
        if f.name in _NESTED and (pa.types.is_string(f.type) or pa.types.is_large_string(f.type)):
            legacy = True
            continue
        if f.name not in want.names:
            raise ResultsError(f"{path}: its column {f.name[:60]!r} is not a seed catalog's: not a catalog file "
                               f"gapfuzz wrote (a file of another table?)")
        if not _fits(f.type, want.field(f.name).type):
            raise ResultsError(f"{path}: its column {f.name!r} holds {f.type}, a seed catalog's holds "
                               f"{want.field(f.name).type}: not a catalog file gapfuzz wrote")
    if "seed_id" not in schema.names:
        raise ResultsError(f"{path}: it has no seed_id column: not a seed catalog file gapfuzz wrote")
    return legacy


_STATUSES = frozenset(s.value for s in Status)


def _bad_row(table: pa.Table) -> tuple[int, str] | None:
    """The first row (its index in ``table``) whose seed id, status or version is not one gapfuzz writes."""
    versions = table.column("schema_version").to_pylist()
    statuses = table.column("status").to_pylist()
    for i, seed_id in enumerate(table.column("seed_id").to_pylist()):
        if seed_id is None:
            return i, "seed_id is null (every row names its seed)"
        try:
            SeedId.parse(seed_id)
            well_formed = bool(seed_id) and seed_id == seed_id.strip() and "/" in seed_id
        except IdError:
            well_formed = False
        if not well_formed:
            return i, f"seed_id {seed_id[:60]!r} is not a seed id (source/name)"
        if statuses[i] not in _STATUSES:
            return i, f"status {str(statuses[i])[:40]!r} is not one of {', '.join(sorted(_STATUSES))}"
        if versions[i] is not None and not 1 <= versions[i] <= CATALOG_VERSION:
            return i, f"schema_version {versions[i]}: this gapfuzz reads seed catalog versions 1 to {CATALOG_VERSION}"
    return None

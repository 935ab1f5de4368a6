"""The seed catalog: one row per seed scanned (or built by a campaign), as Parquet.

It answers the export-coverage questions per source and family: how many seeds build,
fit the parameter cap, capture with torch.export and run on the reference, and why not.
"""
from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from gapfuzz.core.bugs import Status

from .folder import Folder
from .schema import arrow_schema_of

CATALOG_VERSION = 1


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
    op_counts: str = "{}"  # JSON {aten op: calls in the graph}
    input_spec: str = "[]"  # JSON [[name, shape, dtype], ...]
    output_names: list[str] = field(default_factory=list)
    build_s: float | None = None
    capture_s: float | None = None
    run_s: float | None = None
    torch_version: str = ""
    host: str = ""
    time: dt.datetime | None = None
    schema_version: int = CATALOG_VERSION


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
        data = [dataclasses.asdict(dataclasses.replace(r, time=r.time or now)) for r in rows]
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

        from .store import ResultsError

        files = self.files()
        if not files:
            return catalog_schema().empty_table()
        try:
            table = ds.dataset(files, schema=catalog_schema(), filesystem=self.folder.fs).to_table()
        except (pa.ArrowException, OSError) as e:
            raise ResultsError(f"{self.dir}: cannot read the seed catalog: {' '.join(str(e).split())[:300]}") \
                from None
        _, first = np.unique(np.asarray(table.column("seed_id").to_pylist(), dtype=object), return_index=True)
        return table if len(first) == table.num_rows else table.take(np.sort(first))

    def done(self) -> set[str]:
        return set(self.read().column("seed_id").to_pylist())

"""The results folder: append-only Parquet files, written whole or not at all.

Layout of ``runs/<name>/``::

    campaign.yaml            the resolved campaign (every default filled in)
    run.json                 what analysis reads of it: backend names, reference, oracle, tolerances
    records/<backend>/part-<time>-<id>.parquet   one row per (variant, backend, probe)
    catalog/rows/part-*.parquet                  one row per seed built (results.catalog)
    stats/session-<time>.json                    each session's own figures

Each file holds every column (backend included), so a single file is self-describing
and ``pandas.read_parquet("runs/<name>/records")`` reads the whole dataset. The folder may be on
any filesystem pyarrow writes (``results.folder``), and each file appears whole or not at all.
"""
from __future__ import annotations

import datetime as dt
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from .folder import Folder, ResultsError
from .schema import READABLE_VERSIONS, RunRecord, arrow_schema


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "@-_.+" else "_" for c in name)


class RecordStore:
    def __init__(self, run_dir: str | Path | Folder):
        self.folder = run_dir if isinstance(run_dir, Folder) else Folder(run_dir)
        self.records_dir = self.folder.path("records")
        self._checked: set[str] = set()

    def write(self, records: list[RunRecord]) -> list[str]:
        """One file per backend among ``records``; each file appears whole or not at all."""
        if not records:
            return []
        now = dt.datetime.now(dt.timezone.utc)
        by_backend: dict[str, list[dict]] = {}
        for r in records:
            if r.time is None:
                r.time = now
            by_backend.setdefault(r.backend, []).append(r.to_row())
        stamp, schema, paths = time.strftime("%Y%m%dT%H%M%S"), arrow_schema(), []
        for backend, rows in sorted(by_backend.items()):
            table = pa.Table.from_pylist(rows, schema=schema)
            name = f"part-{stamp}-{uuid.uuid4().hex[:12]}.parquet"
            paths.append(self.folder.write_table(table, "records", _safe(backend), name))
        return paths

    def files(self) -> list[str]:
        return self.folder.files("records")  # a FolderError is a ResultsError

    def dataset(self) -> ds.Dataset | None:
        files = self.files()
        if not files:
            return None
        for f in files:
            self._check(f)
        return ds.dataset(files, format="parquet", schema=arrow_schema(), filesystem=self.folder.fs)

    def _check(self, path: str) -> None:
        """A file under records/ must be a gapfuzz record file (checked once per file, from its footer)."""
        if path in self._checked:
            return
        try:
            meta = pq.read_schema(path, filesystem=self.folder.fs).metadata or {}
        except (pa.ArrowException, OSError) as e:
            raise ResultsError(f"{path}: not a readable Parquet file: {' '.join(str(e).split())[:200]}") from None
        if b"gapfuzz_schema_version" not in meta:
            raise ResultsError(f"{path}: not a gapfuzz record file (its schema has no gapfuzz_schema_version); "
                               f"move it out of {self.records_dir}")
        self._checked.add(path)

    def read(self, columns: list[str] | None = None, filter=None) -> pa.Table:
        d = self.dataset()
        if d is None:
            return arrow_schema().empty_table() if columns is None else \
                pa.schema([arrow_schema().field(c) for c in columns]).empty_table()
        try:
            return d.to_table(columns=columns, filter=filter)
        except (pa.ArrowException, OSError) as e:
            raise ResultsError(f"{self.records_dir}: cannot read records: {' '.join(str(e).split())[:300]}") \
                from None

    def done_keys(self) -> set[tuple[str, str]]:
        t = self.read(["variant_id", "backend"])
        return set(zip(t.column("variant_id").to_pylist(), t.column("backend").to_pylist()))

    def count(self) -> int:
        d = self.dataset()
        try:
            return 0 if d is None else d.count_rows()
        except (pa.ArrowException, OSError) as e:
            raise ResultsError(f"{self.records_dir}: cannot read records: {' '.join(str(e).split())[:300]}") \
                from None


def check_version(table: pa.Table) -> None:
    if "schema_version" in table.column_names and table.num_rows:
        versions = set(table.column("schema_version").to_pylist())
        if versions - set(READABLE_VERSIONS):
            raise ResultsError(f"records have schema versions {sorted(versions)}; this gapfuzz reads "
                               f"{', '.join(map(str, READABLE_VERSIONS))}")

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
A finished run's files are compacted (``results.compact``): a ``compact-*`` file names in its footer
the files it holds the rows of, and until those are removed no reader counts them. Files written
before schema 7 hold the nested columns as JSON text; they are read as the nested columns are.
"""
from __future__ import annotations

import datetime as dt
import json
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from .columns import NESTED, encode_column
from .folder import Folder, ResultsError
from .schema import READABLE_VERSIONS, RunRecord, arrow_schema, legacy_schema

COMPACT_PREFIX = "compact-"  # a compacted file's name begins so (``results.compact``)
REPLACES = b"gapfuzz_replaces"  # in its footer: the JSON list of names (in its folder) whose rows it holds


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "@-_.+" else "_" for c in name)


class RecordStore:
    def __init__(self, run_dir: str | Path | Folder):
        self.folder = run_dir if isinstance(run_dir, Folder) else Folder(run_dir)
        self.records_dir = self.folder.path("records")
        self._schemas: dict[str, pa.Schema] = {}  # file -> its footer's schema, read once

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
        """The record files that count: every one but those a compacted file replaces."""
        every = self.folder.files("records")  # a FolderError is a ResultsError
        replaced = self.replaced(every)
        return [f for f in every if f not in replaced]

    def replaced(self, files: list[str]) -> set[str]:
        """Those of ``files`` whose rows a compacted file among them holds (left over by an interrupted
        compaction: removed by the next)."""
        out = set()
        for f in files:
            folder, name = f.rsplit("/", 1)
            if name.startswith(COMPACT_PREFIX):
                try:
                    names = json.loads((self._check(f).metadata or {}).get(REPLACES, b"[]"))
                except ValueError:
                    raise ResultsError(f"{f}: its {REPLACES.decode()} is not JSON: not a file gapfuzz compacted; "
                                       f"move it out of {self.records_dir}") from None
                out |= {f"{folder}/{n}" for n in names if isinstance(n, str) and "/" not in n} if \
                    isinstance(names, list) else set()
        return out

    def is_legacy(self, path: str) -> bool:
        """Whether a file holds the nested columns as JSON text (written before schema 7)."""
        schema = self._check(path)
        return any(pa.types.is_string(schema.field(n).type) for n in NESTED if n in schema.names)

    def datasets(self, files: list[str] | None = None) -> list[tuple[ds.Dataset, bool]]:
        """The files (default: those that count) as datasets, one per format: (dataset, legacy)."""
        files = self.files() if files is None else files
        legacy = {f for f in files if self.is_legacy(f)}
        current, legacy = [f for f in files if f not in legacy], [f for f in files if f in legacy]
        return [(ds.dataset(group, format="parquet", schema=legacy_schema() if old else arrow_schema(),
                            filesystem=self.folder.fs), old) for group, old in ((current, False), (legacy, True))
                if group]

    def _check(self, path: str) -> pa.Schema:
        """A file under records/ must be a gapfuzz record file (checked once per file, from its footer)."""
        if path in self._schemas:
            return self._schemas[path]
        try:
            schema = pq.read_schema(path, filesystem=self.folder.fs)
        except (pa.ArrowException, OSError) as e:
            raise ResultsError(f"{path}: not a readable Parquet file: {' '.join(str(e).split())[:200]}") from None
        if b"gapfuzz_schema_version" not in (schema.metadata or {}):
            raise ResultsError(f"{path}: not a gapfuzz record file (its schema has no gapfuzz_schema_version); "
                               f"move it out of {self.records_dir}")
        self._schemas[path] = schema
        return schema

    def read(self, columns: list[str] | None = None, filter=None) -> pa.Table:
        """The records that count (every column, or those named), nested columns as structs and lists
        whatever the format of the file they come from."""
        schema = arrow_schema() if columns is None else pa.schema([arrow_schema().field(c) for c in columns])
        try:
            parts = [upgraded(d.to_table(columns=columns, filter=filter), self.records_dir) if old else
                     d.to_table(columns=columns, filter=filter) for d, old in self.datasets()]
        except (pa.ArrowException, OSError) as e:
            raise ResultsError(f"{self.records_dir}: cannot read records: {' '.join(str(e).split())[:300]}") \
                from None
        return pa.concat_tables([p.cast(schema) for p in parts]) if parts else schema.empty_table()

    def done_keys(self) -> set[tuple[str, str]]:
        t = self.read(["variant_id", "backend"])
        return set(zip(t.column("variant_id").to_pylist(), t.column("backend").to_pylist()))

    def count(self) -> int:
        try:
            return sum(d.count_rows() for d, _ in self.datasets())
        except (pa.ArrowException, OSError) as e:
            raise ResultsError(f"{self.records_dir}: cannot read records: {' '.join(str(e).split())[:300]}") \
                from None


def check_version(table: pa.Table) -> None:
    if "schema_version" in table.column_names and table.num_rows:
        versions = set(table.column("schema_version").to_pylist())
        if versions - set(READABLE_VERSIONS):
            raise ResultsError(f"records have schema versions {sorted(versions)}; this gapfuzz reads "
                               f"{', '.join(map(str, READABLE_VERSIONS))}")


def upgraded(data: pa.Table | pa.RecordBatch, where: str) -> pa.Table | pa.RecordBatch:
    """Records of a file before schema 7 with their JSON-text columns as the nested columns; a value that is
    not the JSON gapfuzz wrote there (a torn or foreign record) is one ``ResultsError`` line."""
    for name in NESTED:
        i = data.schema.get_field_index(name)
        if i < 0 or not pa.types.is_string(data.schema.field(i).type):
            continue
        try:
            column = encode_column(name, data.column(i).to_pylist())
        except (ValueError, TypeError, AttributeError, KeyError, IndexError, pa.ArrowException) as e:
            rows = data.select([c for c in ("variant_id", "backend") if c in data.schema.names]).to_pylist()
            row = next((r for r, v in zip(rows, data.column(i).to_pylist()) if not _encodes(name, v)), {})
            which = f"{row.get('variant_id')} on {row.get('backend')}: " if row else ""
            raise ResultsError(f"{where}: {which}its record's {name} is not what gapfuzz writes there "
                               f"({type(e).__name__}: {' '.join(str(e).split())[:160]})") from None
        data = data.set_column(i, pa.field(name, column.type), column)
    return data


def _encodes(name: str, value) -> bool:
    try:
        encode_column(name, [value])
        return True
    except (ValueError, TypeError, AttributeError, KeyError, IndexError, pa.ArrowException):
        return False

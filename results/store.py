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
Reading checks each file's column types from its footer and caps free text as it is read, so a file no
gapfuzz wrote is one line naming it and its column, and a folder of huge messages costs what capped ones do.
"""
from __future__ import annotations

import datetime as dt
import json
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from gapfuzz.core.text import CUT_MARK, MAX_FIELD_CHARS

from .columns import NESTED, encode_column, json_problem
from .folder import Folder, ResultsError
from .schema import READABLE_VERSIONS, TEXT_COLUMNS, RunRecord, arrow_schema, legacy_schema

COMPACT_PREFIX = "compact-"  # a compacted file's name begins so (``results.compact``)
REPLACES = b"gapfuzz_replaces"  # in its footer: the JSON list of names (in its folder) whose rows it holds
_DICTIONARY = pa.dictionary(pa.int32(), pa.string())
BATCH_ROWS = 131_072  # records read at a time (pyarrow's own batch size)
TEXT_BUDGET = 64 << 20  # bytes of free text a batch of records holds as read, before it is capped: a folder of
# 50 MB messages is read a few rows at a time, not as whole columns
MAX_TEXT_CHUNK = 256 << 20  # bytes of one text column in one row group (more, if its rows' capped fields could be)
_FIELD_BYTES = 4 * MAX_FIELD_CHARS + 256  # the most one capped field takes in Parquet: UTF-8, its cut mark, its length


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "@-_.+" else "_" for c in name)


class RecordStore:
    def __init__(self, run_dir: str | Path | Folder):
        self.folder = run_dir if isinstance(run_dir, Folder) else Folder(run_dir)
        self.records_dir = self.folder.path("records")
        self._schemas: dict[str, pa.Schema] = {}  # file -> its footer's schema, read and checked once
        self._footers: dict[str, pq.FileMetaData] = {}  # and the footer (its row groups' sizes)

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
        live = [f for f in every if f not in replaced]
        for f in live:  # every reader's files, each footer checked once before any of them is read
            self._check(f)
        return live

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

    def datasets(self, files: list[str] | None = None, text_dictionary: bool = False) \
            -> list[tuple[ds.Dataset, bool]]:
        """The files (default: those that count) as datasets, one per format: (dataset, legacy). With
        ``text_dictionary`` the free-text columns are read dictionary-encoded, as Parquet holds them: a
        message repeated in a thousand rows is one value until ``capped_text`` has cut it."""
        files = self.files() if files is None else files
        legacy = {f for f in files if self.is_legacy(f)}
        current, legacy = [f for f in files if f not in legacy], [f for f in files if f in legacy]
        form = ds.ParquetFileFormat(read_options=ds.ParquetReadOptions(dictionary_columns=TEXT_COLUMNS)) \
            if text_dictionary else "parquet"
        out = []
        for group, old in ((current, False), (legacy, True)):
            schema = legacy_schema() if old else arrow_schema()
            if text_dictionary:
                for name in TEXT_COLUMNS:
                    schema = schema.set(schema.get_field_index(name), pa.field(name, _DICTIONARY))
            if group:
                out.append((ds.dataset(group, format=form, schema=schema, filesystem=self.folder.fs), old))
        return out

    def _check(self, path: str) -> pa.Schema:
        """A file under records/ must be a gapfuzz record file whose columns hold the types gapfuzz writes there
        (checked once per file, from its footer): a ``status`` of floats or a ``backend`` of integers would
        otherwise be read as data (cast to text), and a failure cluster vanish."""
        if path in self._schemas:
            return self._schemas[path]
        try:
            footer = pq.read_metadata(path, filesystem=self.folder.fs)
            schema = footer.schema.to_arrow_schema()
        except (pa.ArrowException, OSError) as e:
            raise ResultsError(f"{path}: not a readable Parquet file: {' '.join(str(e).split())[:200]}") from None
        if b"gapfuzz_schema_version" not in (schema.metadata or {}):
            raise ResultsError(f"{path}: not a gapfuzz record file (its schema has no gapfuzz_schema_version); "
                               f"move it out of {self.records_dir}")
        problem = column_problem(schema)
        if problem:
            raise ResultsError(f"{path}: {problem}: not a record file as gapfuzz writes it; move it out of "
                               f"{self.records_dir}")
        self._schemas[path], self._footers[path] = schema, footer
        return schema

    def _batch_rows(self, files: list[str], columns: list[str]) -> int:
        """How many records to read at a time so that a batch holds about ``TEXT_BUDGET`` bytes of the free-text
        columns read (from the footers: each row group's text bytes per row). Parquet decodes a page whole, and
        one page may hold a row group's every value, so a text column of more than ``MAX_TEXT_CHUNK`` bytes in one
        row group (never written so: each field is capped) is refused before it is read."""
        text = set(TEXT_COLUMNS).intersection(columns)
        most = 0.0
        for f in files if text else ():
            self._check(f)
            footer = self._footers[f]
            for i in range(footer.num_row_groups):
                group, size = footer.row_group(i), 0
                for j in range(group.num_columns):
                    chunk = group.column(j)
                    if chunk.path_in_schema in text:
                        if chunk.total_uncompressed_size > max(MAX_TEXT_CHUNK, group.num_rows * _FIELD_BYTES):
                            raise ResultsError(
                                f"{f}: its column {chunk.path_in_schema} holds {chunk.total_uncompressed_size >> 20} "
                                f"MiB of text in a row group of {group.num_rows} rows, more than gapfuzz writes (a "
                                f"field is capped at {MAX_FIELD_CHARS} characters); not read")
                        size += chunk.total_uncompressed_size
                most = max(most, size / max(group.num_rows, 1))
        return int(min(BATCH_ROWS, max(1, TEXT_BUDGET // most))) if most else BATCH_ROWS

    def read(self, columns: list[str] | None = None, filter=None) -> pa.Table:
        """The records that count (every column, or those named), nested columns as structs and lists
        whatever the format of the file they come from, free text capped (``capped_text``) batch by batch as it
        is read: a malformed file or value is one ``ResultsError`` line naming the file and the column."""
        schema = arrow_schema() if columns is None else pa.schema([arrow_schema().field(c) for c in columns])
        files = self.files()
        rows = self._batch_rows(files, schema.names)
        scan = {"batch_size": rows} if rows == BATCH_ROWS else \
            {"batch_size": rows, "batch_readahead": 1, "fragment_readahead": 1}  # big text: a batch in memory at once
        parts = []
        try:
            for dataset, old in self.datasets(files, text_dictionary=True):
                for tagged in dataset.scanner(columns=columns, filter=filter, **scan).scan_batches():
                    path, batch = tagged.fragment.path, tagged.record_batch
                    batch = pa.Table.from_batches([upgraded(batch, path) if old else batch])
                    parts.append(_checked_json(capped_text(batch), path).cast(schema))
        except (pa.ArrowException, OSError) as e:
            raise ResultsError(f"{self.records_dir}: cannot read records: {' '.join(str(e).split())[:300]}") \
                from None
        return pa.concat_tables(parts) if parts else schema.empty_table()

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


def _fits(actual: pa.DataType, expected: pa.DataType) -> bool:
    """Whether a file's column of type ``actual`` holds values of ``expected`` as read: the same kind (an integer
    of any width, text as large or dictionary strings, a column of nulls), never numbers read as names."""
    if pa.types.is_null(actual):
        return True
    if pa.types.is_dictionary(actual):
        actual = actual.value_type
    if pa.types.is_string(expected):
        return pa.types.is_string(actual) or pa.types.is_large_string(actual)
    if pa.types.is_integer(expected):
        return pa.types.is_integer(actual) and actual != pa.uint64()
    if pa.types.is_floating(expected):
        return pa.types.is_floating(actual) or pa.types.is_integer(actual)
    if pa.types.is_timestamp(expected):
        return pa.types.is_timestamp(actual)
    if pa.types.is_list(expected):
        return (pa.types.is_list(actual) or pa.types.is_large_list(actual)) and \
            _fits(actual.value_type, expected.value_type)
    if pa.types.is_struct(expected):
        return pa.types.is_struct(actual) and sorted(f.name for f in actual) == sorted(f.name for f in expected) \
            and all(_fits(actual.field(f.name).type, f.type) for f in expected)
    return actual == expected


def column_problem(schema: pa.Schema) -> str | None:
    """Why a record file's columns are not of the types gapfuzz writes there (any schema version: the nested
    columns all Parquet structs and lists, or all JSON text before version 7); None when they are."""
    text = [n for n in NESTED if n in schema.names and pa.types.is_string(schema.field(n).type)]
    nested = [n for n in NESTED if n in schema.names and not pa.types.is_null(schema.field(n).type)]
    legacy = bool(text) and text == nested  # every nested column JSON text: a file written before schema 7
    expected = legacy_schema() if legacy else arrow_schema()
    for field in schema:
        if field.name in expected.names and not _fits(field.type, expected.field(field.name).type):
            return f"its column {field.name} holds {field.type}, where gapfuzz writes {expected.field(field.name).type}"
    return None


def capped_text(table: pa.Table, limit: int = MAX_FIELD_CHARS) -> pa.Table:
    """The free-text columns cut to ``limit`` characters with the mark a writer leaves (``core.text``), in
    Arrow before any Python string is made, and a dictionary-encoded column's dictionary before it is decoded:
    a folder written before records were capped may hold a 20 MB message, which would otherwise cost triage
    gigabytes in pandas and its regexes."""
    for i, name in enumerate(table.column_names):
        column = table.column(i)
        if name not in TEXT_COLUMNS:
            continue
        if pa.types.is_dictionary(column.type):
            column = pa.chunked_array([pa.DictionaryArray.from_arrays(c.indices, _capped(c.dictionary, limit))
                                       .cast(pa.string()) for c in column.chunks], pa.string())
        elif pa.types.is_string(column.type):
            column = _capped(column, limit)
        else:
            continue
        table = table.set_column(i, name, column)
    return table


def _capped(column, limit: int):
    """A text column cut as ``core.text.capped`` cuts; a value a writer already cut (``limit`` characters and
    its mark) is left as it is."""
    longest = limit + len(CUT_MARK.format(10 ** 15))
    if not len(column) or (pc.max(pc.binary_length(column)).as_py() or 0) <= longest:  # bytes: at least as many
        return column  # as characters
    before, after = CUT_MARK.split("{}")
    lengths = pc.utf8_length(column)
    mark = pc.binary_join_element_wise(before, pc.cast(pc.subtract(lengths, limit), pa.string()), after, "")
    cut = pc.binary_join_element_wise(pc.utf8_slice_codeunits(column, 0, limit), mark, "")
    return pc.if_else(pc.greater(lengths, longest), cut, column)


def _checked_json(table: pa.Table, where: str) -> pa.Table:
    """``table``, its nested columns' JSON values checked (``columns.json_problem``): a value nested ten thousand
    deep is one ``ResultsError`` line here, not a ``RecursionError`` wherever it would be decoded."""
    for name in NESTED:
        if name in table.column_names and not pa.types.is_string(table.schema.field(name).type):
            problem = json_problem(table.column(name))
            if problem:
                raise ResultsError(f"{where}: its column {name}: {problem}")
    return table


def upgraded(data: pa.Table | pa.RecordBatch, where: str) -> pa.Table | pa.RecordBatch:
    """Records of a file before schema 7 with their JSON-text columns as the nested columns; a value that is
    not the JSON gapfuzz wrote there (a torn or foreign record) is one ``ResultsError`` line."""
    for name in NESTED:
        i = data.schema.get_field_index(name)
        if i < 0 or not pa.types.is_string(data.schema.field(i).type):
            continue
        try:
            column = encode_column(name, data.column(i).to_pylist())
        except (ValueError, TypeError, AttributeError, KeyError, IndexError, RecursionError, pa.ArrowException) as e:
            rows = data.select([c for c in ("variant_id", "backend") if c in data.schema.names]).to_pylist()
            row = next((r for r, v in zip(rows, data.column(i).to_pylist()) if not _encodes(name, v)), {})
            which = " on ".join(str(row[c]) for c in ("variant_id", "backend") if row.get(c) is not None)
            raise ResultsError(f"{where}: {which + ': ' if which else ''}its record's {name} is not what gapfuzz "
                               f"writes there ({type(e).__name__}: {' '.join(str(e).split())[:160]})") from None
        data = data.set_column(i, pa.field(name, column.type), column)
    return data


def _encodes(name: str, value) -> bool:
    try:
        encode_column(name, [value])
        return True
    except (ValueError, TypeError, AttributeError, KeyError, IndexError, RecursionError, pa.ArrowException):
        return False

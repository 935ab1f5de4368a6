"""A finished run's records in a few files: each ``records/<backend>/`` rewritten as one.

A campaign writes a small file at every flush (every few seconds), so a default run holds dozens per
backend; readers outside gapfuzz pay for each. Compacting rewrites each partition's files as one
``compact-<time>-<id>.parquet`` (read and written through ``pyarrow.dataset`` a batch at a time; a file
before schema 7 comes out with its nested columns as structs), then removes them.

No row is lost or counted twice at any point: the new file appears whole (``Folder.write_batches``:
a hidden temporary, renamed), and names in its footer the files it holds the rows of, which every
reader leaves out from then on (``RecordStore.files``) until they are removed. An interrupted
compaction leaves either the old files alone (the hidden temporary is never read) or the new file
beside files it replaces; the next compaction removes those first, and ``--resume`` reads the rows once.
"""
from __future__ import annotations

import json
import time
import uuid
from collections import defaultdict

import pyarrow as pa
import pyarrow.parquet as pq

from .folder import ResultsError
from .schema import arrow_schema
from .store import COMPACT_PREFIX, REPLACES, RecordStore, upgraded


def compact(store: RecordStore, min_files: int = 2) -> dict:
    """Rewrite every partition of ``store`` holding at least ``min_files`` record files as one file;
    returns the record files before and after."""
    every = store.folder.files("records")
    for leftover in sorted(store.replaced(every)):  # an earlier compaction stopped before removing them
        store.folder.remove(leftover)
    live = store.files()
    by_partition: dict[str, list[str]] = defaultdict(list)
    for f in live:
        by_partition[f.rsplit("/", 1)[0]].append(f)
    for folder, files in sorted(by_partition.items()):
        if len(files) >= min_files:
            _compact_partition(store, folder, files)
    return {"before": len(every), "after": len(store.folder.files("records"))}


def _compact_partition(store: RecordStore, folder: str, files: list[str]) -> str:
    schema = arrow_schema()
    names = [f.rsplit("/", 1)[1] for f in files]
    schema = schema.with_metadata({**schema.metadata, REPLACES: json.dumps(names).encode()})

    def batches():
        for dataset, legacy in store.datasets(files):
            for batch in dataset.to_batches():
                batch = upgraded(batch, folder) if legacy else batch
                yield pa.RecordBatch.from_arrays(batch.columns, schema=schema)

    name = f"{COMPACT_PREFIX}{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:12]}.parquet"
    expected = sum(_rows(store, f) for f in files)
    written = store.folder.write_batches(schema, batches(), f"{folder}/{name}")
    if written not in store.folder.files("records") or _rows(store, written) != expected:  # never: checked anyway
        store.folder.remove(written)
        raise ResultsError(f"{written}: the compacted file does not hold the {expected} rows of {folder}; "
                           f"its {len(files)} files are kept")
    for f in files:  # the rows are in ``written`` now, and no reader counts these
        store.folder.remove(f)
    return written


def _rows(store: RecordStore, path: str) -> int:
    with store.folder.open(path) as f:
        return pq.ParquetFile(f).metadata.num_rows

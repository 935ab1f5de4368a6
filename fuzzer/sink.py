"""Where a campaign's results go: run records and seed catalog rows, written as whole files.

Records are buffered and flushed every ``run.flush_every`` records or ten seconds, catalog rows
every twenty seeds, and both at the end (or when the campaign is stopped), so a killed campaign
keeps everything up to its last flush and resumes from there.
"""
from __future__ import annotations

import time
from pathlib import Path

from analysis.catalog import Catalog, CatalogRow
from analysis.schema import RunRecord
from analysis.store import RecordBuffer, RecordStore

from .progress import Progress
from .session import SessionStats

CATALOG_EVERY = 20


class RecordSink:
    def __init__(self, run_dir: Path, flush_every: int, progress: Progress, stats: SessionStats):
        self.store = RecordStore(run_dir)
        self.buffer = RecordBuffer(self.store, max_records=flush_every, max_age_s=10)
        self.catalog, self.rows = Catalog(run_dir), []
        self.progress, self.stats = progress, stats

    def records(self, records: list[RunRecord]) -> None:
        for r in records:
            self.progress.status[r.status] += 1
        t0 = time.perf_counter()
        self.buffer.add(records)
        self.stats["write_s"] += time.perf_counter() - t0

    def catalog_row(self, row: CatalogRow) -> None:
        self.rows.append(row)
        if len(self.rows) >= CATALOG_EVERY:
            self._write_catalog()

    def _write_catalog(self) -> None:
        self.catalog.write(self.rows)
        self.rows = []

    def flush(self) -> None:
        self.buffer.flush()
        self._write_catalog()

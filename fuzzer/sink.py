"""Where a campaign's results go: run records and seed catalog rows, written as whole files.

Both are buffered and flushed together, every ``run.flush_every`` records or ten seconds and at the
end (or when the campaign is stopped), the catalog rows first: a seed's records are never on disk
without its catalog row, so a killed campaign resumes from its last flush with nothing lost. A
seed already in the catalog (built again on resume, for the variants it still owes) gets no
second row.
"""
from __future__ import annotations

import signal
import threading
import time
from contextlib import contextmanager

from analysis.catalog import Catalog, CatalogRow
from analysis.folder import Folder
from analysis.schema import RunRecord
from analysis.store import RecordStore
from core.bugs import Status

from .progress import Progress
from .session import SessionStats

MAX_AGE_S = 10.0


class RecordSink:
    def __init__(self, folder: Folder, flush_every: int, progress: Progress, stats: SessionStats):
        self.store, self.catalog = RecordStore(folder), Catalog(folder)
        self.flush_every, self.progress, self.stats = flush_every, progress, stats
        self.records_pending: list[RunRecord] = []
        self.rows_pending: list[CatalogRow] = []
        self.cataloged = self.catalog.done()
        self.flushed = time.monotonic()
        self.written = 0

    def records(self, records: list[RunRecord]) -> None:
        pairs: dict[tuple[str, str], str] = {}  # progress counts (variant, backend) pairs, not probes
        for r in records:
            key = (r.variant_id, r.backend)
            if key not in pairs or pairs[key] == Status.OK:
                pairs[key] = r.status  # a pair shows the first probe that did not end ok
        for status in pairs.values():
            self.progress.status[status] += 1
        self.records_pending += records
        if len(self.records_pending) >= self.flush_every or time.monotonic() - self.flushed > MAX_AGE_S:
            self.flush()

    def catalog_row(self, row: CatalogRow) -> None:
        if row.seed_id not in self.cataloged:
            self.cataloged.add(row.seed_id)
            self.rows_pending.append(row)

    def flush(self) -> None:
        """Write what is pending. A Ctrl-C waits until the files and the bookkeeping agree: one that landed
        between a file's rename and the pending list's update would have the records written again."""
        t0 = time.perf_counter()
        with deferred_interrupt():
            if self.rows_pending:
                self.catalog.write(self.rows_pending)
                self.rows_pending = []
            if self.records_pending:
                self.store.write(self.records_pending)
                self.written += len(self.records_pending)
                self.records_pending = []
        self.flushed = time.monotonic()
        self.stats["write_s"] += time.perf_counter() - t0


@contextmanager
def deferred_interrupt():
    """Hold a Ctrl-C (SIGINT) until the block ends, then raise it (in the main thread; elsewhere a no-op)."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield
        return
    caught = []
    previous = signal.signal(signal.SIGINT, lambda *a: caught.append(a))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught:
        raise KeyboardInterrupt

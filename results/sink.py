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

from .catalog import Catalog, CatalogRow
from .folder import Folder
from .schema import RunRecord
from .store import RecordStore

MAX_AGE_S = 10.0


class RecordSink:
    def __init__(self, folder: Folder, flush_every: int):
        self.store, self.catalog = RecordStore(folder), Catalog(folder)
        self.flush_every = flush_every
        self.records_pending: list[RunRecord] = []
        self.rows_pending: list[CatalogRow] = []
        self.cataloged = self.catalog.done()
        self.flushed = time.monotonic()
        self.written = 0
        self.write_s = 0.0  # time spent writing

    def records(self, records: list[RunRecord]) -> None:
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
        self.write_s += time.perf_counter() - t0


@contextmanager
def deferred_interrupt():
    """Hold Ctrl-C (SIGINT) and SIGTERM until the block ends, then hand each to the Python handler it had (which
    raises: KeyboardInterrupt, or the CLI's Terminated), so a file written is also marked written; in the main
    thread only (elsewhere a no-op), and only a signal whose handler is Python's."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held = {n: h for n in (signal.SIGINT, signal.SIGTERM) if callable(h := signal.getsignal(n))}
    caught = []
    for n in held:
        signal.signal(n, lambda *a: caught.append(a))
    try:
        yield
    finally:
        for n, h in held.items():
            signal.signal(n, h)
    for signum, frame in caught[:1]:
        held[signum](signum, frame)

"""A campaign session's own figures (builds, worker busy time, start-up, writing, workers lost),
kept in ``runs/<name>/stats/session-<stamp>.json``: rewritten every minute and at the end, so that
a campaign that is killed keeps them up to its last minute."""
from __future__ import annotations

import datetime
import json
import time

import ray

from gapfuzz.results.folder import Folder

EVERY_S = 60.0


class SessionStats:
    def __init__(self, folder: Folder):
        self.folder, self.name = folder, f"session-{time.strftime('%Y%m%dT%H%M%S')}.json"
        self.data: dict = {"builds": [], "workers": [], "write_s": 0.0, "lost": 0, "rebuilt": 0,
                           "started": datetime.datetime.now(datetime.timezone.utc).isoformat()}
        self.t0 = time.monotonic()
        self.workers: dict[str, dict] = {}
        self.pending: dict = {}  # stats ObjectRef -> actor, answered after the actor's queued runs
        self.written = 0.0

    def __getitem__(self, key):
        return self.data[key]

    def __setitem__(self, key, value):
        self.data[key] = value

    def poll(self, actors) -> None:
        """Collect answered worker stats, ask again, and rewrite the file, at most once a minute."""
        if self.pending:
            done, _ = ray.wait(list(self.pending), num_returns=len(self.pending), timeout=0)
            for ref in done:
                self._take(ref)
        if time.monotonic() - self.written < EVERY_S:
            return
        asked = set(self.pending.values())
        for a in actors:
            if a not in asked:
                self.pending[a.stats.remote()] = a
        self.write()

    def finish(self, actors, timeout: float = 10.0) -> None:
        """Last figures from every worker that answers within ``timeout`` (one busy in a run keeps
        its last answer)."""
        for a in actors:
            self.pending[a.stats.remote()] = a
        if self.pending:
            done, _ = ray.wait(list(self.pending), num_returns=len(self.pending), timeout=timeout)
            for ref in done:
                self._take(ref)
        self.write()

    def _take(self, ref) -> None:
        actor = self.pending.pop(ref)
        try:
            self.workers[str(actor)] = ray.get(ref)
        except ray.exceptions.RayError:  # the worker died; its last answer stays
            pass

    def write(self) -> None:
        self.data["wall_s"] = time.monotonic() - self.t0
        self.data["workers"] = list(self.workers.values())
        self.folder.write_bytes(json.dumps(self.data, indent=1, default=str).encode(), "stats", self.name)  # whole
        self.written = time.monotonic()

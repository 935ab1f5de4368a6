"""How long a campaign will take, for ``gapfuzz run --check``: its pairs timed by the campaigns before it.

A campaign remembers, as it finishes, the mean worker time of a (variant, backend) pair per backend, mode
and seed (``timings.json`` in the cache folder: numbers read as data, never code). An estimate sums that
time over the planned pairs: a seed's own time where one was measured, else the mean of its backend and
mode over seeds of its kind (an operator seed costs a fraction of a model), else a guess (``GUESS_S``);
shared among the pool's workers, after the start (Ray and the workers).
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

from gapfuzz.core.files import cache_dir
from gapfuzz.core.ids import SeedId

TIMINGS = "timings.json"
MAX_KEYS = 200_000  # a timings file past this many keys is not read (a campaign of every seed has tens of thousands)
# a pair on a backend no campaign here timed (the default campaign's on two cores): eager runs, a converter
# exports and loads, a compiler compiles
GUESS_S = {("eager", "op"): 0.3, ("eager", "model"): 1.5, ("other", "op"): 2.0, ("other", "model"): 10.0}
START_S = 20.0  # Ray and warm workers on two cores (a session's start_s)


def kind(seed_id: str) -> str:
    return "op" if SeedId.parse(seed_id).source == "ops" else "model"


def _key(backend: str, mode: str, seed: str) -> str:
    return f"{backend}|{mode}|{seed}"


def read_timings(folder: Path | None = None) -> dict[str, tuple[float, int]]:
    """``backend|mode|seed`` -> (mean seconds a pair, pairs measured); {} when nothing usable is there."""
    path = (folder or cache_dir()) / TIMINGS
    try:
        data = json.loads(path.read_text()) if path.is_file() and path.stat().st_size < 64 << 20 else {}
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or len(data) > MAX_KEYS:
        return {}
    return {k: (float(v[0]), int(v[1])) for k, v in data.items() if isinstance(k, str) and isinstance(v, list)
            and len(v) == 2 and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v)
            and math.isfinite(v[0]) and v[0] >= 0 and v[1] >= 1}


def remember(table, folder: Path | None = None) -> None:
    """Keep the mean pair time of each backend, mode and seed of ``table`` (records: ``variant_id``,
    ``backend``, ``seed_id``, ``mode``, ``worker_s``), over what an earlier campaign measured
    of the same. A cache folder that cannot be written costs the next estimate, nothing else."""
    folder = folder or cache_dir()
    pairs = table.group_by(["variant_id", "backend", "seed_id", "mode"]).aggregate([("worker_s", "sum")])
    sums: dict[str, list] = {}
    for seed, backend, mode, seconds in zip(*(pairs[c].to_pylist() for c in ("seed_id", "backend", "mode",
                                                                              "worker_s_sum"))):
        if seed and backend and mode and seconds is not None and math.isfinite(seconds):
            got = sums.setdefault(_key(backend, mode, seed), [0.0, 0])
            got[0], got[1] = got[0] + seconds, got[1] + 1
    if not sums:
        return
    timings = read_timings(folder)
    timings.update({k: (s / n, n) for k, (s, n) in sums.items()})
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".{TIMINGS}.{os.getpid()}"
        tmp.write_text(json.dumps({k: [round(s, 3), n] for k, (s, n) in timings.items()}))
        tmp.replace(folder / TIMINGS)
    except OSError:
        pass


@dataclass
class Estimate:
    seconds: float
    pairs: int
    timed: int  # pairs of a seed timed on its backend
    like: int  # pairs priced by their backend's other seeds of the same kind
    guessed: int  # pairs of a backend never timed here

    def line(self, workers: int | str) -> str:
        """``estimated wall time: about 4 min ...``: the figure and what it rests on."""
        workers = f"{workers_here(workers)} (auto: this machine's cores)" if workers == "auto" else workers
        rest = [f"{n} from {what}" for n, what in ((self.like, "other seeds on their backends"),
                                                  (self.guessed, "a guess: backends never timed here")) if n]
        basis = ", ".join([f"{self.timed} of {self.pairs} pairs timed by earlier campaigns", *rest])
        return f"estimated wall time: about {_duration(self.seconds)} on {workers} worker(s) ({basis})"


def workers_here(workers: int | str) -> int:
    """A pool's workers on this machine: ``auto`` is one per core (a cluster's count is not known here)."""
    return workers if isinstance(workers, int) else max(1, os.cpu_count() or 1)


def estimate(planned: dict[tuple[str, str, str], int], workers: int | str, timings: dict | None = None) -> Estimate:
    """The wall time of ``planned``: (backend, mode, seed) -> pairs to run, on ``workers`` (or ``auto``)."""
    timings = read_timings() if timings is None else timings
    like: dict[tuple[str, str, str], list] = {}
    for k, (mean, n) in timings.items():
        backend, mode, seed = (k.split("|", 2) + ["", ""])[:3]
        got = like.setdefault((backend, mode, kind(seed)), [0.0, 0])
        got[0], got[1] = got[0] + mean * n, got[1] + n
    total, counts = 0.0, {"timed": 0, "like": 0, "guessed": 0}
    for (backend, mode, seed), n in planned.items():
        own, near = timings.get(_key(backend, mode, seed)), like.get((backend, mode, kind(seed)))
        if own:
            total, counts["timed"] = total + own[0] * n, counts["timed"] + n
        elif near:
            total, counts["like"] = total + near[0] / near[1] * n, counts["like"] + n
        else:
            family = "eager" if backend.startswith("eager") else "other"
            total, counts["guessed"] = total + GUESS_S[(family, kind(seed))] * n, counts["guessed"] + n
    pairs = sum(planned.values())
    return Estimate(START_S + total / workers_here(workers) if pairs else 0.0, pairs, **counts)


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"

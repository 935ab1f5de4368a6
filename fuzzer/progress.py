"""One status line for long work: rewritten in place on a terminal, printed periodically otherwise."""
from __future__ import annotations

import sys
import time
from collections import Counter


class Progress:
    def __init__(self, total_runs: int, seeds: int, stream=None, every_s: float = 10.0, enabled: bool = True):
        self.stream = stream or sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.total_runs, self.seeds = total_runs, seeds
        self.seeds_done = 0
        self.variants_done = 0
        self.status: Counter = Counter()
        self.t0 = time.monotonic()
        self.last = 0.0
        self.every_s = every_s
        self.enabled = enabled

    def line(self) -> str:
        el = int(time.monotonic() - self.t0)
        runs = sum(self.status.values())
        rate = runs / max(1e-9, time.monotonic() - self.t0) * 60
        shown = " ".join(f"{k} {v}" for k, v in sorted(self.status.items()))
        return (f"[{el // 60:02d}:{el % 60:02d}] seeds {self.seeds_done}/{self.seeds}  variants {self.variants_done}"
                f"  runs {runs}/{self.total_runs} ({rate:.0f}/min)  {shown}")

    def update(self, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if self.tty:
            if force or now - self.last > 0.2:
                self.stream.write("\r" + self.line()[:160].ljust(100))
                self.stream.flush()
                self.last = now
        elif force or now - self.last > self.every_s:
            self.stream.write(self.line() + "\n")
            self.stream.flush()
            self.last = now

    def close(self) -> None:
        if self.enabled:
            self.update(force=True)
            if self.tty:
                self.stream.write("\n")

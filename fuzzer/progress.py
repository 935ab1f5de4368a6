"""One status line for long work: rewritten in place on a terminal, printed periodically otherwise."""
from __future__ import annotations

import sys
import time
from collections import Counter


class Progress:
    def __init__(self, total: int, unit: str = "runs", stream=None, every_s: float = 10.0, enabled: bool = True):
        self.stream = stream or sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.total, self.unit = total, unit
        self.status: Counter = Counter()  # what finished, by status
        self.context = ""  # e.g. "seeds 2/3  variants 5"
        self.t0 = time.monotonic()
        self.last = 0.0
        self.every_s = every_s
        self.enabled = enabled

    @property
    def done(self) -> int:
        return sum(self.status.values())

    def line(self) -> str:
        el = int(time.monotonic() - self.t0)
        rate = self.done / max(1e-9, time.monotonic() - self.t0) * 60
        shown = " ".join(f"{k} {v}" for k, v in sorted(self.status.items()))
        ctx = f"{self.context}  " if self.context else ""
        return f"[{el // 60:02d}:{el % 60:02d}] {ctx}{self.unit} {self.done}/{self.total} ({rate:.0f}/min)  {shown}"

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

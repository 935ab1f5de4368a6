"""Progress of long work (a campaign, a seed scan): a campaign runs for hours, and whoever watches it wants
to know how far it is, how fast it goes, when it ends and what it has found so far, per status and per
backend. On a terminal that is a rich live display, redrawn in place a few times a second; in a log (CI, a
file) it is a plain ASCII line every ``every_s`` seconds and at the end, with no escape codes or carriage
returns to garble it; with ``--quiet`` (``enabled=False``) it is nothing at all. While a CUDA pool runs, the
GPU's utilisation stands beside the rate: a slow rate beside an idle GPU says the workers are short, not the GPU.
While pairs run, the oldest of them is named with its stage and age: a campaign that stalls says on what."""
from __future__ import annotations

import sys
import time
from collections import Counter

from gapfuzz.core.text import printable

REFRESH_S = 0.25  # the live display is redrawn at most 4 times a second
GPU_EVERY_S = 5.0  # the GPU's utilisation is read at most this often (nvidia-smi takes ~50 ms)


def clock(s: float) -> str:
    """``3:20`` below an hour, ``1:03:20`` above."""
    s = int(max(0, s))
    h, m = divmod(s // 60, 60)
    return f"{h}:{m:02d}:{s % 60:02d}" if h else f"{m}:{s % 60:02d}"


def oldest(running: list[dict]) -> str:
    """``oldest: timm/test_vit#3 on inductor@cpu, bisecting, 412 s``: of what the workers are doing (each a
    ``workers.run.budget.PairClock.now``: variant, backend or None while judging them all, stage, age_s),
    the pair in flight longest; "" when none is."""
    if not running:
        return ""
    d = max(running, key=lambda d: d["age_s"])
    on = f" on {d['backend']}" if d.get("backend") else ""
    return f"oldest: {d['variant']}{on}, {d['stage']}, {d['age_s']:.0f} s"


class Progress:
    def __init__(self, total: int, unit: str = "runs", stream=None, every_s: float = 10.0, enabled: bool = True):
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", None) and self.stream.isatty())
        self.total, self.unit = total, unit
        self.status: Counter = Counter()  # what finished, by status
        self.backend: Counter = Counter()  # what finished, by backend name
        self.context = ""  # e.g. "seeds 2/3  variants 5"
        self.t0 = time.monotonic()
        self.last = float("-inf")
        self.every_s = every_s
        self.enabled = enabled
        self._live = None  # started by the first update on a terminal, stopped by close
        self._closed = False
        self._shown = None  # what the last plain line showed
        self.gpu_reader = None  # () -> each GPU's utilisation in percent; set while a CUDA pool runs
        self._gpu: tuple[float, list] = (float("-inf"), [])  # when last read, and what
        self.running: list[dict] = []  # what the busy workers are doing (``oldest``), set by the job loop

    @property
    def done(self) -> int:
        return sum(self.status.values())

    def count(self, status: str, backend: str | None = None, n: int = 1) -> None:
        self.status[status] += n
        if backend is not None:
            self.backend[backend] += n

    def _numbers(self) -> tuple[float, float, str]:
        """Seconds elapsed, finished per minute, and the time left as text."""
        el = time.monotonic() - self.t0
        rate = self.done / max(1e-9, el) * 60
        known = self.done > 0 and self.total > 0
        return el, rate, clock(max(0, self.total - self.done) / rate * 60) if known else "-"

    def gpu(self) -> str:
        """``gpu 87%`` (a figure per GPU), read at most every GPU_EVERY_S; "" without a reader. A reader that
        fails or has nothing to say is not asked again: the display never fails or slows the run."""
        now = time.monotonic()
        if self.gpu_reader is not None and now - self._gpu[0] >= GPU_EVERY_S:
            try:
                got = [float(u) for u in self.gpu_reader()]
            except Exception:  # noqa: BLE001 - a reading is a nicety
                got = []
            if not got:
                self.gpu_reader = None
            self._gpu = (now, got)
        return f"gpu {' '.join(f'{u:.0f}%' for u in self._gpu[1])}" if self._gpu[1] else ""

    def counts(self) -> str:
        """``ok 40 mismatch 3 | inductor@cpu 15 onnxruntime@cpu 14``"""
        parts = [" ".join(f"{k} {v}" for k, v in sorted(c.items()) if v) for c in (self.status, self.backend)]
        return " | ".join(p for p in parts if p)

    def line(self) -> str:
        el, rate, eta = self._numbers()
        ctx = f"{self.context}  " if self.context else ""
        gpu = f", {g}" if (g := self.gpu()) else ""
        running = f"  {o}" if (o := oldest(self.running)) else ""
        return f"[{clock(el)}] {ctx}{self.unit} {self.done}/{self.total} ({rate:.0f}/min{gpu})  eta {eta}  " \
               f"{self.counts()}{running}"

    def _safe(self, text: str) -> str:
        """What the stream's encoding can write (an ascii log gets ``?`` for anything else), control characters
        (a backend's or a pair's name from a record, or a plug-in's) shown as escapes, never obeyed."""
        enc = getattr(self.stream, "encoding", None) or "utf-8"
        return printable(text, newlines=False).encode(enc, "replace").decode(enc)

    def __rich__(self):  # what the live display shows, built anew at each refresh
        from rich.console import Group
        from rich.progress_bar import ProgressBar
        from rich.table import Table
        from rich.text import Text
        el, rate, eta = self._numbers()
        row = Table.grid(padding=(0, 2))
        row.add_row(ProgressBar(max(self.total, self.done) or None, self.done, width=24),
                    f"{self.unit} {self.done}/{self.total}  {rate:.0f}/min  {g + '  ' if (g := self.gpu()) else ''}"
                    f"eta {eta}  [{clock(el)}]")
        below = "  ".join(p for p in (self.context, self.counts(), oldest(self.running)) if p)
        # "fold", never "ellipsis": an ascii terminal cannot write the ellipsis
        return Group(row, Text(self._safe(below), overflow="fold")) if below else row

    def _start(self) -> None:
        from rich.console import Console
        from rich.live import Live
        console = Console(file=self.stream, force_terminal=True, highlight=False)
        # refreshed by update, not by a thread of rich's own: the counters change only there
        self._live = Live(self, console=console, auto_refresh=False, transient=False)
        self._live.start()
        self.last = float("-inf")

    def update(self, force: bool = False) -> None:
        if not self.enabled:
            return
        self._closed = False
        now = time.monotonic()
        if self.tty:
            if self._live is None:
                self._start()
            if force or now - self.last >= REFRESH_S:
                self._live.refresh()
                self.last = now
        elif force or now - self.last >= self.every_s:
            self.stream.write(self._safe(self.line()) + "\n")
            self.stream.flush()
            self.last, self._shown = now, self._state()

    def _state(self) -> tuple:
        return self.done, self.total, self.context, sorted(self.status.items()), sorted(self.backend.items())

    def close(self) -> None:
        if not self.enabled or self._closed:
            return
        if self.tty:
            if self._live is None:
                self._start()
            self._live.stop()  # draws the final state, and leaves it on the screen
            self._live = None
        elif self._shown != self._state():  # a log needs no repeat of its last line
            self.update(force=True)
        self._closed = True

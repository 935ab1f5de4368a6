"""A warm executor process, watched for crashes, hangs and memory, replaced after each fault.

Fork-based isolation breaks with CUDA; this starts a fresh interpreter
(``python -m gapfuzz.workers.run.executor``) and talks to it over two pipes, so the same code
isolates CPU and accelerator stacks alike, inside a Ray actor or alone. Messages are
pickles with out-of-band buffers (``workers.run.pipe``), tensors by value: torch's shared-memory
reductions would tie the reply's lifetime to a process that may be about to be killed.
"""
from __future__ import annotations

import atexit
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection

from gapfuzz.core.bugs import Status
from gapfuzz.workers.run import pipe

REPLY, RAISED = "reply", "raised"  # the tags of the executor's answers
# Every executor process started and not yet reaped. Each runs in a session of its own (a Ctrl-C at the terminal
# reaches this process alone, which decides), so nothing ends it with this one: ``_end_executors`` does at exit.
_STARTED: set[subprocess.Popen] = set()


def _kill(proc: subprocess.Popen) -> None:
    """``proc`` and its process group (the stack's own children: compile workers, a forked helper), then reaped."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            proc.kill()
    proc.wait()
    _STARTED.discard(proc)


@atexit.register
def _end_executors() -> None:
    """The executors of sandboxes nobody closed (an exception, Ctrl-C or SIGTERM went past their ``finally``, or
    none had one): killed when this process ends, never left running orphaned."""
    for proc in list(_STARTED):
        try:
            _kill(proc)
        except Exception:  # noqa: BLE001 - on the way out, the next one still goes
            pass


@dataclass
class Fault:
    """A request that ended without a reply: the process died or was killed for a limit."""

    status: Status  # crash, timeout or oom
    cause: str  # "signal:SIGSEGV", "limit:timeout 60s", "limit:memory 4.0GiB", "exit 1"
    message: str  # the tail of what the process printed


class RemoteError(Exception):
    """The executor raised for a request that is not a backend run (a fuzzer-side bug)."""

    def __init__(self, info: dict):
        super().__init__(f"{info['error_type']}: {info['message']}\n{info.get('traceback', '')}")
        self.info = info


def signal_name(returncode: int | None) -> str:
    if returncode is None:
        return "running"
    if returncode < 0:
        try:
            return signal.Signals(-returncode).name
        except ValueError:
            return f"signal {-returncode}"
    return f"exit {returncode}"


def rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


class Sandbox:
    def __init__(self, threads: int = 1, memory_limit_gb: float | None = None, env: dict | None = None,
                 poll_s: float = 0.02, startup_timeout_s: float = 300.0, keep_spare: bool = True,
                 python: str | None = None):
        self.python = python or sys.executable  # a release's environment's interpreter (workers.run.releases)
        self.startup_timeout_s = startup_timeout_s
        self.keep_spare = keep_spare
        self.spare: tuple | None = None
        self.threads = threads
        self.memory_limit = int(memory_limit_gb * 2**30) if memory_limit_gb else None
        self.env = env or {}
        self.poll_s = poll_s
        self.proc: subprocess.Popen | None = None
        self.starts = 0
        self.log = tempfile.NamedTemporaryFile(prefix="gapfuzz-executor-", suffix=".log", delete=False)

    # -- lifecycle
    def _spawn(self) -> tuple:
        p2c_r, p2c_w = os.pipe()
        c2p_r, c2p_w = os.pipe()
        env = {**os.environ, "GAPFUZZ_THREADS": str(self.threads), "OMP_NUM_THREADS": str(self.threads),
               "TORCHINDUCTOR_COMPILE_THREADS": "1", "PYTHONUNBUFFERED": "1", **self.env}
        proc = subprocess.Popen(
            [self.python, "-m", "gapfuzz.workers.run.executor", str(p2c_r), str(c2p_w)],
            pass_fds=(p2c_r, c2p_w), stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT,
            env=env, start_new_session=True)
        _STARTED.add(proc)
        os.close(p2c_r)
        os.close(c2p_w)
        return proc, Connection(p2c_w, readable=False), Connection(c2p_r, writable=False)

    def start(self) -> None:
        """Adopt the warm spare process (or start one) and wait until it has imported torch. From the
        first replacement on, start the next spare in the background, so that a stack that keeps
        crashing costs no import time per crash; one that never crashes costs no spare."""
        if self.alive():
            return
        if self.spare is None or self.spare[0].poll() is not None:
            self.spare = self._spawn()
        self.proc, self.outbox, self.inbox = self.spare
        self.spare = None
        self.starts += 1
        deadline = time.monotonic() + self.startup_timeout_s
        while not self.inbox.poll(0.05):  # the interpreter imports torch before it says it is ready
            if self.proc.poll() is not None or time.monotonic() > deadline:
                tail = self._log_tail(0)
                self.stop()
                raise RuntimeError(f"executor process did not start: {tail[-500:]}")
        pipe.recv(self.inbox)
        if self.keep_spare and self.starts > 1:
            self.spare = self._spawn()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        if self.proc is None:
            return
        _kill(self.proc)
        for conn in (getattr(self, "outbox", None), getattr(self, "inbox", None)):
            if conn is not None:
                conn.close()
        self.proc = None

    def _log_tail(self, since: int, limit: int = 3000, start_at: str | None = None) -> str:
        """What the process printed since ``since``: its last ``limit`` characters or, when it printed
        ``start_at`` (in its last MiB), ``limit`` characters from the last time it did."""
        try:
            with open(self.log.name, "rb") as f:
                f.seek(max(since, os.path.getsize(self.log.name) - (1 << 20)))
                text = f.read().decode(errors="replace")
        except OSError:
            return ""
        at = text.rfind(start_at) if start_at else -1
        return (text[at:at + limit] if at >= 0 else text[-limit:]).strip()

    # -- requests
    def request(self, method, *args, timeout: float | None = None, **kwargs):
        """``method`` (an ``Executor`` method) run in the executor process: its reply value, a
        :class:`Fault`, or :class:`RemoteError` for a non-run failure."""
        self.start()
        since = os.path.getsize(self.log.name)
        spilled = None
        try:
            try:
                spilled = pipe.send(self.outbox, (method, args, kwargs))
            except (BrokenPipeError, OSError):
                return self._fault(since, None)
            return self._await(since, timeout)
        finally:
            pipe.discard(spilled)  # the executor removes it once mapped; not if it died first

    def _await(self, since: int, timeout: float | None):
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if self.inbox.poll(self.poll_s):
                try:
                    tag, value = pipe.recv(self.inbox)
                except (EOFError, OSError):
                    return self._fault(since, None)
                except Exception as e:
                    raise RemoteError({"error_type": "ReplyDecodeError", "message": f"{type(e).__name__}: {e}",
                                       "traceback": ""}) from e
                if tag == RAISED:
                    raise RemoteError(value)
                return value
            if self.proc.poll() is not None:
                return self._fault(since, None)
            if deadline is not None and time.monotonic() > deadline:
                return self._fault(since, (Status.TIMEOUT, f"limit:timeout {timeout:g}s"))
            if self.memory_limit and rss_bytes(self.proc.pid) > self.memory_limit:
                return self._fault(since, (Status.OOM, f"limit:memory {self.memory_limit / 2**30:.1f}GiB"))

    def _fault(self, since: int, killed: tuple | None) -> Fault:
        if killed is None:
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            rc = self.proc.returncode
            cause = f"signal:{signal_name(rc)}" if rc is not None and rc < 0 else signal_name(rc)
            status = Status.CRASH
        else:
            status, cause = killed
        self.stop()
        # the executor's faulthandler names the Python frames a crash died in: that, not whatever
        # warning was printed before it, is the message (and so the cluster signature), however long
        # the list of extension modules it prints after it
        return Fault(status, cause, self._log_tail(since, start_at="Fatal Python error"))

    def close(self) -> None:
        self.stop()
        if self.spare is not None:
            proc, outbox, inbox = self.spare
            _kill(proc)
            outbox.close()
            inbox.close()
            self.spare = None
        try:
            os.unlink(self.log.name)
        except OSError:
            pass

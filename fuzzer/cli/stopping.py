"""How a command ends when the user stops it: Ctrl-C (SIGINT) or SIGTERM, one line, exit status 130 or 143.

SIGTERM is raised in the main thread as Ctrl-C raises KeyboardInterrupt, so every ``finally`` on the way out
runs; once the command has ended, Ray (if this process started it) and every process it made are ended too.
"""
from __future__ import annotations

import os
import signal
import sys
import threading

EXIT_INTERRUPTED, EXIT_TERMINATED = 130, 143  # and one that Ctrl-C (SIGINT) or SIGTERM stopped


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread as Ctrl-C raises KeyboardInterrupt (``main`` installs the handler):
    every ``finally`` on the way out runs (a sandbox's executor is killed, a file closed), no ``except Exception``
    takes it for an error, and code that stops cleanly on Ctrl-C does on it too (Ray's waits, for one, turn any
    other exception raised inside them into a SystemError; they raise a KeyboardInterrupt of their own instead,
    so ``_terminated`` remembers the signal)."""


_terminated = False  # SIGTERM arrived during this command


def stop_status(e: BaseException) -> int | None:
    """130 or 143 for an exception that means the user stopped the command (Ctrl-C or SIGTERM), else None."""
    if isinstance(e, KeyboardInterrupt):
        return EXIT_TERMINATED if isinstance(e, Terminated) or _terminated else EXIT_INTERRUPTED
    return None


def _raise_terminated(signum, frame):
    global _terminated
    _terminated = True
    raise Terminated


class sigterm_raises:
    """SIGTERM raises ``Terminated`` in the main thread while a command runs (Python's default would end the
    process at once: no ``finally``, a sandbox's executor left running), as SIGINT raises KeyboardInterrupt."""

    def __enter__(self):
        global _terminated
        _terminated = False
        self.main = threading.current_thread() is threading.main_thread()
        if self.main:
            self.previous = signal.getsignal(signal.SIGTERM)
            signal.signal(signal.SIGTERM, _raise_terminated)

    def __exit__(self, *exc):
        if self.main:
            signal.signal(signal.SIGTERM, self.previous if self.previous is not None else signal.SIG_DFL)
        return False


def end_children() -> None:
    """After Ctrl-C or SIGTERM, once every ``finally`` ran: Ray stopped if this process started it, then any
    process still left of this one's making killed: its descendants, the process group each leads (a sandbox's
    executor, a reproducer's run are each in a session of their own), and what was orphaned in this process's
    own group (a package installer's children). Linux only (``/proc``); elsewhere the ``finally`` blocks are all.
    A second Ctrl-C meanwhile is ignored: the command has ended, and a traceback would say it had not."""
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if main_thread else None
    try:
        _end_processes()
    finally:
        if main_thread:
            signal.signal(signal.SIGINT, previous if previous is not None else signal.default_int_handler)


def _end_processes() -> None:
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        try:
            ray.shutdown()
        except Exception:  # noqa: BLE001 - on the way out: what is left is killed below
            pass
    for pid, group in _left_behind():
        try:
            if group:
                os.killpg(pid, signal.SIGKILL)
            else:
                os.kill(pid, signal.SIGKILL)
        except OSError:  # gone already, or not ours to kill
            pass


def _left_behind() -> list[tuple[int, bool]]:
    """(pid, whether it leads a process group of its own) of every process to end: this one's descendants, and
    the members of the group this one leads whose parent is neither in it nor this one's parent (orphans; not
    a pipeline's other commands)."""
    me, parent, group = os.getpid(), os.getppid(), os.getpgrp()
    table = {}  # pid -> (parent, group)
    try:
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/stat") as f:
                        fields = f.read().rsplit(")", 1)[1].split()
                    table[int(entry)] = (int(fields[1]), int(fields[2]))
                except (OSError, IndexError, ValueError):
                    continue
    except OSError:
        return []
    out, todo = {}, [me]
    while todo:
        p = todo.pop()
        for pid, (pp, pg) in table.items():
            if pp == p and pid not in out:
                out[pid] = pg == pid and pg != group
                todo.append(pid)
    if group == me:
        out.update({pid: False for pid, (pp, pg) in table.items() if pg == me and pid != me and pid not in out
                    and pp != parent and table.get(pp, (0, 0))[1] != me})
    return list(out.items())

"""How a failure becomes a record: statuses, causes, and error descriptions.

Three kinds of error (as in NNSmith): an invalid mutation is rejected quietly by the
fuzzer; a fuzzer bug raises loudly; anything a backend does becomes a record.
"""
from __future__ import annotations

import re
import signal
import traceback

STATUSES = ("ok", "mismatch", "crash", "error", "timeout", "oom", "unsupported", "invalid")
STAGES = ("build", "budget", "capture", "mutate", "convert", "compile", "run", "compare")

_UNSUPPORTED = re.compile(
    r"not (?:yet )?(?:implemented|supported)|unsupported|no (?:kernel|implementation)|"
    r"could not run .* with arguments from the|not available for|is not implemented for", re.I)
_OOM = re.compile(r"out of memory|can't allocate memory|cannot allocate memory|bad_alloc|"
                  r"failed to allocate|std::bad_alloc", re.I)


def describe(exc: BaseException, limit: int = 2000) -> dict:
    """The parts of an exception a record keeps; the message is trimmed, not lost."""
    msg = str(exc).strip() or repr(exc)
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)[-6:])
    return {"error_type": f"{type(exc).__module__}.{type(exc).__qualname__}".removeprefix("builtins."),
            "message": msg[:limit], "traceback": tb[-limit:]}


def status_of_error(error_type: str, message: str) -> str:
    """error, unsupported or oom, from what a backend raised."""
    short = error_type.rsplit(".", 1)[-1]
    if short in ("OutOfMemoryError", "MemoryError") or _OOM.search(message or ""):
        return "oom"
    if short in ("NotImplementedError",) or _UNSUPPORTED.search(message or ""):
        return "unsupported"
    return "error"


def signal_name(returncode: int) -> str:
    if returncode is None:
        return "running"
    if returncode < 0:
        try:
            return signal.Signals(-returncode).name
        except ValueError:
            return f"signal {-returncode}"
    return f"exit {returncode}"

"""What a failure's record keeps: the exception's type, message and traceback, the status it means
(error, unsupported, out of memory) and its ``signature`` column.

Used wherever something raises on the way (a seed's build, a mutation, a backend's prepare or
run); what makes two failures the same bug is ``core.bugs``'s to say.
"""
from __future__ import annotations

import re
import traceback

from .bugs import MISSING, Status

_UNSUPPORTED = re.compile(
    r"not (?:yet )?(?:implemented|supported)|unsupported|no (?:kernel|implementation)|"
    r"could not run .* with arguments from the|not available for|is not implemented for", re.I)
_OOM = re.compile(r"out of memory|can't allocate memory|cannot allocate memory|bad_alloc|"
                  r"failed to allocate|std::bad_alloc", re.I)


def describe(exc: BaseException, limit: int = 2000) -> dict:
    """The parts of an exception a record keeps: error_type, message (trimmed, not lost), traceback."""
    msg = str(exc).strip() or repr(exc)
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)[-6:])
    return {"error_type": f"{type(exc).__module__}.{type(exc).__qualname__}".removeprefix("builtins."),
            "message": msg[:limit], "traceback": tb[-limit:]}


def status_of_error(error_type: str, message: str) -> Status:
    """error, unsupported or oom, from what a stack raised."""
    short = error_type.rsplit(".", 1)[-1]
    if short in ("OutOfMemoryError", "MemoryError") or _OOM.search(message or ""):
        return Status.OOM
    if short in ("NotImplementedError",) or _UNSUPPORTED.search(message or ""):
        return Status.UNSUPPORTED
    return Status.ERROR


def signature(stage: str | None, error_type: str | None, message: str | None) -> str:
    """The ``signature`` column of a failed record: stage, exception type, failing op and message template."""
    from .templates import failing_op, template

    return f"{stage or MISSING}|{error_type or MISSING}|{failing_op(message) or MISSING}|{template(message)}"

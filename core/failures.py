"""What a failure's record keeps: the exception's type, message and traceback, the status it means
(error, unsupported, out of memory) and its ``signature`` column; ``Failure`` is the one type
every failed build, scan and run is made of.

Used wherever something raises on the way (a seed's build, a mutation, a backend's prepare or
run); what makes two failures the same bug is ``core.bugs``'s to say. A failure whose cause is the
machine, not the stack (no C++ compiler, no Python headers, no OpenMP, a full disk: ``environment_cause``)
is the environment's: a ``skipped`` record naming the cause (``ENVIRONMENT``), never a vendor finding.
"""
from __future__ import annotations

import re
import traceback
from dataclasses import dataclass

from .bugs import MISSING, Stage, Status

_UNSUPPORTED = re.compile(
    r"not (?:yet )?(?:implemented|supported)|unsupported|no (?:kernel|implementation)|"
    r"could not run .* with arguments from the|not available for|is not implemented for", re.I)
_OOM = re.compile(r"out of memory|can't allocate memory|cannot allocate memory|bad_alloc|"
                  r"failed to allocate|std::bad_alloc", re.I)
UNSUPPORTED_ERRORS = ("NotImplementedError", "MissingOperator")  # a harness error that says a release lacks it
UNUSABLE = "UnusableHere"  # error_type of a pair skipped because its stack cannot run on its host (fuzzer.unusable)
ENVIRONMENT = "HostEnvironment"  # error_type of a pair whose stack failed for what its host lacks (environment_cause)
# What the host lacks, by what a compiler, linker or the OS says (gcc's and clang's wording, Inductor's own, errno 28).
_ENVIRONMENT = (
    ("no C++ compiler (install g++)", re.compile(
        r"InvalidCxxCompiler|No working C\+\+ compiler found|Failed to find C compiler|"
        r"(?:g\+\+|c\+\+|clang\+\+|gcc|cc|clang)['\"]?: (?:command )?not found|"
        r"No such file or directory: '[^']*(?:g\+\+|c\+\+|clang\+\+|gcc|clang)'")),
    ("no Python headers (install python3-dev)", re.compile(r"Python\.h: No such file or directory|"
                                                          r"'Python\.h' file not found")),
    ("no OpenMP (install libgomp, or libomp for clang)", re.compile(
        r"omp\.h: No such file or directory|'omp\.h' file not found|cannot find -l(?:g|i)?omp\b|"
        r"library not found for -l(?:g|i)?omp\b|unsupported option '-fopenmp'")),
    ("no space left on its disk", re.compile(r"No space left on device|\[Errno 28\]|Disk quota exceeded")),
)


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


def environment_cause(*texts: str | None) -> str | None:
    """What the host lacks, when a failure's text says it (its message, and its traceback's tail where the
    message was trimmed: a compiler's command line comes before its error); None for a stack's own failure."""
    text = "\n".join(t for t in texts if t)
    return next((why for why, pattern in _ENVIRONMENT if pattern.search(text)), None)


def signature(stage: str | None, error_type: str | None, message: str | None) -> str:
    """The ``signature`` column of a failed record: stage, exception type, failing op and message template."""
    from .templates import failing_op, template

    return f"{stage or MISSING}|{error_type or MISSING}|{failing_op(message) or MISSING}|{template(message)}"


@dataclass(frozen=True)
class Failure:
    """How something failed, as every record spells it: made here, from an exception, a sandbox fault
    (a process that died or hit a limit), an error a sandbox reported, or a worker lost with its node."""

    status: Status
    stage: Stage | None
    error_type: str | None
    message: str | None
    cause: str | None = None  # signal:SIGSEGV, limit:timeout 60s, limit:memory 4.0GiB

    @classmethod
    def from_exception(cls, exc: BaseException, stage: Stage | None, status: Status | None = None) -> Failure:
        d = describe(exc)
        return cls.of_environment(stage, d["error_type"], d["message"], str(exc)) or \
            cls(status or status_of_error(d["error_type"], d["message"]), stage, d["error_type"], d["message"])

    @classmethod
    def from_error(cls, error: dict, stage: Stage | None) -> Failure:
        """From ``describe``'s dict, as a sandbox sends it back: unsupported where it says what is missing (an
        operator a release lacks, ``core.ir.MissingOperator``), else an error."""
        short = str(error["error_type"]).rsplit(".", 1)[-1]
        return cls.of_environment(stage, error["error_type"], error["message"], error.get("traceback")) or \
            cls(Status.UNSUPPORTED if short in UNSUPPORTED_ERRORS else Status.ERROR, stage, error["error_type"],
                error["message"])

    @classmethod
    def of_environment(cls, stage: Stage | None, error_type: str | None, message: str | None,
                       *more: str | None) -> Failure | None:
        """The host's failure, when the text says what it lacks (``environment_cause``): skipped, with
        ``ENVIRONMENT`` as its type and the cause before what the stack raised (``error_type: message``)."""
        why = environment_cause(message, *more)
        if why is None:
            return None
        said = f"{error_type}: {message}" if error_type else message
        return cls(Status.SKIPPED, stage, ENVIRONMENT, f"the host, not the stack: {why}; {said}"[:2000])

    @classmethod
    def from_fault(cls, fault, stage: Stage | None) -> Failure:
        """From a ``workers.run.sandbox.Fault``: its error type is the signal or limit alone (``SIGSEGV``,
        ``timeout``)."""
        error_type = fault.cause.split(":")[-1].split()[0] if fault.cause else None
        return cls(fault.status, stage, error_type, fault.message, fault.cause)

    @classmethod
    def lost(cls, exc: BaseException, stage: Stage | None, again: bool = True) -> Failure:
        """A job whose worker went away: ``WorkerLost`` when it may be tried again, else what Ray raised."""
        return cls(Status.ERROR, stage, "WorkerLost" if again else type(exc).__name__, str(exc)[:2000])

    @property
    def signature(self) -> str:
        return signature(self.stage, self.error_type, self.message)

    def onto(self, record, sign: bool = False) -> None:
        """Set a record's failure columns (those it has: a catalog row keeps no cause), and its
        signature when ``sign``."""
        for name in ("status", "stage", "error_type", "message", "cause") + (("signature",) if sign else ()):
            if hasattr(record, name):
                setattr(record, name, getattr(self, name))

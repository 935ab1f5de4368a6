"""The backend contract: a small base class, the stage marker, and one adapter for other classes.

A built-in stack is a ``Backend`` whose run logic is one module-level function,
``prepare_fn(gm, example_inputs, device, options) -> (callable, info)``: ``prepare()`` calls it,
and a reproducer copies it, with what it calls, verbatim (``fuzzer.repro.source_copy``), so the two can
never drift apart. A third-party class needs only ``name`` and ``prepare`` (see docs/backends.md);
``adapt`` gives it the base's full interface once, when it is registered, so the pool reads
every backend the same way and never probes for attributes.

Options are data from a campaign file or a record, checked before anything runs: each value against
its option's type (``OptionType``), and an option that can name a program, a library, a path or compiler
flags (a compiler's ``cxx``, a hook) is refused unless the command line allows it (``allow_exec``):
a campaign or run folder from someone else must not run a program here.
"""
from __future__ import annotations

import importlib
import re
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable

from gapfuzz.core.bugs import Stage
from gapfuzz.core.registry import did_you_mean

DEVICES = ("cpu", "cuda", "mps", "xpu", "npu")
NO_DEFAULT = object()
INT64 = 2 ** 63  # an integer option past this reaches no compiler: a typo, or a number meant to break one
# the last word of an option's name that says its value names something run, loaded or written: a program,
# a library, a path, compiler flags or a hook (checked where a stack declares no type: a plug-in's options)
EXEC_WORDS = frozenset({"cxx", "cc", "compiler", "flag", "flags", "path", "dir", "cmd", "command", "hook", "hooks",
                        "callable", "pass", "fn", "func", "library", "lib", "libs", "exe", "executable", "binary",
                        "program", "script", "plugin", "home", "root", "file", "so"})
EXEC_ALLOWED_BY = "--allow-exec-options"


@dataclass(frozen=True)
class OptionType:
    """What one option takes: a value ``fits`` allows (``allowed`` says it in words, after "is not"), its
    ``default``, and whether a value ``runs``: names a program, a library, a path or compiler flags."""

    allowed: str
    fits: Callable[[Any], bool]
    default: Any = NO_DEFAULT
    runs: bool = False


def is_integer(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and -INT64 <= v < INT64


def typed(kind, default=NO_DEFAULT, runs: bool = False) -> OptionType:
    """An option of a Python type (bool, int, float, str; a tuple of them for either): a bool is not a number."""
    kinds = kind if isinstance(kind, tuple) else (kind,)
    words = {bool: "a boolean", int: "a 64-bit integer", float: "a number", str: "a string", type(None): "null"}

    def fits(v):
        return any(is_integer(v) if k is int else isinstance(v, (int, float)) and not isinstance(v, bool)
                   if k is float else isinstance(v, k) for k in kinds)
    return OptionType(" or ".join(words.get(k, k.__name__) for k in kinds), fits, default, runs)


def one_of(*values, default=NO_DEFAULT) -> OptionType:
    """An option that takes one of ``values`` (a bool is not 1)."""
    return OptionType(f"one of {', '.join(map(repr, values))}",
                      lambda v: any(v == x and type(v) is type(x) for x in values), default)


def counting(low: int = 1, high: int = 4096, default=NO_DEFAULT) -> OptionType:
    """An integer option from ``low`` to ``high`` (threads, a block size)."""
    return OptionType(f"an integer from {low} to {high}", lambda v: is_integer(v) and low <= v <= high, default)


def holds_text(value) -> bool:
    """Whether a value is or holds a string (what can name a program; a number or a boolean cannot)."""
    if isinstance(value, str):
        return True
    if isinstance(value, dict):
        return any(holds_text(k) or holds_text(v) for k, v in value.items())
    return isinstance(value, (list, tuple)) and any(holds_text(v) for v in value)


def names_a_program(key: str, value) -> bool:
    """By its name alone (an option of no declared type): ``cpp.cxx``, ``CACHE_DIR``, ``custom_ops_library``
    holding a string."""
    words = [w for w in re.split(r"[._\-]+", key.lower()) if w]
    return bool(words) and words[-1] in EXEC_WORDS and holds_text(value)


def shown(value, limit: int = 80) -> str:
    """A value as a message shows it: its repr, cut short."""
    try:
        text = repr(value)
    except ValueError:  # an integer of more digits than Python writes out
        return f"an integer of {value.bit_length()} bits"
    return text if len(text) <= limit else f"{text[:limit - 3]}..."


@contextmanager
def stage(name: Stage):
    """Code inside runs at stage ``name``: an exception raised there is recorded at it (the
    innermost stage wins)."""
    try:
        yield
    except BaseException as e:
        if getattr(e, "gapfuzz_stage", None) is None:
            try:
                e.gapfuzz_stage = name
            except AttributeError:  # an exception type that takes no attributes keeps the default
                pass
        raise


def stage_of(exc: BaseException, default: Stage) -> Stage:
    return Stage(getattr(exc, "gapfuzz_stage", None) or default)


def device_unavailable_reason(device: str) -> str | None:
    import torch

    if device == "cpu":
        return None
    if device == "cuda":
        return None if torch.cuda.is_available() else "no CUDA or ROCm device is visible to torch"
    if device == "mps":
        return None if torch.backends.mps.is_available() else "no Apple MPS device"
    if device == "xpu":
        return None if hasattr(torch, "xpu") and torch.xpu.is_available() else "no Intel XPU device"
    if device == "npu":
        if importlib.util.find_spec("torch_npu") is None:
            return "torch_npu is not installed"
        import torch_npu  # noqa: F401
        return None if torch.npu.is_available() else "no Ascend NPU device"
    return f"unknown device kind {device!r}"


def install_hint(module: str, device: str = "cpu") -> str:
    """How to install a stack's missing Python package: the extra of gapfuzz that holds it (``pip install
    'gapfuzz[onnxruntime]'``; on cuda, ``[cuda]`` where it holds the package's GPU build), read from gapfuzz's
    own metadata (pyproject.toml's extras, defined once there); ``pip install <distribution>`` for one no extra
    holds (a plug-in's, TensorRT's)."""
    import importlib.metadata as metadata
    import re

    wanted = module.replace("_", "-").lower()
    try:
        requires = metadata.requires("gapfuzz") or []
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        requires = []
    extras: dict[str, str] = {}  # extra -> the distribution of the package it lists
    for line in requires:
        found = re.match(r"\s*([A-Za-z0-9._-]+).*;.*extra\s*==\s*[\"']([\w-]+)[\"']", line)
        name = found[1].replace("_", "-").lower() if found else ""
        if found and found[2] != "all" and (name == wanted or name.startswith(wanted + "-")):
            extras.setdefault(found[2], name)
    ranked = sorted(extras, key=lambda e: (e != device, e in DEVICES, e != wanted, e))  # [cuda] for cuda alone
    return f"pip install 'gapfuzz[{ranked[0]}]'" if ranked else f"pip install {wanted}"


class Backend:
    """Base class of every backend, with the optional parts of the contract filled in."""

    name = ""
    devices: tuple = ("cpu",)
    module: str | None = None  # the Python package of the stack, for availability and version
    distribution: str | None = None  # what a package index calls its releases; None: ``module``'s name
    packages: tuple = ()  # other Python packages it needs
    input_device: str | None = None  # where inputs go when not on the device (host-array runtimes: "cpu")
    prepare_stage = Stage.COMPILE  # the stage of a prepare() failure outside any ``stage(...)`` block
    trains = False  # its prepared callable is differentiable by torch autograd: training runs (workers.run.training)
    capture_nodes = False  # runs op by op: tier 2 reads every node's value in one run
    # takes inputs of any strides without compiling again (False: compiles again for each; None: the example's only)
    any_strides: bool | None = True
    # True only for stacks that never write the graph, weights or inputs they are given (eager): they
    # share one deserialised variant; every other stack gets its own copy.
    leaves_variant_intact = False
    compile_error_modules: tuple = ()  # lazy compilers: these modules' errors on the first call are compile errors
    # Option sets that turn its optimisations off, each step more (name, options): a finding the
    # unoptimised stack does not show is its optimiser's (workers.judge.culprit). torch.compile stacks need
    # none: PyTorch's CompilerBisector attributes theirs.
    unoptimised: tuple = ()
    # A compiler of its own with named passes: it skips the ones its ``disabled_passes`` option lists,
    # and a finding is attributed to the one pass whose disabling removes it (workers.judge.attribution).
    passes: tuple = ()
    prepare_fn = None  # staticmethod(gm, example_inputs, device, options) -> (callable, info dict)
    # option -> what it takes (an OptionType, or a Python type); an option not here is checked by its name
    option_types: dict = {}
    plugin: type | None = None  # the third-party class an adapted backend wraps

    def __init__(self, **options):
        self.options = options
        self.info: dict = {}  # facts the stack reports after prepare, stored with the record

    @classmethod
    def unavailable_reason(cls, device: str) -> str | None:
        """Why this stack cannot run on ``device`` here; None when it can."""
        if device not in cls.devices:
            return f"{cls.name} does not run on {device}"
        for package in filter(None, (cls.module, *cls.packages)):
            if importlib.util.find_spec(package) is None:
                what = "not installed" if package == cls.module else f"python package {package!r} is not installed"
                return f"{what} ({install_hint(package, device)})"
        try:
            return cls.device_unavailable_reason(device)
        except ImportError as e:  # installed, but its import fails (a missing shared library, a broken build)
            return f"{cls.module or cls.name} cannot be imported: {' '.join(str(e).split())[:200]}"

    @classmethod
    def device_unavailable_reason(cls, device: str) -> str | None:
        """Why the device is not usable by this stack (torch's view of it, unless the stack knows better)."""
        return device_unavailable_reason(device)

    @classmethod
    def available(cls, device: str) -> bool:
        return cls.unavailable_reason(device) is None

    @classmethod
    def known_options(cls) -> list[str] | None:
        """The names of the options this stack takes; None when it takes any (a plug-in's own)."""
        return None

    @classmethod
    def option_type(cls, key: str) -> OptionType | None:
        """What option ``key`` takes; None when this stack does not say (checked by its name alone)."""
        kind = cls.option_types.get(key)
        return typed(kind) if isinstance(kind, (type, tuple)) else kind

    @classmethod
    def value_problem(cls, key: str, value, allow_exec: bool = False) -> str | None:
        """What is wrong with ``value`` for option ``key`` (one phrase, without the key), None when nothing is."""
        kind = cls.option_type(key)
        if (kind.runs if kind is not None else names_a_program(key, value)) and not allow_exec:
            return (f"{shown(value)} would name a program, a library, a path or compiler flags ({cls.name} option); "
                    f"gapfuzz passes such an option to a stack only with {EXEC_ALLOWED_BY}")
        if kind is not None and not kind.fits(value):
            default = "" if kind.default is NO_DEFAULT else f", default {kind.default!r}"
            return f"{shown(value)} is not {kind.allowed} ({cls.name} option{default})"
        return None

    @classmethod
    def check_options(cls, options: dict, allow_exec: bool = False) -> str | None:
        """What is wrong with ``options`` for this stack (one line), None when nothing is; the platform's
        (``workers.run.platform``: ``tf32``) every stack takes. ``allow_exec``: options that name a program
        may be given (the command line's ``--allow-exec-options``)."""
        from gapfuzz.workers.run.platform import backend_options, option_problem

        problem = option_problem(options)
        if problem:
            return problem
        known = cls.known_options()
        for key, value in backend_options(options).items():
            if known is not None and key not in known:
                return f"{cls.name} has no option {key!r}" + (did_you_mean(key, known) if known else
                                                             " (it takes none)")
            problem = cls.value_problem(key, value, allow_exec)
            if problem:
                return f"{key}: {problem}"
        return None

    @classmethod
    def release_distribution(cls) -> str | None:
        """The distribution whose releases a campaign's ``versions:`` names; None when it has none to choose."""
        return cls.distribution or cls.module

    @classmethod
    def version(cls) -> str:
        try:
            return importlib.import_module(cls.module or "torch").__version__
        except Exception:  # noqa: BLE001 - a version we cannot read is recorded as unknown
            return "unknown"

    def prepare(self, gm, example_inputs: tuple, device: str):
        """Compile or convert once; a callable(*inputs) -> outputs."""
        if type(self).prepare_fn is None:
            raise NotImplementedError(f"backend {self.name} has neither prepare_fn nor prepare()")
        run, self.info = type(self).prepare_fn(gm, example_inputs, device, self.options)
        return run


def adapt(cls: type) -> type[Backend]:
    """A ``Backend`` subclass wrapping a class that follows the contract without subclassing it."""
    if isinstance(cls, type) and issubclass(cls, Backend):
        return cls

    class Adapted(Backend):
        name = cls.name
        devices = tuple(getattr(cls, "devices", ("cpu",)))
        input_device = getattr(cls, "input_device", None)
        module = getattr(cls, "module", None)
        distribution = getattr(cls, "distribution", None)
        prepare_stage = Stage(getattr(cls, "prepare_stage", Stage.COMPILE))
        capture_nodes = bool(getattr(cls, "capture_nodes", False))
        any_strides = None if getattr(cls, "any_strides", True) is None else bool(getattr(cls, "any_strides", True))
        trains = bool(getattr(cls, "trains", False))
        leaves_variant_intact = bool(getattr(cls, "leaves_variant_intact", False))
        compile_error_modules = tuple(getattr(cls, "compile_error_modules", ()))
        unoptimised = tuple(getattr(cls, "unoptimised", ()))
        passes = tuple(getattr(cls, "passes", ()))
        option_types = dict(getattr(cls, "option_types", None) or {})
        plugin = cls

        def __init__(self, **options):
            super().__init__(**options)
            self.inner = cls(**options) if options else cls()

        @classmethod
        def unavailable_reason(cls_, device: str) -> str | None:
            if hasattr(cls, "unavailable_reason"):
                return cls.unavailable_reason(device)
            if hasattr(cls, "available"):
                return None if cls.available(device) else f"{cls.name}@{device} reports it is not available"
            return None if device in cls_.devices else f"{cls.name} does not run on {device}"

        @classmethod
        def version(cls_) -> str:
            return str(cls.version()) if hasattr(cls, "version") else "unknown"

        @classmethod
        def known_options(cls_) -> list[str] | None:
            return cls.known_options() if hasattr(cls, "known_options") else None

        def prepare(self, gm, example_inputs, device):
            try:
                return self.inner.prepare(gm, example_inputs, device)
            except Exception:
                if getattr(self.inner, "stage", None):  # the contract's way to say how far prepare got
                    with stage(Stage(self.inner.stage)):
                        raise
                raise
            finally:
                self.info = dict(getattr(self.inner, "info", None) or {})

    Adapted.__name__ = Adapted.__qualname__ = cls.__name__
    return Adapted

"""The backend contract: a small base class, the stage marker, and one adapter for other classes.

A built-in stack is a ``Backend`` whose run logic is one module-level function,
``prepare_fn(gm, example_inputs, device, options) -> (callable, info)``: ``prepare()`` calls it,
and a reproducer copies it, with what it calls, verbatim (``fuzzer.repro.source_copy``), so the two can
never drift apart. A third-party class needs only ``name`` and ``prepare`` (see docs/backends.md);
``adapt`` gives it the base's full interface once, when it is registered, so the pool reads
every backend the same way and never probes for attributes.
"""
from __future__ import annotations

import importlib
from contextlib import contextmanager

from gapfuzz.core.bugs import Stage
from gapfuzz.core.registry import did_you_mean

DEVICES = ("cpu", "cuda", "mps", "xpu", "npu")


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


class Backend:
    """Base class of every backend, with the optional parts of the contract filled in."""

    name = ""
    devices: tuple = ("cpu",)
    module: str | None = None  # the Python package of the stack, for availability and version
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
                return f"python package {package!r} is not installed (pip install {package})"
        return cls.device_unavailable_reason(device)

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
    def check_options(cls, options: dict) -> str | None:
        """What is wrong with ``options`` for this stack (one line), None when nothing is; the platform's
        (``workers.run.platform``: ``tf32``) every stack takes."""
        from gapfuzz.workers.run.platform import backend_options, option_problem

        problem = option_problem(options)
        if problem:
            return problem
        known = cls.known_options()
        for key in backend_options(options) if known is not None else ():
            if key not in known:
                return f"{cls.name} has no option {key!r}" + (did_you_mean(key, known) if known else
                                                             " (it takes none)")
        return None

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
        prepare_stage = Stage(getattr(cls, "prepare_stage", Stage.COMPILE))
        capture_nodes = bool(getattr(cls, "capture_nodes", False))
        any_strides = None if getattr(cls, "any_strides", True) is None else bool(getattr(cls, "any_strides", True))
        trains = bool(getattr(cls, "trains", False))
        leaves_variant_intact = bool(getattr(cls, "leaves_variant_intact", False))
        compile_error_modules = tuple(getattr(cls, "compile_error_modules", ()))
        unoptimised = tuple(getattr(cls, "unoptimised", ()))
        passes = tuple(getattr(cls, "passes", ()))
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

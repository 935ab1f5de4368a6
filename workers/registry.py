"""Backends: a table of stacks, each a small class, named ``stack@device`` in campaigns.

Built-in stacks register with ``@register_backend``; third-party stacks load from a
``module:Class`` path in the campaign file or from the ``gapfuzz.backends``
entry-point group, with no change to gapfuzz.
"""
from __future__ import annotations

import difflib
import fnmatch
import importlib
import logging
import os
from dataclasses import asdict, dataclass, field

log = logging.getLogger("gapfuzz.workers")

DEVICES = ("cpu", "cuda", "mps", "xpu", "npu")
_BUILTIN = ("eager", "inductor", "aot_inductor", "onnxruntime", "openvino", "tensorrt")
_BACKENDS: dict[str, type] = {}
_loaded = False


class BackendError(LookupError):
    """An unknown or malformed backend name (bad input: one clear line)."""


class Backend:
    """Base class with the optional parts of the contract filled in.

    Required: ``name``, ``devices``, ``prepare(gm, example_inputs, device)`` returning a
    callable. Optional: ``available``/``unavailable_reason`` (why it cannot run here),
    ``version()``, and ``info``: facts the stack reports after prepare (e.g. the
    inference precision it actually chose), stored with the record.
    """

    name = ""
    devices: tuple = ("cpu",)
    module: str | None = None  # the Python package the stack needs, for availability and version
    input_device: str | None = None  # where inputs go when not on the device (host-array runtimes: "cpu")
    prepare_stage = "compile"  # the stage of a prepare() failure; prepare may refine it via ``self.stage``
    # True only for stacks that never write the graph, weights or inputs they are given (eager): they
    # share one deserialised variant; every other stack gets its own copy.
    leaves_variant_intact = False
    # Stand-alone source of ``run_backend(model, inputs, device)`` for reproducers; it may read OPTIONS
    # (the backend's options) and ARG_NAMES (the model's input names). None: load this class by path.
    repro: str | None = None

    def __init__(self, **options):
        self.options = options
        self.info: dict = {}

    @classmethod
    def unavailable_reason(cls, device: str) -> str | None:
        if device not in cls.devices:
            return f"{cls.name} does not run on {device}"
        if cls.module and importlib.util.find_spec(cls.module) is None:
            return f"python package {cls.module!r} is not installed"
        return device_unavailable_reason(device)

    @classmethod
    def available(cls, device: str) -> bool:
        return cls.unavailable_reason(device) is None

    @classmethod
    def version(cls) -> str:
        mod = cls.module or "torch"
        try:
            return importlib.import_module(mod).__version__
        except Exception:  # noqa: BLE001 - a version we cannot read is recorded as unknown
            return "unknown"

    def prepare(self, gm, example_inputs: tuple, device: str):
        raise NotImplementedError


def device_unavailable_reason(device: str) -> str | None:
    import torch

    if device == "cpu":
        return None
    if device == "cuda":
        if not torch.cuda.is_available():
            return "no CUDA or ROCm device is visible to torch"
        return None
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


_plugins_imported = False


def import_plugins() -> None:
    """Import the modules named in GAPFUZZ_PLUGINS (comma-separated) once per process.

    A plug-in module registers seed sources, mutators or backends with the usual decorators;
    the variable reaches Ray workers and sandboxes, so no packaging is needed to try one."""
    global _plugins_imported
    if _plugins_imported:
        return
    _plugins_imported = True
    for name in filter(None, (m.strip() for m in os.environ.get("GAPFUZZ_PLUGINS", "").split(","))):
        importlib.import_module(name)


def register_backend(cls):
    if not cls.name:
        raise BackendError(f"backend class {cls.__qualname__} has no name")
    _BACKENDS[cls.name] = cls
    return cls


def _load() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    for mod in _BUILTIN:
        importlib.import_module(f"workers.backends.{mod}")
    import_plugins()
    from importlib.metadata import entry_points

    for ep in entry_points(group="gapfuzz.backends"):
        try:
            register_backend(ep.load())
        except Exception as e:  # noqa: BLE001 - a broken plug-in must not hide the others
            log.warning("backend entry point %s failed to load: %s", ep.name, e)


def load_class(path: str) -> type:
    """``package.module:ClassName`` to the class, registering it."""
    module, _, qual = path.partition(":")
    if not module or not qual:
        raise BackendError(f"backend class {path!r} is not of the form module:Class")
    try:
        obj = importlib.import_module(module)
        for part in qual.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as e:
        raise BackendError(f"backend class {path!r} cannot be loaded: {e}") from None
    for attr in ("name", "prepare"):
        if not getattr(obj, attr, None):
            raise BackendError(f"backend class {path!r} has no {attr!r}")
    return register_backend(obj) if obj.name not in _BACKENDS or _BACKENDS[obj.name] is not obj else obj


def backend_class(stack: str) -> type:
    _load()
    if stack not in _BACKENDS:
        hint = difflib.get_close_matches(stack, list(_BACKENDS), n=1)
        did = f"did you mean {hint[0]!r}? " if hint else ""
        raise BackendError(f"unknown backend stack {stack!r} ({did}known: {', '.join(sorted(_BACKENDS))})")
    return _BACKENDS[stack]


def list_backends(filter: str | None = None) -> list[str]:
    _load()
    names = [f"{n}@{d}" for n, cls in sorted(_BACKENDS.items()) for d in cls.devices]
    return [n for n in names if filter is None or fnmatch.fnmatchcase(n, filter)]


@dataclass
class BackendSpec:
    """A backend as a campaign names it: a stack on a device with options and a label."""

    stack: str
    device: str
    options: dict = field(default_factory=dict)
    label: str = ""  # the stack part of the record's backend name; defaults to the stack
    cls_path: str | None = None  # module:Class for a stack loaded from a path
    timeout_s: float | None = None  # this backend's limit per run; None: the campaign's

    @property
    def name(self) -> str:
        return f"{self.label or self.stack}@{self.device}"

    def to_dict(self) -> dict:
        return asdict(self)

    def backend_cls(self) -> type:
        return load_class(self.cls_path) if self.cls_path else backend_class(self.stack)

    def create(self):
        cls = self.backend_cls()
        obj = cls(**self.options) if self.options else cls()
        if not hasattr(obj, "info"):
            obj.info = {}
        return obj


def parse_backend(name: str, options: dict | None = None, label: str | None = None,
                  cls_path: str | None = None, timeout_s: float | None = None) -> BackendSpec:
    """``stack@device`` (or a ``module:Class`` path with a device) to a checked spec."""
    stack, sep, device = name.partition("@")
    if not sep or not stack or not device:
        raise BackendError(f"backend {name!r} is not of the form stack@device")
    if device not in DEVICES:
        raise BackendError(f"backend {name!r}: unknown device {device!r} (known: {', '.join(DEVICES)})")
    cls = load_class(cls_path) if cls_path else backend_class(stack)
    if cls_path:
        stack = cls.name
    if device not in tuple(getattr(cls, "devices", ("cpu",))):
        raise BackendError(f"backend {name!r}: stack {stack!r} does not run on {device}")
    return BackendSpec(stack, device, dict(options or {}), label or "", cls_path, timeout_s)


def unavailable_reason(spec: BackendSpec) -> str | None:
    cls = spec.backend_cls()
    if hasattr(cls, "unavailable_reason"):
        return cls.unavailable_reason(spec.device)
    return None if cls.available(spec.device) else f"{spec.name} reports it is not available"

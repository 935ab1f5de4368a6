"""Backends: a table of stacks, each a small class, named ``stack@device`` in campaigns.

Built-in stacks register with ``@register_backend``; third-party stacks load from a
``module:Class`` path in the campaign file or from the ``gapfuzz.backends`` entry-point group,
with no change to gapfuzz. Every class is adapted to ``Backend`` once, as it is registered.
"""
from __future__ import annotations

import logging
import random
from dataclasses import asdict, astuple, dataclass, field, replace

from gapfuzz.core.covering import DRAW, PAIRS, option_set
from gapfuzz.core.ids import BackendName, IdError
from gapfuzz.core.modes import DEFAULT_MODE, mode_of
from gapfuzz.core.registry import PluginError, Registry, import_module
from gapfuzz.workers.run.backend import DEVICES, Backend, adapt
from gapfuzz.workers.run.releases import Release

log = logging.getLogger("gapfuzz.workers")


POOL_MARK = "~"  # a release's pool: ``cpu~onnxruntime==1.31.1``


class BackendError(LookupError):
    """An unknown or malformed backend name (bad input: one clear line)."""


BACKENDS: Registry[Backend] = Registry(
    "backend stack", "gapfuzz.workers.backends",
    ("eager", "inductor", "aot_inductor", "onnxruntime", "openvino", "tensorrt"), "gapfuzz.backends", BackendError,
    adapt=adapt)
register_backend = BACKENDS.register


def load_class(path: str) -> type[Backend]:
    """``package.module:ClassName`` to the (adapted, registered) class."""
    module, _, qual = path.partition(":")
    if not module or not qual:
        raise BackendError(f"backend class {path!r} is not of the form module:Class")
    try:
        obj = import_module(module, f"backend class {path!r} cannot be loaded")
    except PluginError as e:
        raise BackendError(str(e)) from None
    try:
        for part in qual.split("."):
            obj = getattr(obj, part)
    except AttributeError as e:
        raise BackendError(f"backend class {path!r} cannot be loaded: {e}") from None
    for attr in ("name", "prepare"):
        if not getattr(obj, attr, None):
            raise BackendError(f"backend class {path!r} has no {attr!r}")
    return BACKENDS.add(obj)


def backend_class(stack: str) -> type[Backend]:
    return BACKENDS.get(stack)


def list_backends(filter: str | None = None) -> list[str]:
    import fnmatch

    names = [f"{n}@{d}" for n, cls in BACKENDS for d in cls.devices]
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
    modes: tuple = (DEFAULT_MODE,)  # core.modes names: the runs it gets (one that goes backward only if it trains)
    option_space: dict = field(default_factory=dict)  # option -> values: each variant gets one set (for_variant)
    option_cover: str | dict = PAIRS  # how: pairs, all or {all: [options]} (core.covering), or draw
    release: Release | None = None  # the releases it runs under (workers.run.releases); None: those installed
    image: str | None = None  # on a cluster, the container image that holds its release (Ray's image_uri)

    @property
    def name(self) -> str:
        return f"{self.label or self.stack}@{self.device}"

    @property
    def pool(self) -> str:
        """The pool that runs it: its device's, or one of its own for a release this interpreter has not."""
        if self.release is None or (self.release.installed_here and not self.image):
            return self.device
        return f"{self.device}{POOL_MARK}{'+'.join(self.release.requirements)}"

    def to_dict(self) -> dict:
        return asdict(self)

    def backend_cls(self) -> type[Backend]:
        return load_class(self.cls_path) if self.cls_path else backend_class(self.stack)

    def create(self) -> Backend:
        from gapfuzz.workers.run.platform import backend_options

        cls, options = self.backend_cls(), backend_options(self.options)  # the platform's are the executor's
        return cls(**options) if options else cls()

    def unavailable_reason(self) -> str | None:
        """Why it cannot run here; a release in an environment of its own is checked there, when it is made."""
        if self.pool != self.device:
            cls = self.backend_cls()
            return cls.device_unavailable_reason(self.device) if self.device in cls.devices else \
                f"{cls.name} does not run on {self.device}"
        return self.backend_cls().unavailable_reason(self.device)

    @property
    def line(self) -> str:
        """Its name without its release: what the releases of one stack share (``onnxruntime@cpu``)."""
        if self.release is None:
            return self.name
        suffix = "-" + self.release.tag(self.stack)
        return f"{(self.label or self.stack).removesuffix(suffix) or self.stack}@{self.device}"

    def for_variant(self, variant_id: str, campaign_seed: int, seed_id: str, index: int, mode: str) -> BackendSpec:
        """This backend with the option set its ``option_space`` gives variant ``index`` of ``seed_id`` in
        ``mode``: a row of a covering array (``core.covering``), or with ``option_cover: draw`` one random
        draw; the same on every run, resume and worker (a null value leaves the stack's default)."""
        if not self.option_space:
            return self
        if self.option_cover == DRAW:
            rng = random.Random(f"{campaign_seed}|{self.name}|{variant_id}")
            chosen = {k: rng.choice(list(values)) for k, values in sorted(self.option_space.items())}
        else:
            chosen = option_set(self.option_space, self.option_cover, f"{campaign_seed}|{self.name}", seed_id, index,
                                mode)
        return replace(self, options={**self.options, **{k: v for k, v in chosen.items() if v is not None}},
                       option_space={})

    def runs_in(self, mode: str) -> bool:
        """Whether a variant of ``mode`` gets a run of this backend: a stack that cannot train gets no
        training run (no record, no failure)."""
        return mode in self.modes and (not mode_of(mode).backward or self.backend_cls().trains)


def unavailable_in(python: str, spec: BackendSpec) -> str | None:
    """Why ``spec`` cannot run in the interpreter ``python`` (a release's environment); None when it can. Its
    class is named by data (a registered stack, a ``module:Class``), imported there as ``gapfuzz run`` would."""
    import subprocess

    check = ("import sys; from gapfuzz.workers.run.registry import parse_backend; "
             "s = parse_backend(sys.argv[1], cls_path=sys.argv[2] or None); s.release = None; "
             "print(s.unavailable_reason() or '')")
    done = subprocess.run([python, "-c", check, f"{spec.stack if not spec.cls_path else 'x'}@{spec.device}",
                           spec.cls_path or ""], capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        return " ".join((done.stderr.strip().splitlines() or ["it did not start"])[-1].split())[:240]
    return done.stdout.strip() or None


def parse_backend(name: str, options: dict | None = None, label: str | None = None,
                  cls_path: str | None = None, timeout_s: float | None = None) -> BackendSpec:
    """``stack@device`` (or a ``module:Class`` path with a device) to a checked spec."""
    try:
        stack, device = astuple(BackendName.parse(name))
    except IdError as e:
        raise BackendError(str(e)) from None
    if device not in DEVICES:
        raise BackendError(f"backend {name!r}: unknown device {device!r} (known: {', '.join(DEVICES)})")
    cls = load_class(cls_path) if cls_path else backend_class(stack)
    if cls_path:
        stack = cls.name
    if device not in cls.devices:
        raise BackendError(f"backend {name!r}: stack {stack!r} does not run on {device}")
    return BackendSpec(stack, device, dict(options or {}), label or "", cls_path, timeout_s)

"""One backend's run of one variant in the executor process, stage by stage.

A run creates the backend, places the variant's inputs where it takes them, prepares it, calls it
once, calls it again timed, then once per probe. Each stage is a method that maps what it raises
to its own stage (``StageFailed``), so a failure is recorded as itself and where it happened,
whichever stage it came in; what was measured up to then (the compiler's counters, symbolic sizes,
the time the failed prepare took) is recorded with it.
"""
from __future__ import annotations

import contextlib
import statistics
import time
from typing import Callable

from gapfuzz.core.bugs import Stage
from gapfuzz.core.failures import Failure
from gapfuzz.workers.backends.inductor import symbolic_sizes
from gapfuzz.workers.judge.culprit import inductor_counters
from gapfuzz.workers.run.backend import stage_of
from gapfuzz.workers.run.messages import Execution
from gapfuzz.workers.run.outcome import new_outcome
from gapfuzz.workers.run.platform import Precision
from gapfuzz.workers.run.probes import roles, run_probes
from gapfuzz.workers.run.training import Trainer, autograd_for


def synchronize(device: str) -> None:
    import torch

    mod = {"cuda": "cuda", "mps": "mps", "xpu": "xpu", "npu": "npu"}.get(device)
    if mod and hasattr(torch, mod):
        getattr(torch, mod).synchronize()


def to_host(out) -> list:
    """Flat outputs, detached on the CPU; non-tensor leaves kept as plain values."""
    import torch

    host = []
    for leaf in torch.utils._pytree.tree_leaves(out):
        if isinstance(leaf, torch.Tensor):
            host.append(leaf.detach().to("cpu", copy=True))
        elif leaf is None or isinstance(leaf, (bool, int, float, str)):
            host.append(leaf)
        else:
            host.append(repr(leaf))
    return host


def same_bits(a: list, b: list) -> bool:
    import torch

    from gapfuzz.core.ir import byte_view

    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
            if x.shape != y.shape or x.dtype != y.dtype:
                return False
            if x.numel() and not torch.equal(byte_view(x), byte_view(y)):
                return False
        elif x != y:
            return False
    return True


def _prepared(backend, variant, inputs: tuple, device: str):
    """The backend's callable on the variant: its forward, or for a mode that goes backward its training
    step (the parameters go where the inputs are). The name is ``fuzzer.unusable``'s mark of a crash
    while preparing."""
    if variant.mode.backward:
        return Trainer(variant.gm, backend.input_device or device).prepare(backend, inputs, device)
    return backend.prepare(variant.gm, inputs, device)


def first_call_stage(backend, exc: BaseException) -> Stage:
    """Lazy compilers (torch.compile) compile on the first call: their errors are compile errors."""
    origin = type(exc).__module__ or ""
    return Stage.COMPILE if any(origin.startswith(m) for m in backend.compile_error_modules) else Stage.RUN


class StageFailed(Exception):
    """``error``, raised in ``stage`` of a run."""

    def __init__(self, error: Exception, stage: Stage):
        super().__init__(f"{stage}: {type(error).__name__}: {error}")
        self.error, self.stage = error, stage


@contextlib.contextmanager
def failing_at(stage: Stage | Callable[[Exception], Stage]):
    """What is raised inside is ``stage``'s (or the stage ``stage(error)`` names); one already staged passes."""
    try:
        yield
    except StageFailed:
        raise
    except Exception as e:
        raise StageFailed(e, stage(e) if callable(stage) else stage) from e


class BackendRun:
    """One backend (a ``BackendSpec``) on one variant: its record, filled in stage by stage."""

    def __init__(self, spec, checksums: dict, variant_for: Callable):
        self.spec, self.variant_for = spec, variant_for  # variant_for(backend): the variant it may read
        self.precision = Precision.of(spec.options)
        self.result = new_outcome(spec, **checksums)
        self.result.tf32 = self.precision.tf32
        self.device = spec.device  # where the inputs went: what the executor cleans up after
        self.counted: dict = {}  # the compiler's counters (workers.judge.culprit.inductor_counters)
        self.sizes: dict = {}  # whether Dynamo traced a size as a symbol
        self.started: float | None = None  # when prepare began

    def execute(self, repeats: int, probes: tuple) -> Execution:
        """The run; a stage that raises ends it with a record of that error at that stage."""
        outputs, probe_runs = None, []
        try:
            backend = self.create()
            variant, inputs, calls = self.place(backend, repeats)
            with self.measured(backend, variant):
                fn = self.prepare(backend, variant, inputs)
                first = self.first_call(backend, fn, calls[0])
                last, times = self.timed_calls(fn, calls[1:], first)
                probe_runs = self.probe(fn, variant, inputs, probes)
            self.result.latency_ms = 1e3 * statistics.median(times) if times else None
            self.result.run_s, self.result.runs = sum(times), len(times)
            outputs = first
            self.check(backend, variant, calls[0], first, last)
        except StageFailed as f:
            if self.started is not None and self.result.prepare_s is None:
                self.result.prepare_s = time.perf_counter() - self.started  # the time the failed prepare took
            Failure.from_exception(f.error, f.stage).onto(self.result)
        finally:
            self._compiler_columns()
        return Execution(self.result, outputs, probe_runs)

    @failing_at(Stage.COMPILE)
    def create(self):
        return self.spec.create()

    def place(self, backend, repeats: int) -> tuple:
        """The variant, its inputs where the backend takes them, and a fresh copy of them per call."""
        from gapfuzz.core.ir import clone_exact

        with failing_at(backend.prepare_stage):
            variant = self.variant_for(backend)
            self.device = backend.input_device or self.device
            inputs = tuple(t.to(self.device) for t in variant.inputs)
            calls = [tuple(clone_exact(t) for t in inputs) for _ in range(repeats + 1)]
            if variant.mode.backward and not backend.trains:
                raise NotImplementedError(f"{self.spec.stack} does not train (its prepared callable is not "
                                          f"differentiable)")
        return variant, inputs, calls

    @contextlib.contextmanager
    def measured(self, backend, variant):
        """Around prepare and every call: autograd as the variant's mode wants it, the compiler's counters,
        symbolic sizes and the precision. Setting them up fails as preparing, taking them down as running."""
        with failing_at(Stage.RUN), contextlib.ExitStack() as around:
            with failing_at(backend.prepare_stage):
                for context in (autograd_for(variant), inductor_counters(self.counted), symbolic_sizes(self.sizes),
                                self.precision.applied()):
                    around.enter_context(context)
            yield

    def prepare(self, backend, variant, inputs: tuple):
        with failing_at(lambda e: stage_of(e, backend.prepare_stage)):
            self.started = time.perf_counter()
            return _prepared(backend, variant, inputs, self.spec.device)

    def first_call(self, backend, fn, args: tuple) -> list:
        t1 = time.perf_counter()
        with failing_at(lambda e: first_call_stage(backend, e)):
            first = to_host(fn(*args))
        with failing_at(Stage.RUN):
            synchronize(self.device)
        t2 = time.perf_counter()
        self.result.prepare_s, self.result.first_run_s = t2 - self.started, t2 - t1
        return first

    @failing_at(Stage.RUN)
    def timed_calls(self, fn, calls: list, first: list) -> tuple[list, list]:
        """The outputs of the last call (``first`` when there is none), and each call's time."""
        times, last = [], first
        for args in calls:
            t0 = time.perf_counter()
            out = fn(*args)
            synchronize(self.device)
            times.append(time.perf_counter() - t0)
            last = out
        return to_host(last), times

    @failing_at(Stage.RUN)
    def probe(self, fn, variant, inputs: tuple, probes: tuple) -> list:
        from gapfuzz.core.ir import clone_exact

        return run_probes(lambda fed: to_host(fn(*(clone_exact(t) for t in fed))), inputs,
                          roles(variant.gm, variant.inputs), list(probes))

    @failing_at(Stage.RUN)
    def check(self, backend, variant, args: tuple, first: list, last: list) -> None:
        """Whether two calls gave other bits, whether the call wrote its inputs, what the backend says of itself."""
        self.result.nondeterministic = not same_bits(first, last)
        self.result.inputs_mutated = not same_bits(to_host(list(args)), list(variant.inputs))
        self.result.backend_info = dict(backend.info or {})

    def _compiler_columns(self) -> None:
        counted, result = self.counted, self.result
        result.compiler = counted.get("compiler") if counted.get("via_dynamo", True) else \
            counted.get("compiler") and f"{counted['compiler']}-aot"
        result.compiler_passes = counted.get("compiler_passes", [])
        result.compiler_patterns = counted.get("compiler_patterns", [])
        result.symbolic = self.sizes.get("symbolic")

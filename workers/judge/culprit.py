"""Which part of a compiler causes a finding: the stage, pass and application that maintainers ask for.

A miscompilation shows at an ordinary op; its cause is a pass. For a stack that compiles with
``torch.compile`` (Inductor, or a plug-in that does), PyTorch's own ``CompilerBisector`` finds the
first backend that shows it (``eager``: Dynamo; ``aot_eager``: AOTAutograd; ``aot_eager_decomp_
partition``: decompositions and the partitioner; ``inductor``) and, inside it, the subsystem and the
application after which it appears, with the run's own inputs and tolerances as its predicate
(``Executor.bisect``). A stack that names option sets without its optimisations
(``Backend.unoptimised``: ONNX Runtime, OpenVINO) is run so instead, one step at a time
(``workers.judge.attribution.differential``). Either way the answer is a ``Culprit``: its ``layer`` (``optimiser``,
``kernel``, ``conversion``) says which of the stack's teams the report goes to, and its ``identity``
joins the finding's bug key, so that one pass is one cluster whichever op it breaks.
"""
from __future__ import annotations

import contextlib
import io
import re
import time
from dataclasses import dataclass

OPTIMISER, KERNEL, CONVERSION = "optimiser", "kernel", "conversion"
KERNEL_OR_CONVERSION = "kernel-or-conversion"  # a differential's finding that every unoptimised step shows
PASS_SUBSYSTEMS = ("pre_grad_passes", "joint_graph_passes", "post_grad_passes")
CAPTURE_BACKENDS = ("eager", "aot_eager", "aot_eager_decomp_partition", "aot_eager_decomp_partition_crossref")
FIGURES = ("culprit_backend", "culprit_subsystem", "culprit_step", "culprit_info", "culprit_layer")


def layer_of(backend: str | None, subsystem: str | None) -> str | None:
    """The team a bisection result goes to: the graph's capture and decompositions are conversion,
    a pass or a config-gated rewrite is the optimiser, lowering and code generation are kernels."""
    if backend is None:
        return None
    if backend in CAPTURE_BACKENDS:
        return CONVERSION
    if subsystem in PASS_SUBSYSTEMS or subsystem in ("layout_optimization", "comprehensive_padding") \
            or (subsystem or "").startswith("inductor_layout") \
            or (subsystem or "").startswith("inductor_comprehensive"):
        return OPTIMISER
    return KERNEL


def pass_name(subsystem: str | None, info: str | None) -> str:
    """What the application's debug info names, without the graph's own numbering: a pass
    (``post_grad_custom_post_pass``), a decomposition (``aten._softmax.default``), a lowered node's op."""
    info = (info or "").strip()
    if subsystem == "lowerings":
        return re.sub(r"_\d+$", "", info)
    overload = re.fullmatch(r"<OpOverload\(op='([^']+)', overload='([^']+)'\)>", info)  # a decomposition's repr
    return f"{overload[1]}.{overload[2]}" if overload else info


@dataclass(frozen=True)
class Culprit:
    """A finding's attribution inside its stack; ``done`` once an attribution was tried (found or not)."""

    variant_id: str
    backend: str | None = None  # the first torch.compile backend (or ``<stack>`` for a differential) that shows it
    subsystem: str | None = None
    step: int | None = None  # the subsystem's application number after which it appears
    info: str | None = None  # that application's debug info (the pass's name)
    layer: str | None = None  # optimiser, kernel or conversion
    error: str | None = None  # why no attribution was had
    done: bool = False

    @property
    def identity(self) -> str | None:
        """The part of a bug key that names the pass (or decomposition, lowering, config-gated
        rewrite) that does it; None when no subsystem is named: then the op stays the identity."""
        if self.backend is None or self.subsystem is None:
            return None
        return ":".join(p for p in (self.backend, self.subsystem, pass_name(self.subsystem, self.info)) if p)

    def columns(self) -> dict:
        values = dict(zip(FIGURES, (self.backend, self.subsystem, self.step, self.info, self.layer)))
        out = {k: v for k, v in values.items() if v is not None}
        if self.identity:
            out["culprit"] = self.identity
        if self.error:
            out["bisect_error"] = self.error
        return out

    def inherit(self, record) -> None:
        """A run of the same case takes this attribution, and says where it came from."""
        if self.done:
            record.update(**self.columns())
            record.bisect_error = f"not run: inherited from {self.variant_id}" + (
                f" ({self.error})" if self.error else "")
        else:
            record.bisect_error = f"not run: being bisected on {self.variant_id}"

    @classmethod
    def of(cls, variant_id: str, record) -> Culprit:
        """The attribution a bisected record holds (a ``results.schema.RunRecord``)."""
        return cls(variant_id, record.culprit_backend, record.culprit_subsystem, record.culprit_step,
                   record.culprit_info, record.culprit_layer, record.bisect_error, True)


class OverBudget(Exception):
    pass


def bisect(good, budget_s: float = 900.0) -> dict:
    """``CompilerBisector.do_bisect(good)``, its chatter kept off the worker's output: the culprit
    figures, ``bisect_compiles`` and ``bisect_error``. ``good()`` compiles afresh and says whether the
    finding is absent; no new step starts after ``budget_s`` (a model's training compile with
    dynamic shapes takes a minute, and a bisection is up to ~30 of them)."""
    from torch._inductor.compiler_bisector import CompilerBisector

    calls = [0]
    start = time.perf_counter()

    def counted() -> bool:
        if time.perf_counter() - start > budget_s:
            raise OverBudget(f"over its {budget_s:.0f} s budget after {calls[0]} compiles")
        calls[0] += 1
        return bool(good())

    chatter = io.StringIO()
    t0 = time.perf_counter()
    try:
        with contextlib.redirect_stdout(chatter):
            result = CompilerBisector.do_bisect(counted)
    except Exception as e:  # noqa: BLE001 - a bisection that breaks leaves the finding unattributed
        with contextlib.redirect_stdout(chatter):
            CompilerBisector.delete_bisect_status()  # the next bisection in this process starts afresh
        error = str(e) if isinstance(e, OverBudget) else f"{type(e).__name__}: {str(e)[:200]}"
        return {"bisect_error": error, "bisect_compiles": calls[0], "bisect_s": time.perf_counter() - t0}
    out = {"bisect_compiles": calls[0], "bisect_s": time.perf_counter() - t0}
    if result is None:
        out["bisect_error"] = "no torch.compile backend shows it under bisection"
        return out
    subsystem = result.subsystem
    c = Culprit("", result.backend, subsystem, result.bisect_number, result.debug_info,
                layer_of(result.backend, subsystem), done=True)
    return {**out, **c.columns()}


@contextlib.contextmanager
def inductor_counters(found: dict | None = None):
    """Yields a dict (``found``, or a new one) that, on exit, holds whether Inductor compiled inside
    (``torch._dynamo.utils.counters``), which of its passes ran (``compiler_passes``, from its pass
    timings) and which of its pattern-matcher patterns fired (``compiler_patterns``): a campaign's
    pass coverage."""
    import os

    from torch._dynamo.utils import compilation_time_metrics, counters

    found = {} if found is None else found
    before = os.environ.get("TORCHINDUCTOR_PATTERN_MATCH_DEBUG")
    os.environ["TORCHINDUCTOR_PATTERN_MATCH_DEBUG"] = "1"  # read per match: per-pattern counts
    counters.clear()
    compilation_time_metrics.clear()
    try:
        yield found
    finally:
        if before is None:
            os.environ.pop("TORCHINDUCTOR_PATTERN_MATCH_DEBUG", None)
        else:
            os.environ["TORCHINDUCTOR_PATTERN_MATCH_DEBUG"] = before
        inductor = counters.get("inductor") or {}
        if inductor or counters.get("aot_autograd", {}).get("total"):
            found["compiler"] = "inductor" if inductor else "aot_autograd"
            found["via_dynamo"] = bool(counters.get("frames", {}).get("total"))  # a frame that failed counts
        found["compiler_passes"] = sorted(k.removeprefix("pass.") for k in compilation_time_metrics
                                          if k.startswith("pass."))
        found["compiler_patterns"] = sorted(counters.get("inductor_pattern_matcher_per_pattern") or {})


def in_words(figures: dict) -> str | None:
    """A bug report's sentence on a culprit, with the command that checks it; None when there is none."""
    backend, subsystem = figures.get("culprit_backend"), figures.get("culprit_subsystem")
    step, info, layer = figures.get("culprit_step"), figures.get("culprit_info"), figures.get("culprit_layer")
    if not backend:
        return None
    if layer == KERNEL_OR_CONVERSION or (subsystem and backend not in CAPTURE_BACKENDS + ("inductor",)):
        if layer == KERNEL_OR_CONVERSION:
            return f"`{backend}` shows it with every optimisation off: a kernel or the conversion, not the optimiser."
        return f"It goes away with `{backend}`'s {subsystem} off, all else the same: its optimiser's."
    if backend in CAPTURE_BACKENDS:
        who = {"eager": "Dynamo's graph capture", "aot_eager": "AOTAutograd"}.get(
            backend, "a decomposition or the partitioner")
        what = f"; it goes away with {subsystem} application {step} disabled (`{info}`)" if subsystem else ""
        return (f"PyTorch's CompilerBisector finds it already with `torch.compile(backend=\"{backend}\")`: "
                f"{who}, before Inductor{what}.")
    if subsystem is None:
        return ("PyTorch's CompilerBisector finds it first in `inductor`, with no subsystem whose disabling "
                "removes it: code generation or a kernel.")
    if step is None:  # a config change
        return f"PyTorch's CompilerBisector: it goes away with Inductor's `{subsystem}` config change."
    found = (f"PyTorch's CompilerBisector, on the original variant: it goes away with {subsystem} application "
             f"{int(step)} disabled: `{info}` ({layer}).")
    if subsystem in PASS_SUBSYSTEMS and info:
        return found + f" Check: `TORCHINDUCTOR_DISABLED_PASSES={str(info).upper()} python repro.py` passes."
    return found + (f" Its check on that variant: `TORCH_BISECT_BACKEND={backend} TORCH_BISECT_SUBSYSTEM={subsystem} "
                    f"TORCH_BISECT_MAX={int(step) - 1}` (applications are counted per graph).")

"""PyTorch eager execution: the usual reference, and a float64 run as the oracle."""
from __future__ import annotations

import torch
import torch.fx as fx

from gapfuzz.workers.run.backend import DEVICES, Backend
from gapfuzz.workers.run.registry import register_backend

# the float64 oracle (eager-fp64) and the interpreter that widens a graph to it: every floating dtype to 64 bits
WIDEN = {torch.float16: torch.float64, torch.bfloat16: torch.float64, torch.float32: torch.float64,
         torch.complex64: torch.complex128, torch.complex32: torch.complex128}


def widen_args(a):
    """Graph arguments with every floating dtype replaced by its 64-bit one (explicit casts too)."""
    if isinstance(a, torch.dtype):
        return WIDEN.get(a, a)
    if isinstance(a, (list, tuple)) and not isinstance(a, torch.Size):
        return type(a)(widen_args(x) for x in a)
    if isinstance(a, dict):
        return {k: widen_args(v) for k, v in a.items()}
    return a


def to_device(gm, device: str, dtype_map: dict | None = None):
    """The module on ``device`` with dtypes converted by ``dtype_map`` (e.g. float32 -> float64): a new
    module when anything changes, so the given one is left alone."""
    def conv(t):
        return t.to(device=device, dtype=(dtype_map or {}).get(t.dtype, t.dtype))

    if device == "cpu" and not dtype_map:
        return gm
    if device == "npu":
        import torch_npu  # noqa: F401 - registers the npu device with torch
    root = torch.nn.Module()
    for name, t in gm.named_buffers():
        root.register_buffer(name, conv(t))
    for name, p in gm.named_parameters():
        root.register_parameter(name, torch.nn.Parameter(conv(p.detach()), requires_grad=False))
    graph = fx.Graph()
    graph.output(graph.graph_copy(gm.graph, {}))
    return fx.GraphModule(root, graph)


def prepare_eager(gm, example_inputs, device, options):
    """The graph as written, op by op."""
    return to_device(gm, device), {}


def prepare_eager_fp64(gm, example_inputs, device, options):
    """Every floating tensor, and every explicit cast to a float type, widened to 64 bits."""
    gm = to_device(gm, device, WIDEN)
    for n in gm.graph.nodes:
        n.args, n.kwargs = widen_args(n.args), widen_args(n.kwargs)
    gm.recompile()

    def run(*inputs):
        return gm(*(t.to(WIDEN.get(t.dtype, t.dtype)) if isinstance(t, torch.Tensor) else t for t in inputs))
    return run, {}


@register_backend
class Eager(Backend):
    """The graph as written, op by op, on the device's native kernels."""

    name = "eager"
    distribution = "torch"  # its releases are torch's
    devices = DEVICES
    capture_nodes = True  # runs op by op: tier 2 reads every node's value in one run
    trains = True
    leaves_variant_intact = True  # a functional graph run as written (or copied to the device)
    prepare_fn = staticmethod(prepare_eager)

    @classmethod
    def known_options(cls):
        return []


@register_backend
class EagerFp64(Backend):
    """Every floating tensor widened to float64: the oracle that decides which side is wrong."""

    name = "eager-fp64"
    distribution = "torch"  # its releases are torch's
    devices = ("cpu", "cuda")
    trains = True  # gradients in float64, rounded to each leaf's dtype on the way back
    leaves_variant_intact = True  # widens copies of the weights, never the weights
    prepare_fn = staticmethod(prepare_eager_fp64)
    known_options = Eager.known_options

"""PyTorch eager execution: the usual reference, and a float64 run as the oracle."""
from __future__ import annotations

import torch
import torch.fx as fx

from ..interpret import WIDEN, widen_args
from ..registry import DEVICES, Backend, register_backend


def to_device(gm, inputs: tuple, device: str, dtype_map: dict | None = None):
    """A new module (the given one is left alone) and inputs on ``device``, with dtypes converted by
    ``dtype_map`` (e.g. float32 -> float64)."""
    def conv(t):
        if not isinstance(t, torch.Tensor):
            return t
        return t.to(device=device, dtype=(dtype_map or {}).get(t.dtype, t.dtype))

    if device == "cpu" and not dtype_map:
        return gm, tuple(inputs)
    if device == "npu":
        import torch_npu  # noqa: F401 - registers the npu device with torch
    root = torch.nn.Module()
    for name, t in gm.named_buffers():
        root.register_buffer(name, conv(t))
    for name, p in gm.named_parameters():
        root.register_parameter(name, torch.nn.Parameter(conv(p.detach()), requires_grad=False))
    graph = fx.Graph()
    graph.output(graph.graph_copy(gm.graph, {}))
    return fx.GraphModule(root, graph), tuple(conv(t) for t in inputs)


@register_backend
class Eager(Backend):
    """The graph as written, op by op, on the device's native kernels."""

    name = "eager"
    devices = DEVICES
    capture_nodes = True  # runs op by op: tier 2 reads every node's value in one run
    leaves_variant_intact = True  # a functional graph run as written (or copied to the device)
    repro = """
def run_backend(model, inputs, device):
    return model.to(device)(*[t.to(device) for t in inputs])
"""

    def prepare(self, gm, example_inputs, device):
        gm, _ = to_device(gm, (), device)
        return gm


@register_backend
class EagerFp64(Backend):
    """Every floating tensor widened to float64: the oracle that decides which side is wrong."""

    name = "eager-fp64"
    devices = ("cpu", "cuda")
    leaves_variant_intact = True  # widens copies of the weights, never the weights

    def prepare(self, gm, example_inputs, device):
        gm, _ = to_device(gm, (), device, WIDEN)
        for n in gm.graph.nodes:  # explicit casts to a float type become casts to float64 too
            n.args, n.kwargs = widen_args(n.args), widen_args(n.kwargs)
        gm.recompile()

        def run(*inputs):
            return gm(*(t.to(WIDEN.get(t.dtype, t.dtype)) if isinstance(t, torch.Tensor) else t
                        for t in inputs))
        return run


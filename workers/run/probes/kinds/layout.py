"""Layout probes: the same values channels-last, transposed, or strided. A stack that takes any strides
gets all three; one that compiles again for new strides (Inductor) one, on a convolution or matmul."""
from __future__ import annotations

import torch

from gapfuzz.workers.run.probes.base import ProbeKind
from gapfuzz.workers.run.probes.registry import PROBE_KINDS

aten = torch.ops.aten
LAYOUTS = ("channels-last", "transposed", "strided")
# operators a layout changes the code of (a stack that compiles again for new strides gets one layout on them)
CONTRACTIONS = {"convolution", "_convolution", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                "conv_transpose3d", "mm", "bmm", "addmm", "matmul", "linear", "baddbmm", "addbmm", "addmv", "mv",
                "dot", "vdot", "einsum", "tensordot", "scaled_dot_product_attention",
                "_scaled_dot_product_flash_attention", "_scaled_dot_product_flash_attention_for_cpu",
                "_scaled_dot_product_efficient_attention"}


@PROBE_KINDS.register
class Layout(ProbeKind):
    """The same values in another memory layout."""

    name = "layout"
    order = 70
    params = {"layout": LAYOUTS}
    legacy = {f"layout:{layout}": 27 + i for i, layout in enumerate(LAYOUTS)}

    def propose(self, graph):
        if not _layable(graph.gm, graph.inputs):
            return []
        if graph.any_strides is True or graph.settings.every_layout:
            return [{"layout": layout} for layout in LAYOUTS]
        contracts = bool(graph.ops & CONTRACTIONS)
        return [{"layout": one_layout(graph.inputs)}] if graph.any_strides is False and contracts else []

    def make(self, inputs, input_roles, params, g):
        return tuple(laid_out(t, params["layout"]) if isinstance(t, torch.Tensor) else t for t in inputs)


def one_layout(inputs: tuple) -> str:
    """The layout a stack that compiles again for new strides gets: channels-last where an input is 4-D
    (a convolution's), else transposed (a matmul's), else a strided view."""
    dims = {t.dim() for t in inputs if isinstance(t, torch.Tensor) and t.numel() > 1}
    return "channels-last" if 4 in dims else "transposed" if any(d >= 2 for d in dims) else "strided"


def _layable(gm, inputs: tuple) -> bool:
    """Layouts apply to a graph with a tensor to lay out that no ``view`` reads directly (eager refuses
    to view an input it cannot view without a copy, so the probe would test nothing). A view further
    in mostly reads a kernel's dense output; where it does not, the reference refuses the probe and
    its runs are skipped, never blamed."""
    if any(n.op == "call_function" and n.target is aten.view.default and n.args and
           getattr(n.args[0], "op", None) == "placeholder" for n in gm.graph.nodes):
        return False
    return any(isinstance(t, torch.Tensor) and t.dim() >= 1 and t.numel() > 1 for t in inputs)


def laid_out(t: torch.Tensor, layout: str) -> torch.Tensor:
    """The same values in another memory layout: channels-last (4-D), column-major in the last two
    dimensions, or every other element of a buffer twice as long (a strided view)."""
    if t.dim() == 0 or t.numel() <= 1:
        return t
    if layout == "channels-last" and t.dim() == 4:
        return t.contiguous(memory_format=torch.channels_last)
    if layout in ("channels-last", "transposed") and t.dim() >= 2:
        return t.transpose(-1, -2).contiguous().transpose(-1, -2)
    buffer = torch.zeros((*t.shape[:-1], 2 * t.shape[-1]), dtype=t.dtype, device=t.device)
    view = buffer[..., ::2]
    view.copy_(t)
    return view

"""Edge probes, on small graphs with a floating input: values one step from the dtype's largest finite
value, its square root and its logarithm (a product or an exp crosses into inf there), the smallest
normal and the subnormals, a NaN with its sign set, a signaling NaN; on the division family, quotients
that are integers and quotients one ulp off one (floor division and remainder as floor(a / b))."""
from __future__ import annotations

import math

import torch

from gapfuzz.core.bugs import OVERFLOW_EDGES
from gapfuzz.workers.run.probes.base import ProbeKind
from gapfuzz.workers.run.probes.registry import PROBE_KINDS
from gapfuzz.workers.run.probes.roles import related_group

EDGES = (*OVERFLOW_EDGES, "tiny", "nan-sign", "snan")
QUOTIENTS = ("quotient", "quotient-ulp")
EDGE_MAX_NODES = 8  # a graph with more calls reaches its operators through others: edges mean little there
_DIVISIONS = {"div", "floor_divide", "remainder", "fmod", "true_divide", "divide"}
SNAN_BITS = {torch.float16: (torch.int16, 0x7C01), torch.bfloat16: (torch.int16, 0x7F81),
             torch.float32: (torch.int32, 0x7F800001), torch.float64: (torch.int64, 0x7FF0000000000001)}


@PROBE_KINDS.register
class Edge(ProbeKind):
    """Values one step from the dtype's edges, or quotients at and one ulp off an integer."""

    name = "edge"
    order = 80
    needs = "value"
    params = {"edge": EDGES + QUOTIENTS}
    legacy = {f"edge:{e}": 35 + i for i, e in enumerate(EDGES + QUOTIENTS)}

    def propose(self, graph):
        floating = any(isinstance(t, torch.Tensor) and t.dtype in SNAN_BITS and t.numel() for t in graph.inputs)
        if "value" not in graph.have or graph.calls > EDGE_MAX_NODES or not floating:
            return []
        divides = bool(graph.ops & _DIVISIONS) and graph.related
        return [{"edge": e} for e in EDGES + (QUOTIENTS if divides else ())]

    def make(self, inputs, input_roles, params, g):
        if params["edge"] in QUOTIENTS:
            return _quotients(tuple(inputs), input_roles, params["edge"] == "quotient-ulp", g)
        return super().make(inputs, input_roles, params, g)

    def fits(self, t):
        return t.dtype in SNAN_BITS

    def make_one(self, t, params, g):
        edge, info = params["edge"], torch.finfo(t.dtype)
        if edge in OVERFLOW_EDGES:
            top = {"max": info.max, "sqrt-max": math.sqrt(info.max), "log-max": math.log(info.max)}[edge]
            out = around(top, t.dtype, t.shape, g)
            return out.abs() if edge == "log-max" else out
        if edge == "tiny":  # the smallest normal, the largest and the smallest subnormal, either sign; signed zeros
            normal = torch.tensor(info.smallest_normal, dtype=t.dtype)
            zero = torch.zeros((), dtype=t.dtype)
            values = torch.stack([normal, torch.nextafter(normal, zero), torch.nextafter(zero, normal)])
            values = torch.cat([values, -values, zero.reshape(1), -zero.reshape(1)])
            return values[torch.randint(len(values), t.shape, generator=g)]
        out = t.clone().reshape(-1)
        if edge == "nan-sign":
            value = torch.copysign(torch.tensor(math.nan, dtype=t.dtype), torch.tensor(-1.0, dtype=t.dtype))
        else:  # a signaling NaN: the quiet bit clear, a payload of one
            bits, pattern = SNAN_BITS[t.dtype]
            value = torch.tensor(pattern, dtype=bits).view(t.dtype)
        out[int(torch.randint(out.numel(), (1,), generator=g))] = value
        return out.reshape(t.shape)


def around(x: float, dtype: torch.dtype, shape, g: torch.Generator) -> torch.Tensor:
    """``x`` in ``dtype`` and its neighbours one ulp either side, at random positions with random signs."""
    centre = torch.tensor(x, dtype=torch.float64).to(dtype)
    inf = torch.tensor(math.inf, dtype=dtype)
    three = torch.stack([torch.nextafter(centre, -inf), centre, torch.nextafter(centre, inf)])
    pick = three[torch.randint(3, shape, generator=g)]
    sign = torch.where(torch.rand(shape, generator=g) < 0.5, -1.0, 1.0).to(dtype)
    return torch.where(torch.isfinite(pick), pick, centre) * sign


def _quotients(inputs: tuple, input_roles: list[str], ulp: bool, g: torch.Generator) -> tuple:
    """The first two related inputs ``a, b`` with ``a = b * k`` for small integers ``k`` (an integer-valued
    quotient), or ``a`` one ulp from that (a quotient one ulp off an integer), ``b`` kept nonzero."""
    group = related_group(inputs, input_roles)
    if len(group) < 2 or not inputs[group[0]].is_floating_point():
        return inputs
    a, b = (inputs[i].detach().cpu() for i in group[:2])
    b = torch.where(b == 0, torch.ones_like(b), b)
    k = torch.randint(-9, 10, a.shape, generator=g).to(a.dtype)
    new = (b * k).to(a.dtype)
    if ulp:
        away = torch.where(torch.rand(a.shape, generator=g) < 0.5, -math.inf, math.inf).to(a.dtype)
        new = torch.nextafter(new, away)
    out = list(inputs)
    out[group[0]] = torch.empty_like(inputs[group[0]]).copy_(new.to(inputs[group[0]].device))
    out[group[1]] = torch.empty_like(inputs[group[1]]).copy_(b.to(inputs[group[1]].device))
    return tuple(out)

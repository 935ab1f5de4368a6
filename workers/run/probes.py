"""Input probes: several input sets per prepared (variant, backend), so a defect that depends on the
values fed to a graph is found every time, not when a mutation happens to draw them.

A probe is a kind and the parameters that replay it; ``make_inputs`` turns the capture's example
inputs into the probe's, deterministically, in any process. Each kind applies only where it makes
sense: an input a graph uses as an index keeps its valid indices (an index probe reorders them), a
mask stays a mask, integer extremes go only to integers used as numbers.
``choose`` picks a variant's probes: the example
first, then the kinds round-robin (a special value, a magnitude, an integer or bool corner, ...),
so that a few probes already cover every family that applies. Beside them, not counted in
``per_variant``: relation probes (number inputs of one shape made equal, half equal, one ulp apart on
either side, or swapped: the ties of ``>`` against ``>=``), then layout probes (the same values channels-last,
transposed, strided), all three for a stack that takes any strides (``Backend.any_strides``), one on
a convolution or matmul for one that compiles again for each (Inductor), unless ``kinds`` names ``layout``;
and, on small graphs with a floating input, edge probes (``EDGES``: values one step from the dtype's
largest, smallest normal and subnormal, NaNs with a sign or a payload; quotients on an integer). Last,
where a stack compiled for dynamic shapes runs (``ProbeSettings.resize``), resize probes: the same graph
fed inputs of other lengths (``workers.run.resize``), so code compiled with symbolic sizes runs at sizes it
was not traced at.
"""
from __future__ import annotations

import fnmatch
import json
import math
import time
from dataclasses import dataclass

import torch
import torch.fx as fx

from gapfuzz.core.bugs import EXAMPLE_PROBE, OVERFLOW_EDGES, Status
from gapfuzz.core.seeding import stable_int

aten = torch.ops.aten
EXAMPLE = EXAMPLE_PROBE
RESIZE = "resize"
KINDS = (EXAMPLE, "special", "random", "ties", "integer", "bool", "index", "relation", "layout", "edge", RESIZE)
DEFAULT_KINDS = KINDS  # layouts as each stack takes them; a list of the campaign's own naming layout: all, everywhere

# int inputs used only by these stay numbers (and get integer extremes); any other use makes them indices
_ARITHMETIC = {aten.add.Tensor, aten.sub.Tensor, aten.mul.Tensor, aten.div.Tensor, aten.div.Tensor_mode,
               aten.remainder.Tensor, aten.fmod.Tensor, aten.neg.default, aten.abs.default, aten.sum.default,
               aten.sum.dim_IntList, aten.cumsum.default, aten.prod.default, aten.maximum.default,
               aten.minimum.default, aten.clamp.default, aten.bitwise_and.Tensor, aten.bitwise_or.Tensor,
               aten.bitwise_xor.Tensor, aten.bitwise_not.default, aten.eq.Tensor, aten.ne.Tensor, aten.lt.Tensor,
               aten.le.Tensor, aten.gt.Tensor, aten.ge.Tensor, aten.mean.default, aten.amax.default,
               aten.amin.default, aten.sign.default, aten.square.default, aten.pow.Tensor_Scalar,
               aten.floor_divide.default, aten.lcm.default, aten.gcd.default, aten.bitwise_left_shift.Tensor,
               aten.bitwise_right_shift.Tensor, aten.add.Scalar, aten.mul.Scalar, aten.sub.Scalar}
MAGNITUDES = {"tiny": 1e-4, "unit": 1.0, "large": 1e4, "overflow": None}  # None: near the dtype's largest
SPECIALS = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf, "-0.0": -0.0, "subnormal": None}
PATTERNS = ("single", "row", "channel", "window")
INTEGER_CORNERS = ("max", "min", "zero", "minus-one", "overflow-sum", "random")  # random: over the whole range
MASKS = (True, False, "random", "single", "alternating")  # all, none, half at random, one, every other
ORDERS = ("reversed", "shuffled")  # an index tensor's own values in another order: still valid indices
LAYOUTS = ("channels-last", "transposed", "strided")
# values one step from the dtype's edges, for floating inputs of small graphs (where they reach an operator
# as drawn): the largest finite and one ulp below, the square root and the log of it with their
# neighbours (a product or an exp crosses into inf there), the smallest normal, the largest and smallest
# subnormal, a NaN with its sign bit set, a signaling NaN; for the division family, quotients that are
# integers and quotients one ulp off one (floor division and remainder computed as floor(a / b))
EDGES = (*OVERFLOW_EDGES, "tiny", "nan-sign", "snan")
QUOTIENTS = ("quotient", "quotient-ulp")
EDGE_MAX_NODES = 8  # a graph with more calls reaches its operators through others: edges mean little there
_DIVISIONS = {"div", "floor_divide", "remainder", "fmod", "true_divide", "divide"}
_SNAN_BITS = {torch.float16: (torch.int16, 0x7C01), torch.bfloat16: (torch.int16, 0x7F81),
              torch.float32: (torch.int32, 0x7F800001), torch.float64: (torch.int64, 0x7FF0000000000001)}
# the later inputs of a related group: equal to the first, at a seeded half of the positions, one ulp from it on
# the side the example has them (its order at the least margin) or on the other side (its order flipped), swapped
RELATIONS = ("equal", "some-equal", "ulp", "ulp-flipped", "swapped")
# the dtypes a relation probe relates (the operations it needs exist for them on every device)
_RELATABLE = (torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.uint8, torch.int8, torch.int16,
              torch.int32, torch.int64)
# operators a layout changes the code of (a stack that compiles again for new strides gets one layout on them)
_CONTRACTIONS = {"convolution", "_convolution", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                 "conv_transpose3d", "mm", "bmm", "addmm", "matmul", "linear", "baddbmm", "addbmm", "addmv", "mv",
                 "dot", "vdot", "einsum", "tensordot", "scaled_dot_product_attention",
                 "_scaled_dot_product_flash_attention", "_scaled_dot_product_flash_attention_for_cpu",
                 "_scaled_dot_product_efficient_attention"}

# the order probes are chosen in: each round takes the next of every family that applies
_ROUNDS = [
    [("special", {"value": "nan", "pattern": "single"}), ("random", {"magnitude": "large"}),
     ("integer", {"corner": "max"}), ("bool", {"value": True}), ("index", {"order": "reversed"})],
    [("special", {"value": "inf", "pattern": "single"}), ("random", {"magnitude": "tiny"}),
     ("integer", {"corner": "min"}), ("bool", {"value": False}), ("index", {"order": "shuffled"})],
    [("special", {"value": "-inf", "pattern": "single"}), ("ties", {}), ("integer", {"corner": "overflow-sum"}),
     ("bool", {"value": "random"})],
    [("special", {"value": "-0.0", "pattern": "single"}), ("random", {"magnitude": "overflow"}),
     ("integer", {"corner": "minus-one"}), ("bool", {"value": "single"})],
    [("special", {"value": "nan", "pattern": "row"}), ("special", {"value": "subnormal", "pattern": "single"}),
     ("integer", {"corner": "zero"}), ("bool", {"value": "alternating"})],
    [("special", {"value": "nan", "pattern": "channel"}), ("random", {"magnitude": "unit"}),
     ("integer", {"corner": "random"})],
    [("special", {"value": "nan", "pattern": "window"}), ("special", {"value": "inf", "pattern": "row"})],
]
_NEEDS = {"special": "value", "random": "value", "ties": "value", "integer": "integer", "bool": "mask",
          "index": "index", "layout": "any", "edge": "value"}
# the kinds ``per_variant`` counts (the example and the value kinds), and those that come beside them, each on
# some graphs only (two inputs of one shape, a tensor to lay out, a small graph, a stack compiled for dynamic
# shapes): a campaign's kinds of these alone would judge no graph they do not apply to
COUNTED = (EXAMPLE, *dict.fromkeys(kind for round_ in _ROUNDS for kind, _ in round_))
BESIDE = tuple(k for k in KINDS if k not in COUNTED)


@dataclass(frozen=True)
class Probe:
    """One input set: a kind, its parameters and the seed of its positions."""

    kind: str = EXAMPLE
    params: tuple = ()  # sorted (key, value) pairs
    seed: int = 0

    @classmethod
    def of(cls, kind: str, params: dict | None = None, seed: int = 0) -> Probe:
        return cls(kind, tuple(sorted((params or {}).items())), seed)

    @property
    def name(self) -> str:
        """Unique among a variant's probes, readable in a table: ``special:nan:row``, ``random:large``."""
        params = dict(self.params)
        shown = ("value", "magnitude", "corner", "pattern", "order", "relation", "layout", "edge", "dims", "length")
        return ":".join([self.kind, *(str(params[k]) for k in shown if k in params)])

    def recipe(self) -> str:
        return json.dumps({"kind": self.kind, **dict(self.params), "seed": self.seed}, sort_keys=True)

    @classmethod
    def from_recipe(cls, text: str | None) -> Probe:
        d = json.loads(text or "{}")
        kind, seed = d.pop("kind", EXAMPLE), int(d.pop("seed", 0))
        return cls.of(kind, d, seed)


@dataclass(frozen=True)
class ProbeSettings:
    """How many probes per variant, of which kinds (globs over KINDS), and the campaign's seed."""

    per_variant: int = 8  # the example and the value kinds; relations and layouts come beside them
    kinds: tuple = DEFAULT_KINDS
    campaign_seed: int = 0
    resize: bool = False  # resize probes too: a stack compiled for dynamic shapes runs the variant (``takes_resizes``)

    @property
    def every_layout(self) -> bool:
        """Layouts named by the campaign (a kinds list of its own matching ``layout``, or ``"*"``): every
        stack gets all of them, whatever each costs it. The default list without ``resize`` (a campaign
        written before it, or stored with its run) is still the default."""
        return set(self.kinds) - {RESIZE} != set(DEFAULT_KINDS) - {RESIZE} and \
            any(fnmatch.fnmatchcase("layout", p) for p in self.kinds)


@dataclass
class ProbeRun:
    """One probe's call on a prepared backend: its outputs, or what it raised."""

    probe: Probe
    outputs: list | None = None
    status: Status = Status.OK  # or error / unsupported / oom, from what the call raised
    error_type: str | None = None
    message: str | None = None
    run_s: float | None = None
    input_checksum: str | None = None


def roles(gm: fx.GraphModule, inputs: tuple) -> list[str]:
    """Per input: value (floating), mask (bool), integer (a number) or index (anything else integral)."""
    out = []
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for node, t in zip(placeholders, inputs):
        if not isinstance(t, torch.Tensor):
            out.append("index")
        elif t.is_floating_point() or t.is_complex():
            out.append("value")
        elif t.dtype == torch.bool:
            out.append("mask")
        else:
            numeric = node.users and all(u.op == "call_function" and u.target in _ARITHMETIC for u in node.users)
            out.append("integer" if numeric else "index")
    return out


def choose(gm: fx.GraphModule, inputs: tuple, settings: ProbeSettings, variant_id: str,
           any_strides: bool | None = True) -> list[Probe]:
    """The variant's probes for a stack (``Backend.any_strides``), the example first; the same list in
    every process. ``per_variant`` counts the example and the value kinds; every relation that applies
    comes after them, then the layouts: all three where the stack takes any strides (the reference,
    the oracle) or the campaign names layouts, else at most one (``one_layout``) for a stack that
    compiles again for new strides, none for one that takes only the example's."""
    input_roles = roles(gm, inputs)
    have = set(input_roles)
    allowed = [k for k in KINDS if any(fnmatch.fnmatchcase(k, p) for p in settings.kinds)]
    seed = stable_int(f"{settings.campaign_seed}/{variant_id}/probes")
    values = [p for round_ in _ROUNDS for p in round_]
    chosen = [Probe()]
    for k, (kind, params) in enumerate(values):
        if len(chosen) >= settings.per_variant:
            break
        if kind in allowed and _NEEDS[kind] in have:
            chosen.append(Probe.of(kind, params, (seed + k) % (1 << 31)))
    counted = len(chosen) > 1
    if "relation" in allowed and related_group(inputs, input_roles):
        base = seed + len(values) + len(LAYOUTS)
        chosen += [Probe.of("relation", {"relation": r}, (base + i) % (1 << 31)) for i, r in enumerate(RELATIONS)]
    if "layout" in allowed and _layable(gm, inputs):
        if any_strides is True or settings.every_layout:
            layouts = LAYOUTS
        else:
            layouts = (one_layout(inputs),) if any_strides is False and _contracts(gm) else ()
        chosen += [Probe.of("layout", {"layout": layout}, (seed + len(values) + LAYOUTS.index(layout)) % (1 << 31))
                   for layout in layouts]  # the seeds layout probes always had: their recipes replay as before
    if "edge" in allowed and "value" in have and _edged(gm, inputs):
        base = seed + len(values) + len(LAYOUTS) + len(RELATIONS)
        edges = EDGES + (QUOTIENTS if _divides(gm) and related_group(inputs, input_roles) else ())
        chosen += [Probe.of("edge", {"edge": e}, (base + i) % (1 << 31)) for i, e in enumerate(edges)]
    # the example stays where the campaign names it, or where none of its counted kinds applies to this graph
    # (a list of integer corners on a graph of floats): every graph is judged on some input set
    return chosen if EXAMPLE in allowed or not counted else chosen[1:]


def one_layout(inputs: tuple) -> str:
    """The layout a stack that compiles again for new strides gets: channels-last where an input is 4-D
    (a convolution's), else transposed (a matmul's), else a strided view."""
    dims = {t.dim() for t in inputs if isinstance(t, torch.Tensor) and t.numel() > 1}
    return "channels-last" if 4 in dims else "transposed" if any(d >= 2 for d in dims) else "strided"


def _aten_ops(gm: fx.GraphModule) -> set[str]:
    """The ATen operators the graph calls, by name without overload (``conv2d``, ``floor_divide``)."""
    names = (str(n.target).split(".") for n in gm.graph.nodes if n.op == "call_function")
    return {parts[1] for parts in names if len(parts) >= 2 and parts[0] == "aten"}


def _contracts(gm: fx.GraphModule) -> bool:
    """Whether the graph holds a convolution or a matmul, whose kernels a layout changes."""
    return bool(_aten_ops(gm) & _CONTRACTIONS)


def related_group(inputs: tuple, input_roles: list[str]) -> list[int]:
    """The positions of the first two or more inputs used as numbers (floating or integer; not an index,
    not a mask) of one shape and dtype: the ones a relation probe relates, the later to the first."""
    groups: dict[tuple, list[int]] = {}
    for i, (t, role) in enumerate(zip(inputs, input_roles)):
        if role in ("value", "integer") and isinstance(t, torch.Tensor) and t.dtype in _RELATABLE and t.numel():
            groups.setdefault((tuple(t.shape), t.dtype), []).append(i)
    return next((g for g in groups.values() if len(g) >= 2), [])


def make_inputs(inputs: tuple, input_roles: list[str], probe: Probe) -> tuple:
    """The probe's inputs (new tensors; the example is left alone), on the example's devices."""
    if probe.kind == EXAMPLE:
        return tuple(inputs)
    params = dict(probe.params)
    g = torch.Generator().manual_seed(probe.seed)
    if probe.kind == "relation":
        return _related(tuple(inputs), input_roles, params["relation"], g)
    if probe.kind == "edge" and params["edge"] in QUOTIENTS:
        return _quotients(tuple(inputs), input_roles, params["edge"] == "quotient-ulp", g)
    if probe.kind == RESIZE:
        return resized(tuple(inputs), input_roles, params, g)
    return tuple(_probe_one(t, role, probe.kind, params, g) if isinstance(t, torch.Tensor) else t
                 for t, role in zip(inputs, input_roles))


def probed(variant, probe: Probe):
    """The variant (``core.ir.Variant``) fed with the probe's inputs instead of its example."""
    if probe.kind == EXAMPLE:
        return variant
    return variant.with_graph(variant.gm, make_inputs(variant.inputs, roles(variant.gm, variant.inputs), probe))


def _layable(gm: fx.GraphModule, inputs: tuple) -> bool:
    """Layouts apply to a graph with a tensor to lay out that no ``view`` reads directly (eager refuses
    to view an input it cannot view without a copy, so the probe would test nothing). A view further
    in mostly reads a kernel's dense output; where it does not, the reference refuses the probe and
    its runs are skipped, never blamed."""
    if any(n.op == "call_function" and n.target is aten.view.default and n.args and
           getattr(n.args[0], "op", None) == "placeholder" for n in gm.graph.nodes):
        return False
    return any(isinstance(t, torch.Tensor) and t.dim() >= 1 and t.numel() > 1 for t in inputs)


def _probe_one(t: torch.Tensor, role: str, kind: str, params: dict, g: torch.Generator) -> torch.Tensor:
    if kind == "layout":
        return _laid_out(t, params["layout"])
    if role != _NEEDS.get(kind) or t.numel() == 0 or (kind == "edge" and t.dtype not in _SNAN_BITS):
        return t
    cpu = t.detach().cpu()
    if kind == "bool":
        out = _mask(cpu, params["value"], g)
    elif kind == "index":
        flat = cpu.reshape(-1)
        order = flat.flip(0) if params["order"] == "reversed" else flat[torch.randperm(flat.numel(), generator=g)]
        out = order.reshape(cpu.shape).clone()
    elif kind == "integer" and params["corner"] == "random":
        info = torch.iinfo(cpu.dtype)
        out = torch.randint(info.min, info.max, cpu.shape, generator=g, dtype=torch.int64).to(cpu.dtype)
    elif kind == "integer":
        out = torch.full_like(cpu, _integer_corner(cpu.dtype, params["corner"]))
    elif kind == "ties":
        out = torch.full_like(cpu, 0.5)
    elif kind == "random":
        out = _random(cpu, params["magnitude"], g)
    elif kind == "edge":
        out = _edge(cpu, params["edge"], g)
    else:
        out = _special(cpu, params["value"], params["pattern"], g)
    return out.to(t.device)


def _related(inputs: tuple, input_roles: list[str], relation: str, g: torch.Generator) -> tuple:
    """The inputs with the later ones of ``related_group`` related to the first: equal to it, equal at a
    seeded half of the positions, one ulp (or one) from it on the side of their own value (the example's
    order at its least margin) or on the other side, or the group's values in reverse order (two inputs
    swapped). Each keeps its own layout and device."""
    group = related_group(inputs, input_roles)
    out = list(inputs)
    host = {i: inputs[i].detach().cpu() for i in group}
    for i, j in zip(group, reversed(group)):
        if relation == "swapped":
            new = host[j]
        elif i == group[0]:
            continue
        elif relation == "equal":
            new = host[group[0]]
        elif relation == "some-equal":
            new = torch.where(torch.rand(host[i].shape, generator=g) < 0.5, host[group[0]], host[i])
        else:
            new = _one_step(host[group[0]], host[i], flip=relation == "ulp-flipped")
        out[i] = torch.empty_like(inputs[i]).copy_(new.to(inputs[i].device))
    return tuple(out)


def _one_step(t: torch.Tensor, towards: torch.Tensor, flip: bool = False) -> torch.Tensor:
    """``t`` one step towards ``towards`` at each position (``t`` where they are equal): the next float that
    way, or one more or less, so the pair keeps the order ``t`` and ``towards`` have, by the least margin;
    with ``flip``, one step the other way (up where they are equal): the order reversed."""
    up, down = towards > t, towards < t
    if flip:
        up, down = ~up, up
    if t.is_floating_point():
        inf = torch.full_like(t, math.inf)
        return torch.nextafter(t, torch.where(up, inf, torch.where(down, -inf, t)))
    info = torch.iinfo(t.dtype)
    return torch.where(up & (t != info.max), t + 1, torch.where(down & (t != info.min), t - 1, t))


def _mask(t: torch.Tensor, value, g: torch.Generator) -> torch.Tensor:
    if value == "random":
        return torch.rand(t.shape, generator=g) < 0.5
    if value == "alternating":
        return (torch.arange(t.numel()) % 2 == 0).reshape(t.shape)
    if value == "single":
        out = torch.zeros_like(t).reshape(-1)
        out[int(torch.randint(out.numel(), (1,), generator=g))] = True
        return out.reshape(t.shape)
    return torch.full_like(t, bool(value))


def _laid_out(t: torch.Tensor, layout: str) -> torch.Tensor:
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


def _edged(gm: fx.GraphModule, inputs: tuple) -> bool:
    """Edge probes apply to a small graph (``EDGE_MAX_NODES`` calls at most) with a floating input."""
    calls = sum(n.op == "call_function" for n in gm.graph.nodes)
    return calls <= EDGE_MAX_NODES and any(isinstance(t, torch.Tensor) and t.dtype in _SNAN_BITS and t.numel()
                                           for t in inputs)


def _divides(gm: fx.GraphModule) -> bool:
    """Whether the graph holds an operator of the division family (quotient edges apply)."""
    return bool(_aten_ops(gm) & _DIVISIONS)


def _around(x: float, dtype: torch.dtype, shape, g: torch.Generator) -> torch.Tensor:
    """``x`` in ``dtype`` and its neighbours one ulp either side, at random positions with random signs."""
    centre = torch.tensor(x, dtype=torch.float64).to(dtype)
    inf = torch.tensor(math.inf, dtype=dtype)
    three = torch.stack([torch.nextafter(centre, -inf), centre, torch.nextafter(centre, inf)])
    pick = three[torch.randint(3, shape, generator=g)]
    sign = torch.where(torch.rand(shape, generator=g) < 0.5, -1.0, 1.0).to(dtype)
    return torch.where(torch.isfinite(pick), pick, centre) * sign


def _edge(t: torch.Tensor, edge: str, g: torch.Generator) -> torch.Tensor:
    info = torch.finfo(t.dtype)
    if edge == "max":
        return _around(info.max, t.dtype, t.shape, g)
    if edge == "sqrt-max":
        return _around(math.sqrt(info.max), t.dtype, t.shape, g)
    if edge == "log-max":
        return _around(math.log(info.max), t.dtype, t.shape, g).abs()
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
        bits, pattern = _SNAN_BITS[t.dtype]
        value = torch.tensor(pattern, dtype=bits).view(t.dtype)
    out[int(torch.randint(out.numel(), (1,), generator=g))] = value
    return out.reshape(t.shape)


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


def _integer_corner(dtype: torch.dtype, corner: str) -> int:
    info = torch.iinfo(dtype)
    return {"max": info.max, "min": info.min, "zero": 0, "minus-one": -1 if info.min < 0 else info.max,
            "overflow-sum": info.max // 2 + 1}[corner]


def _random(t: torch.Tensor, magnitude: str, g: torch.Generator) -> torch.Tensor:
    real = t.real if t.is_complex() else t
    scale = MAGNITUDES[magnitude]
    if scale is None:  # near overflow: a quarter to a half of the largest finite value
        top = torch.finfo(real.dtype).max
        u = torch.rand(t.shape, generator=g, dtype=torch.float64)
        sign = torch.where(torch.rand(t.shape, generator=g) < 0.5, -1.0, 1.0).double()
        return (sign * top * (0.25 + 0.25 * u)).to(t.dtype)
    return (torch.randn(t.shape, generator=g, dtype=torch.float64) * scale).to(t.dtype)


def _special(t: torch.Tensor, value: str, pattern: str, g: torch.Generator) -> torch.Tensor:
    real = t.real if t.is_complex() else t
    v = torch.finfo(real.dtype).smallest_normal / 4 if value == "subnormal" else SPECIALS[value]
    out = t.clone()
    if value == "-0.0" and pattern == "single":
        out = torch.where(out == 0, torch.full_like(out, -0.0), out)  # every zero signed, and one more
    if pattern == "single" or out.dim() == 0:
        flat = out.reshape(-1)
        flat[int(torch.randint(flat.numel(), (1,), generator=g))] = v
        return flat.reshape(t.shape)
    if pattern == "row":  # one index of the second-to-last dim: a whole row (the last dim)
        dim = max(0, out.dim() - 2)
    elif pattern == "channel":
        dim = 1 if out.dim() >= 2 else 0
    else:  # a window: a run of up to eight along the last dim, at one place of the others
        dim = out.dim() - 1
        start = int(torch.randint(max(1, out.shape[dim] - 7), (1,), generator=g))
        index = tuple(int(torch.randint(s, (1,), generator=g)) for s in out.shape[:-1])
        out[index + (slice(start, start + 8),)] = v
        return out
    out.select(dim, int(torch.randint(out.shape[dim], (1,), generator=g))).fill_(v)
    return out


def resize_dims(text: str) -> list[tuple[int, int]]:
    return [tuple(int(x) for x in part.split(".")) for part in text.split(",")]


def resized(inputs: tuple, input_roles: list[str], params: dict, g: torch.Generator) -> tuple:
    """The inputs with each named (input, dim) at ``length``: cut short, or the example's values repeated
    along it (an index stays valid) with numbers and masks past the example's length drawn afresh (a
    kernel that wraps around to the start reads values other than the right ones)."""
    out = list(inputs)
    for i, d in resize_dims(params["dims"]):
        out[i] = _stretched(out[i].detach().cpu(), d, params["length"], input_roles[i], g)
    return tuple(t.to(inputs[i].device) if isinstance(t, torch.Tensor) else t for i, t in enumerate(out))


def _stretched(t: torch.Tensor, dim: int, length: int, role: str, g: torch.Generator) -> torch.Tensor:
    n = t.shape[dim]
    if length <= n:
        return t.narrow(dim, 0, length).contiguous()
    out = t.index_select(dim, torch.arange(length) % n)
    if role == "index" or not t.numel():
        return out
    shape = list(t.shape)
    shape[dim] = length - n
    if role == "mask":
        fresh = torch.rand(shape, generator=g) < 0.5
    elif role == "integer":
        lo, hi = int(t.min()), int(t.max())
        fresh = torch.randint(lo, hi + 1, shape, generator=g, dtype=torch.int64) if hi > lo else torch.full(shape, lo)
    else:
        finite = t[torch.isfinite(t)].abs() if not t.is_complex() else t.abs()
        scale = float(finite.max()) if finite.numel() and float(finite.max()) > 0 else 1.0
        fresh = torch.randn(shape, generator=g, dtype=torch.float64) * scale
    out.narrow(dim, n, length - n).copy_(fresh.to(t.dtype))
    return out


def run_probes(call, inputs: tuple, input_roles: list[str], probes: list[Probe]) -> list[ProbeRun]:
    """Each probe through ``call(inputs) -> host outputs`` (the prepared backend); what one raises is its result."""
    from gapfuzz.core.failures import describe, status_of_error
    from gapfuzz.core.ir import checksum

    runs = []
    for probe in probes:
        fed = make_inputs(inputs, input_roles, probe)
        sums = checksum((str(i), t) for i, t in enumerate(fed) if isinstance(t, torch.Tensor))
        t0 = time.perf_counter()
        try:
            outputs = call(fed)
        except Exception as e:  # noqa: BLE001 - anything a backend raises is a record
            d = describe(e)
            runs.append(ProbeRun(probe, None, status_of_error(d["error_type"], d["message"]), d["error_type"],
                                 d["message"], time.perf_counter() - t0, sums))
            continue
        runs.append(ProbeRun(probe, outputs, run_s=time.perf_counter() - t0, input_checksum=sums))
    return runs

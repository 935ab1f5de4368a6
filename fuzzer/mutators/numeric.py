"""Numeric corners: extreme magnitudes, NaN/Inf/denormals/-0.0, exact ties, perturbed weights.

These are where the study found stacks differ most (saturation modes, exceptional values,
tie-breaking); their variants may legitimately produce non-finite outputs.
"""
from __future__ import annotations

import math

import torch

from gapfuzz.fuzzer.mutators import register_mutator
from gapfuzz.fuzzer.mutators.base import Mutator, Rejected, Rewrite, aten, call_nodes, dtype_of, pick

SPECIAL = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf, "-0.0": -0.0, "denormal": None}
TIE_CONSUMERS = {aten.argmax.default, aten.argmin.default, aten.sort.default, aten.sort.stable, aten.topk.default,
                 aten.max.dim, aten.min.dim, aten.kthvalue.default, aten.median.dim, aten.mode.default,
                 aten.argsort.default, aten.argsort.stable}


def _float_targets(variant, weights: bool = True, inputs: bool = True) -> list[str]:
    """``input:<i>`` and ``weight:<name>`` for every floating tensor the variant holds."""
    out = [f"input:{i}" for i, t in enumerate(variant.inputs) if inputs and t.is_floating_point() and t.numel()]
    if weights:
        out += [f"weight:{n}" for n, t in sorted(variant.tensors().items()) if t.is_floating_point() and t.numel()]
    return out


def _get(rw: Rewrite, target: str) -> torch.Tensor:
    kind, _, key = target.partition(":")
    return rw.inputs[int(key)] if kind == "input" else rw.tensor(key)


def _put(rw: Rewrite, target: str, value: torch.Tensor) -> None:
    kind, _, key = target.partition(":")
    if kind == "input":
        rw.inputs = tuple(value if i == int(key) else t for i, t in enumerate(rw.inputs))
    else:
        rw.set_tensor(key, value)


class _TensorEdit(Mutator):
    """Edit one input or weight tensor (a copy); the graph is unchanged."""

    family = "numeric"
    numeric = True
    weights = inputs = True

    def propose(self, variant, rng):
        target = pick(rng, _float_targets(variant, self.weights, self.inputs))
        return None if target is None else {"target": target, **self.draw(variant, target, rng)}

    def draw(self, variant, target, rng) -> dict:
        return {}

    def apply(self, variant, params):
        rw = Rewrite(variant)
        if params["target"] not in _float_targets(variant, self.weights, self.inputs):
            raise Rejected(f"no floating tensor {params['target']}")
        _put(rw, params["target"], self.edit(_get(rw, params["target"]).clone(), params))
        return rw.finish()

    def edit(self, t: torch.Tensor, params: dict) -> torch.Tensor:
        raise NotImplementedError


@register_mutator
class ScaleMagnitude(_TensorEdit):
    """Scale an input or weight by 10^k, |k| in 2..6: towards overflow or underflow."""

    name = "scale_magnitude"

    def draw(self, variant, target, rng):
        return {"exponent": rng.choice([-6, -4, -2, 2, 4, 6])}

    def edit(self, t, params):
        return t * 10.0 ** params["exponent"]


@register_mutator
class InjectSpecialValues(_TensorEdit):
    """Put NaN, +/-Inf, a denormal or -0.0 at a few positions of an input or weight."""

    name = "inject_special_values"

    def draw(self, variant, target, rng):
        n = variant.inputs[int(target[6:])].numel() if target.startswith("input:") else \
            variant.tensors()[target[7:]].numel()
        return {"value": rng.choice(sorted(SPECIAL)), "positions": sorted(rng.sample(range(n), min(n, 3)))}

    def edit(self, t, params):
        value = params["value"]
        v = torch.finfo(t.dtype).tiny / 4 if value == "denormal" else SPECIAL[value]
        flat = t.reshape(-1)
        flat[torch.tensor(params["positions"])] = v
        return flat.reshape(t.shape)


@register_mutator
class PerturbWeights(_TensorEdit):
    """Add seeded Gaussian noise to a weight, or shuffle it along its first dim (LEMON)."""

    name = "perturb_weights"
    inputs = False
    numeric = False

    def draw(self, variant, target, rng):
        return {"mode": rng.choice(["noise", "shuffle"]), "seed": rng.randrange(2**31), "sigma": 0.5}

    def edit(self, t, params):
        g = torch.Generator().manual_seed(params["seed"])
        if params["mode"] == "shuffle":
            return t[torch.randperm(t.shape[0], generator=g)] if t.dim() else t
        scale = t.float().std() if t.numel() > 1 else t.float().abs()
        noise = torch.randn(t.shape, generator=g) * params["sigma"] * float(scale if torch.isfinite(scale) else 1)
        return (t.float() + noise).to(t.dtype)


@register_mutator
class CreateTies(Mutator):
    """Round a tensor onto a coarse grid right before argmax/sort/topk (or a final output): exact ties."""

    name = "create_ties"
    family = "numeric"
    numeric = True
    differentiable = False  # rounds onto a grid: zero gradient, nothing of backward is tested

    def sites(self, variant):
        outputs = set(next(n for n in variant.gm.graph.nodes if n.op == "output").all_input_nodes)
        return [n for n in call_nodes(variant) if (dtype_of(n) or torch.int64).is_floating_point
                and (any(u.target in TIE_CONSUMERS for u in n.users) or n in outputs)]

    def draw(self, site, rng):
        return {"grid": rng.choice([0.5, 1.0, 4.0])}

    def build(self, rw, x, params):
        grid = params["grid"]
        return rw.call(aten.mul.Tensor, rw.call(aten.round.default, rw.call(aten.div.Tensor, x, grid)), grid)

"""A reduction judged by its error bound, not by its result's magnitude.

A sum of n float32 terms whose magnitudes add up to S may legitimately land anywhere within about
sqrt(n) * u * S of the exact sum (u the unit roundoff; the probabilistic bound of Higham and Mary,
which a blocked, pairwise or sequential order all meet): a stack that sums in another order (a
fused kernel, a split reduction, a Gemm that starts from its bias) is no worse than eager for
differing by that much, however small the result is against S. The float64 oracle gives both n and
S: the operator applied to the absolute values of its operands for one linear in them (sums,
means, products of matrices, convolutions, a negative log-likelihood), the result itself for one
whose terms are never negative (norms, squared and absolute errors). ``within_bound`` is the check;
tier 2 (``workers.judge.align``) applies it at a located reduction whose operands agree, and the
judging chain to a training run's loss (``loss_within_bound``), which eager sums over every output.
"""
from __future__ import annotations

import math

import torch
from torch.utils._pytree import tree_map

from gapfuzz.core.tolerances import Tolerances
from gapfuzz.workers.judge.compare import compare
from gapfuzz.workers.run.training import LOSS, projection

aten = torch.ops.aten
# the terms' magnitudes: the op on the absolute values of its floating operands (it is linear in each)
LINEAR = {aten.sum.default, aten.sum.dim_IntList, aten.nansum.default, aten.mean.default, aten.mean.dim,
          aten.mm.default, aten.bmm.default, aten.addmm.default, aten.baddbmm.default, aten.matmul.default,
          aten.linear.default, aten.mv.default, aten.addmv.default, aten.dot.default, aten.cumsum.default,
          aten.convolution.default, aten.conv1d.default, aten.conv2d.default, aten.conv3d.default,
          aten._convolution.default, aten.nll_loss_forward.default, aten.nll_loss.default}
# terms never negative: the result is their magnitude
NONNEGATIVE = {aten.linalg_vector_norm.default, aten.norm.Scalar, aten.norm.ScalarOpt_dim, aten.mse_loss.default,
               aten.l1_loss.default, aten.smooth_l1_loss.default, aten.huber_loss.default,
               aten.binary_cross_entropy.default, aten.binary_cross_entropy_with_logits.default,
               aten.soft_margin_loss.default}
AVERAGES = {aten.mean.default, aten.mean.dim}  # n is the terms per element; the op on ones gives 1


def reduces(target) -> bool:
    """Whether ``target`` sums several terms into each element of its result."""
    return target in LINEAR or target in NONNEGATIVE


def _first(value):
    return value[0] if isinstance(value, (tuple, list)) else value


def _floats(fn, args):
    return tree_map(lambda a: fn(a) if isinstance(a, torch.Tensor) and a.is_floating_point() else a, args)


def magnitudes(target, args: tuple, kwargs: dict, result: torch.Tensor) -> tuple[torch.Tensor, float]:
    """The terms' magnitudes summed (averaged, for a mean) into each element of ``result`` and how many
    terms each sums (the most of any element), from float64 operands ``args``."""
    if target in NONNEGATIVE:
        first = next(a for a in args if isinstance(a, torch.Tensor))
        return result.abs(), max(1.0, first.numel() / max(result.numel(), 1))
    mag = _first(target(*_floats(torch.abs, args), **_floats(torch.abs, kwargs))).abs()
    if target in AVERAGES:
        return mag, max(1.0, args[0].numel() / max(result.numel(), 1))
    count = _first(target(*_floats(torch.ones_like, args), **_floats(torch.ones_like, kwargs)))
    return mag, max(1.0, float(count.abs().max()) if count.numel() else 1.0)


def bound(oracle: torch.Tensor, mag: torch.Tensor, n: float, dtype: torch.dtype, s: Tolerances) -> torch.Tensor:
    """How far from the float64 ``oracle`` a ``dtype`` result of n terms of magnitude ``mag`` may lie: the
    dtype's tolerance plus sqrt(n) unit roundoffs of the magnitudes."""
    rtol, atol = s.tol(dtype)
    u = torch.finfo(dtype).eps / 2 if dtype.is_floating_point else 0.0
    return atol + rtol * oracle.abs() + math.sqrt(n) * u * mag


def within_bound(value, oracle, mag: torch.Tensor, n: float, s: Tolerances) -> float | None:
    """The largest error of ``value`` against ``oracle`` in units of the bound, when it is within it
    (NaN and Inf where the oracle has them); None when it is not, or is no float tensor."""
    if not (isinstance(value, torch.Tensor) and value.is_floating_point() and isinstance(oracle, torch.Tensor)
            and value.shape == oracle.shape):
        return None
    v, o = value.detach().cpu().double(), oracle.detach().cpu().double()
    finite = torch.isfinite(o)
    if not torch.equal(torch.isfinite(v), finite) or not torch.equal(v[~finite].nan_to_num(), o[~finite].nan_to_num()):
        return None
    allowed = bound(o, mag.double().cpu().expand_as(o), n, value.dtype, s)[finite]
    err = (v[finite] - o[finite]).abs()
    ratio = float((err / allowed.clamp_min(torch.finfo(torch.float64).tiny)).max()) if err.numel() else 0.0
    return ratio if ratio <= 1.0 else None


def node_within_bound(node, value, oracle: dict, s: Tolerances) -> float | None:
    """For a reduction node: its target ``value`` within the bound of the oracle's (``oracle``: node name ->
    float64 value, placeholders and weights too), in units of the bound; None otherwise."""
    if not reduces(node.target) or node.name not in oracle:
        return None
    ref = _first(oracle[node.name])
    fetch = lambda a: oracle[a.name] if isinstance(a, torch.fx.Node) else a  # noqa: E731
    args, kwargs = tree_map(fetch, node.args), tree_map(fetch, node.kwargs)
    try:
        with torch.no_grad():
            mag, n = magnitudes(node.target, args, kwargs, ref)
    except Exception:  # noqa: BLE001 - an operand this cannot take the magnitude of bounds nothing
        return None
    return within_bound(_first(value), ref, mag, n, s)


def loss_within_bound(out: list, ref: list, oracle: list | None, names: list, s: Tolerances) -> float | None:
    """A training run whose loss alone differs (every forward output and gradient agrees): the loss is eager's
    sum of each output's fixed projection (``workers.run.training.loss_of``) over all their elements, so
    outputs that each agree within tolerance move it by up to the projections' sum of those tolerances, and
    its own summation by the bound above. Its error over that allowance when within it; else None."""
    if LOSS not in names or len(out) != len(ref) or len(ref) != len(names):
        return None
    i = list(names).index(LOSS)
    rest = [j for j in range(len(names)) if j != i]
    if not isinstance(out[i], torch.Tensor) or not compare([out[j] for j in rest], [ref[j] for j in rest], s).passed:
        return None
    wide = oracle if oracle is not None and len(oracle) == len(ref) else ref
    allowed, mag, n = 0.0, 0.0, 0
    for k in range(i):
        r, o = ref[k], wide[k]
        if not (isinstance(r, torch.Tensor) and r.is_floating_point() and isinstance(o, torch.Tensor)):
            continue
        weights = projection(k, r.cpu()).double().abs()
        rtol, atol = s.tol(r.dtype)
        allowed += float((weights * (atol + rtol * r.detach().cpu().double().abs())).nan_to_num().sum())
        mag += float((weights * o.detach().cpu().double().abs()).nan_to_num().sum())
        n += r.numel()
    loss, expected = out[i].detach().cpu().double(), ref[i].detach().cpu().double()
    rtol, atol = s.tol(ref[i].dtype)
    u = torch.finfo(ref[i].dtype).eps / 2
    allowed += atol + rtol * float(expected.abs()) + 2 * math.sqrt(max(n, 1)) * u * mag
    err = float((loss - expected).abs())
    return err / allowed if math.isfinite(err) and err <= allowed else None


MAX_JACOBIAN = 1 << 22  # entries: a one-node Jacobian larger than this is too dear to take for a bound


def gradients_within_bound(gm, fed: tuple, out: list, oracle: list, s: Tolerances) -> float | None:
    """A one-node graph's gradients (``train_step``'s outputs after the forward and the loss: one per
    floating input of ``fed``) as the target gives them (``out``), each within the bound of the float64
    ``oracle``'s: a gradient sums the cotangent's terms through the node's Jacobian (an expand's backward
    sums over what it broadcast), so its terms' magnitudes are |J|^T |c| at float64. The largest error in
    units of the bound when every gradient is within it; else None."""
    floating = [i for i, t in enumerate(fed) if isinstance(t, torch.Tensor) and t.is_floating_point()]
    wide = tuple(t.double() if isinstance(t, torch.Tensor) and t.is_floating_point() else t for t in fed)
    first = _first(gm(*wide))
    cotangent = projection(0, first).double().abs().flatten()
    worst = 0.0
    for k, i in enumerate(floating):
        got, exact = out[2 + k], oracle[2 + k]
        if first.numel() * wide[i].numel() > MAX_JACOBIAN:
            return None

        def alone(x, i=i):
            return _first(gm(*wide[:i], x, *wide[i + 1:]))
        jac = torch.func.jacrev(alone)(wide[i]).reshape(first.numel(), wide[i].numel()).abs()
        mag = (cotangent @ jac).reshape(wide[i].shape)
        n = float((jac != 0).sum(0).max()) if jac.numel() else 1.0
        ratio = within_bound(got, exact, mag, max(n, 1.0), s)
        if ratio is None:
            return None
        worst = max(worst, ratio)
    return worst

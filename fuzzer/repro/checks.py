"""The functions a reproducer runs, copied into ``repro.py`` verbatim (``repro_code``), and only those its
check needs: a bug is shown by one plain check a vendor can read, not by the campaign's whole judge.

They take every setting as an argument, so the tests call them here as the reproducer does there.
``template`` is ``core.templates.template`` on Python's ``re`` (the reproducer has no pyarrow); a test
holds the two to the same answers.
"""
from __future__ import annotations

import re

import torch

from gapfuzz.core.templates import _RULES, MAX_CHARS

TEMPLATE_RULES = _RULES  # (pattern, replacement): core.templates' rules, in order


def exact(t, device):  # t on device with its sizes, strides and storage offset (clone densifies a gapped view)
    whole = torch.empty(0, dtype=t.dtype).set_(t.untyped_storage())
    return whole.to(device, copy=True).as_strided(t.shape, t.stride(), t.storage_offset())


def host(out):  # a call's outputs as a flat list, detached, on the CPU
    return [o.detach().cpu() if isinstance(o, torch.Tensor) else o for o in torch.utils._pytree.tree_leaves(out)]


def differs(name, actual, expected, tolerances):
    """Whether ``actual`` differs from ``expected`` beyond the (rtol, atol) of its dtype; prints the figures."""
    if not (isinstance(actual, torch.Tensor) and isinstance(expected, torch.Tensor)) or actual.shape != \
            expected.shape or actual.is_floating_point() != expected.is_floating_point():
        print(f"{name}: expected {getattr(expected, 'shape', expected)}, actual {getattr(actual, 'shape', actual)}")
        return isinstance(expected, torch.Tensor) or repr(actual) != repr(expected)
    rtol, atol = tolerances.get(str(expected.dtype).removeprefix("torch."), (0.0, 0.0))
    a, e = (x.to(torch.complex128 if expected.is_complex() else torch.float64) for x in (actual, expected))
    bad = ~torch.isclose(a, e, rtol, atol, equal_nan=True)
    err = float((a - e).abs().nan_to_num(0.0, 0.0, 0.0).max()) if a.numel() else 0.0  # where both are finite
    print(f"{name} ({expected.dtype}): max |actual - expected| {err:.6g} (tolerance {atol:g} + {rtol:g} |expected|),"
          f" {int(bad.sum())}/{bad.numel()} differ; NaNs: expected {int(e.isnan().sum())}, got {int(a.isnan().sum())}")
    for i in bad.nonzero()[:4].tolist():
        print(f"  at {tuple(i)}: expected {e[tuple(i)].item():.8g}, actual {a[tuple(i)].item():.8g}")
    return bool(bad.any())


def distance(x, oracle, tolerances):
    """How far outputs ``x`` are from the float64 ``oracle`` (cast to x's dtype), in x's tolerances."""
    worst = 0.0
    for a, o in zip(x, oracle):
        if isinstance(a, torch.Tensor) and a.is_floating_point():
            rtol, atol = tolerances.get(str(a.dtype).removeprefix("torch."), (0.0, 0.0))
            a, o = a.double(), o.to(a.dtype).double()
            if not torch.equal(a.isfinite(), o.isfinite()) or not torch.equal(a.isnan(), o.isnan()):
                return float("inf")
            both = a.isfinite()
            diff = (a - o)[both].abs()
            worst = max(worst, (diff / (atol + rtol * o[both].abs())).max().item() if diff.numel() else 0.0)
    return worst


def blame(actual, expected, oracle, tolerances, multiplier, far):
    """The campaign's verdict on a divergence: which of the two the float64 result is further from."""
    target, eager = distance(actual, oracle, tolerances), distance(expected, oracle, tolerances)
    print(f"distance from float64, in tolerances: the backend {target:.4g}, eager {eager:.4g}")
    if target > multiplier * eager + 1.0:
        return "target-divergent"
    if eager > multiplier * target + 1.0:
        return "reference-divergent"
    return "ill-conditioned" if target > far and eager > far else "agree"


def template(message, rules=TEMPLATE_RULES):
    """``message`` with what is incidental masked: numbers, shapes, names, paths (core.templates)."""
    text = (message or "")[:4000]
    for pattern, replacement in rules:
        text = re.sub(pattern, replacement, text, flags=re.ASCII)
    return text[:MAX_CHARS].strip()


def rules_used(message) -> list:
    """The rules that change ``message`` on its way to its template, in order (not copied)."""
    used, text = [], (message or "")[:4000]
    for pattern, replacement in TEMPLATE_RULES:
        new = re.sub(pattern, replacement, text, flags=re.ASCII)
        used += [(pattern, replacement)] if new != text else []
        text = new
    return used


def failure(e, error_type, expected_template):
    """1 when ``e`` is the failure the campaign found: its exception type and message template; else 3."""
    name = f"{type(e).__module__}.{type(e).__qualname__}".removeprefix("builtins.")
    found = template((str(e).strip() or repr(e))[:2000])
    print(f"raised {name}: {str(e)[:2000]}")
    if name == error_type and found == expected_template:
        print(f"the bug is present (the campaign's failure: {error_type}: {expected_template})")
        return 1
    print(f"a different failure: the campaign's was {error_type}: {expected_template}\nthis one is {name}: {found}")
    return 3

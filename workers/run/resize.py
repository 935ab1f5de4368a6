"""Resize probes: a stack compiled for dynamic shapes (``dynamic: true``) runs its compiled code at
sizes it was not traced at.

Code compiled with symbolic sizes computes loop bounds and masks from a symbol; a fault there shows
only when the same compile runs at another length. The graph is an export's, with sizes baked into its
views, so a length is varied only where the graph accepts it (``resize_probes``); the probe is then an
input set like any other (``workers.run.probes``), judged against eager on the same inputs.
"""
from __future__ import annotations

import fnmatch
import logging
import math

import torch
import torch.fx as fx

from gapfuzz.workers.run.probes import RESIZE, Probe, ProbeSettings, base_seed, kind, make_inputs, roles
from gapfuzz.workers.run.probes.kinds.resized import resize_dims

# a resize probe's lengths: one less, one more, and one past the first block above (a kernel's tail loop)
BLOCK_LENGTHS = (1025, 2049, 4097)
RESIZE_ELEMENTS = 1 << 21  # resized inputs past this many elements (and eight times the example's) are not made


def takes_resizes(options: dict) -> bool:
    """Whether a stack run with ``options`` gets resize probes: one compiled for dynamic shapes (``dynamic: true``)."""
    return bool(options.get("dynamic"))


def resize_probes(gm: fx.GraphModule, inputs: tuple, settings: ProbeSettings, variant_id: str) -> list[Probe]:
    """The variant's resize probes, when ``settings.resize`` asks for them: the same compiled callable fed
    inputs whose sizes of one length all take another.

    The graph is an export's: sizes are baked into its ``view``, ``expand`` and ``arange`` arguments and
    its weights' shapes, so a size is varied only where the graph provably accepts the new length (it
    runs on fake tensors of the new shapes, or, where an operator's output size depends on values, for
    real). Every size of one length (>= 2) varies together: Dynamo gives equal sizes one symbol (duck
    sizing) and 0 and 1 constants, so only such a change runs the code compiled for the example rather
    than a new compile. The lengths of the first input's first and last size are varied (the batch or an
    operator seed's main dimension, and the one a reduction or softmax most often runs along), each to
    one less, one more and one past the first block above it (``BLOCK_LENGTHS``), within
    ``RESIZE_ELEMENTS``."""
    if not settings.resize or not any(fnmatch.fnmatchcase(RESIZE, p) for p in settings.kinds):
        return []
    input_roles = roles(gm, inputs)
    seed, resize = base_seed(settings, variant_id), kind(RESIZE)
    out = []
    for group in _size_groups(inputs):
        n = inputs[group[0][0]].shape[group[0][1]]
        lengths = [m for m in (n - 1, n + 1, next((b for b in BLOCK_LENGTHS if b > n + 1), None)) if m and m >= 2]
        for length in lengths:
            params = {"dims": ",".join(f"{i}.{d}" for i, d in group), "length": length}
            probe = resize.probe(seed, params, len(out))
            if _within_budget(inputs, group, length) and _accepts(gm, inputs, input_roles, probe):
                out.append(probe)
    return out


def _size_groups(inputs: tuple) -> list[list[tuple[int, int]]]:
    """Each varied length's (input, dim) positions: every size of that length, in every tensor input."""
    at: dict[int, list] = {}
    for i, t in enumerate(inputs):
        for d, n in enumerate(t.shape if isinstance(t, torch.Tensor) else ()):
            if n >= 2:
                at.setdefault(n, []).append((i, d))
    first = next((t for t in inputs if isinstance(t, torch.Tensor) and any(n >= 2 for n in t.shape)), None)
    if first is None:
        return []
    sized = [n for n in first.shape if n >= 2]
    return [at[n] for n in dict.fromkeys((sized[0], sized[-1]))]  # its first and last size's lengths


def _resized_shapes(inputs: tuple, dims, length: int) -> list:
    shapes = [list(t.shape) if isinstance(t, torch.Tensor) else None for t in inputs]
    for i, d in dims:
        shapes[i][d] = length
    return shapes


def _within_budget(inputs: tuple, dims, length: int) -> bool:
    old = sum(t.numel() for t in inputs if isinstance(t, torch.Tensor))
    new = sum(math.prod(s) for s in _resized_shapes(inputs, dims, length) if s is not None)
    return new <= max(RESIZE_ELEMENTS, 8 * old)


def _accepts(gm: fx.GraphModule, inputs: tuple, input_roles: list[str], probe: Probe) -> bool:
    """Whether the graph runs on the probe's inputs: on fake tensors of their shapes, or for real where
    fake tensors cannot say (an output size that depends on values)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    params = dict(probe.params)
    shapes = _resized_shapes(inputs, resize_dims(params["dims"]), params["length"])
    quiet = logging.getLogger("torch._subclasses.fake_tensor")  # it logs each refusal as an error
    was, quiet.disabled = quiet.disabled, True
    try:
        with torch.no_grad(), FakeTensorMode(allow_non_fake_inputs=True):
            gm(*(torch.empty(s, dtype=t.dtype, device=t.device) if s is not None else t
                 for t, s in zip(inputs, shapes)))
        return True
    except Exception:  # noqa: BLE001 - a shape the graph refuses, or an operator fake tensors cannot run
        pass
    finally:
        quiet.disabled = was
    try:
        with torch.no_grad():
            gm(*make_inputs(inputs, input_roles, probe))
        return True
    except Exception:  # noqa: BLE001 - the graph refuses the size
        return False

"""PyTorch's own rule for a torch.compile result, checked before a divergence is called a vendor finding.

PyTorch's accuracy checks (its minifier, its benchmark harness, the reproducers it asks fuzzer reports
to carry) compare a compiled result with eager through ``torch._dynamo.utils.same``, with the float64
result as ``fp64_ref``, at its default tolerance: a compiled result no further from float64 than eager
is, in root-mean-square terms, passes however far apart the two float32 results are. gapfuzz's own rule
(every element within its dtype's tolerance, blamed with the oracle) is the stricter; an Inductor or
aot-eager divergence of values (not of a NaN/Inf pattern, which ``same`` lets pass where float64 overflows)
that passes PyTorch's is explained (``WITHIN_SAME``) rather than filed against it, and each such run
records which rule it met (``torch_same``).
"""
from __future__ import annotations

import logging

WITHIN_SAME = "within-torch-same"  # the explanation of a torch.compile divergence PyTorch's rule accepts
TORCH_COMPILERS = ("inductor", "aot_autograd")  # what a run's ``compiler`` is when torch.compile made it


def torch_same(out: list, ref: list, oracle: list | None) -> bool | None:
    """Whether ``same(ref, out, fp64_ref=oracle)`` accepts ``out`` at its default tolerance (NaN equal to
    NaN, as gapfuzz's tier 1 has it); None when there is no float64 result or ``same`` cannot compare them."""
    if oracle is None or len(oracle) != len(ref):
        return None
    from torch._dynamo.utils import log as dynamo_log
    from torch._dynamo.utils import same

    level = dynamo_log.level
    dynamo_log.setLevel(logging.CRITICAL)  # same logs every mismatch it finds at ERROR
    try:
        return bool(same(list(ref), list(out), fp64_ref=list(oracle), equal_nan=True))
    except Exception:  # noqa: BLE001 - outputs same cannot take (a structure it does not know) decide nothing
        return None
    finally:
        dynamo_log.setLevel(level)

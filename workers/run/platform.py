"""The platform's precision settings, applied around every run and recorded with it.

TF32 is not a property of a compiler: it is a setting of the platform (``torch.backends.cuda.matmul``
and ``torch.backends.cudnn``) that eager and every stack on the GPU obey alike, and PyTorch's default
turns it on for convolutions. A run therefore gets the strict mode (TF32 off, as PyTorch's own accuracy
tests run) unless its backend's options say ``tf32: true``; the option is the executor's, never the
stack's, so it can be an axis of a campaign (``option_space: {tf32: [false, true]}``) like any other.
Where TF32 is on, what went through a matrix product or a convolution is judged at TF32's precision
(10 mantissa bits, float16's tolerance) and a divergence that goes away with TF32 off is explained as
``tf32`` (``workers.run.runner``).
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass

TF32 = "tf32"
PLATFORM_OPTIONS = {TF32: bool}  # option -> its type: taken from a backend's options by the executor
# ATen ops (their packets) whose operands TF32 kernels round: matrix products and convolutions
TF32_OPS = ("aten.mm", "aten.bmm", "aten.matmul", "aten.addmm", "aten.baddbmm", "aten.addbmm", "aten.linear",
            "aten.convolution", "aten._convolution", "aten.conv1d", "aten.conv2d", "aten.conv3d",
            "aten.conv_transpose1d", "aten.conv_transpose2d", "aten.conv_transpose3d", "aten.einsum",
            "aten.tensordot", "aten.addmv", "aten.mv", "aten._scaled_dot_product")


@dataclass(frozen=True)
class Precision:
    """The platform's float32 precision for one run."""

    tf32: bool = False

    @classmethod
    def of(cls, options: dict) -> Precision:
        return cls(tf32=bool(options.get(TF32, False)))

    @contextlib.contextmanager
    def applied(self):
        """TF32 on or off for matrix products and convolutions while the block runs, restored after."""
        import torch

        matmul, cudnn = torch.backends.cuda.matmul, torch.backends.cudnn
        # cuDNN's flags refuse a plain set once torch.backends.disable_global_flags() ran (PyTorch's test
        # harness calls it); its own bracket, as cudnn.flags() uses, allows it
        bracket = getattr(torch.backends, "__allow_nonbracketed_mutation", contextlib.nullcontext)
        before = (matmul.allow_tf32, cudnn.allow_tf32)
        with bracket():
            matmul.allow_tf32, cudnn.allow_tf32 = self.tf32, self.tf32
        try:
            yield self
        finally:
            with bracket():
                matmul.allow_tf32, cudnn.allow_tf32 = before


def backend_options(options: dict) -> dict:
    """A backend's options without the platform's (what its stack's constructor takes)."""
    return {k: v for k, v in options.items() if k not in PLATFORM_OPTIONS}


def option_problem(options: dict) -> str | None:
    """What is wrong with the platform options among ``options`` (one phrase), or None."""
    for key, kind in PLATFORM_OPTIONS.items():
        if key in options and not isinstance(options[key], kind):
            return f"{key}: expected true or false, got {options[key]!r}"
    return None


def goes_through_tf32(ops) -> bool:
    """Whether a graph holding ``ops`` (ATen names with overloads) has an op TF32 kernels compute."""
    return any(str(op).rsplit(".", 1)[0] in TF32_OPS or str(op) in TF32_OPS for op in ops)

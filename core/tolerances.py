"""What a comparison allows, per dtype, and the oracle's margins: one setting read by the campaign, the
workers' messages, the judge and the reproducers alike, so it lives below all of them."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

# torch.testing's defaults (rtol, atol); integers and bools compare exactly.
DEFAULT_TOLERANCES = {
    "float64": (1e-7, 1e-7), "float32": (1.3e-6, 1e-5), "float16": (1e-3, 1e-5),
    "bfloat16": (1.6e-2, 1e-5), "complex64": (1.3e-6, 1e-5), "complex128": (1e-7, 1e-7),
}


@dataclass
class Tolerances:
    """What a comparison allows: (rtol, atol) per dtype, and the oracle margins of attribution."""

    tolerances: dict = field(default_factory=lambda: dict(DEFAULT_TOLERANCES))
    multiplier: float = 3.0  # target blamed when its oracle error exceeds multiplier x the reference's + 1
    far: float = 1000.0  # both sides this many tolerances from the oracle: ill-conditioned
    dtype_bound_ops: tuple = ()  # more operators judged without the oracle (consensus.DTYPE_BOUND_OPS)

    @classmethod
    def from_dict(cls, d: dict | None) -> Tolerances:
        d = dict(d or {})
        tols = dict(DEFAULT_TOLERANCES)
        tols.update({k: tuple(v) for k, v in (d.pop("tolerances", None) or {}).items()})
        return cls(tolerances=tols, dtype_bound_ops=tuple(d.pop("dtype_bound_ops", None) or ()), **d)

    def tol(self, dtype: torch.dtype | str) -> tuple[float, float]:
        return self.tolerances.get(str(dtype).removeprefix("torch."), (0.0, 0.0))

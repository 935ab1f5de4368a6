"""What a seed declares about itself, and a built seed ready for capture."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

import torch

from gapfuzz.core.files import cache_dir  # noqa: F401 (where seeds' caches live)


@dataclass
class SeedInfo:
    """Static facts about a seed; every field lands in the records and the catalog."""

    id: str
    source: str
    family: str = ""
    task: str = ""
    output_kind: str = "tensor"  # class_logits, token_logits, hidden_states, boxes, masks, flow, tensor
    input_spec: list = field(default_factory=list)  # [[name, shape, dtype], ...]
    params: int | None = None
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class BuiltSeed:
    """A model with seeded random weights and the example inputs it expects."""

    info: SeedInfo
    model: torch.nn.Module
    args: tuple
    kwargs: dict = field(default_factory=dict)


def input_spec_of(args: tuple, kwargs: dict) -> list:
    named = [(f"arg{i}", a) for i, a in enumerate(args)] + list(kwargs.items())
    return [[n, list(t.shape), str(t.dtype).removeprefix("torch.")] for n, t in named if isinstance(t, torch.Tensor)]


def count_params(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())

"""Tensors to and from the host arrays that ONNX Runtime and OpenVINO take, bfloat16 included."""
from __future__ import annotations

import numpy as np
import torch


def to_numpy(t: torch.Tensor) -> np.ndarray:
    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:
        import ml_dtypes

        return t.view(torch.uint16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


def from_numpy(a) -> torch.Tensor:
    a = np.asarray(a)
    if a.dtype.name == "bfloat16":
        return torch.from_numpy(a.view(np.uint16).copy()).view(torch.bfloat16)
    return torch.from_numpy(a.copy())


def placeholder_names(gm) -> list[str]:
    """The names ``forward`` takes, which exporters give the model's inputs: a placeholder's target.
    Its node name can differ (``input`` becomes ``input_1``, the builtin being taken)."""
    return [n.target for n in gm.graph.nodes if n.op == "placeholder"]

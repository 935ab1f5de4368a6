"""CUDA backends on a real GPU (skipped, with the reason, where torch sees none)."""
from __future__ import annotations

import pytest
import torch

from workers.compare import Settings, attribute
from workers.executor import Executor
from workers.registry import parse_backend

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(),
                                                  reason="no CUDA device visible to torch on this machine")]


@pytest.mark.parametrize("backend", ["eager@cuda", "inductor@cuda", "aot-inductor@cuda"])
def test_cuda_backend_agrees_with_the_cpu(captured_vit, backend):
    ex = Executor()
    ex.load("v", captured_vit.variant.to_payload())
    ref = ex.run("v", parse_backend("eager@cpu").to_dict())
    oracle = ex.run("v", parse_backend("eager-fp64@cpu").to_dict())
    out = ex.run("v", parse_backend(backend).to_dict())
    assert out["status"] == "ok", out.get("message")
    verdict = attribute(out["outputs"], ref["outputs"], oracle["outputs"], Settings())
    assert verdict.verdict in ("agree", "reference-divergent"), verdict.columns()

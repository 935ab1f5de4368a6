"""CUDA backends on a real GPU, inference and training (skipped, with the reason, where torch sees none)."""
from __future__ import annotations

import dataclasses

import pytest
import torch

from core.bugs import Mode, Status, Verdict
from workers.compare import Tolerances, attribute
from workers.executor import Executor
from workers.registry import parse_backend

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(),
                                                  reason="no CUDA device visible to torch on this machine")]


def _agrees(variant, backend: str) -> None:
    ex = Executor()
    ex.load("v", variant.to_payload())
    ref, oracle, out = (ex.run("v", parse_backend(b), repeats=1) for b in ("eager@cpu", "eager-fp64@cpu", backend))
    assert out.outcome.status == Status.OK, out.outcome.message
    verdict = attribute(out.outputs, ref.outputs, oracle.outputs, Tolerances())
    assert verdict.verdict in (Verdict.AGREE, Verdict.REFERENCE_DIVERGENT), verdict.columns()


@pytest.mark.parametrize("backend", ["eager@cuda", "inductor@cuda", "aot-inductor@cuda"])
def test_cuda_backend_agrees_with_the_cpu(captured_vit, backend):
    _agrees(captured_vit.variant, backend)


@pytest.mark.parametrize("backend", ["eager@cuda", "aot-eager@cuda", "inductor@cuda"])
def test_a_cuda_training_run_agrees_with_the_cpu_in_every_gradient(captured_vit, backend):
    _agrees(dataclasses.replace(captured_vit.variant, mode=Mode.TRAINING), backend)

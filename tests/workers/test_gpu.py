"""CUDA backends on a real GPU, inference and training (skipped, with the reason, where torch sees none).

Every run is in a sandbox process (``workers.run.sandbox``), never in pytest's: a stack that kills its process
(AOTInductor's package loader died of SIGSEGV on one machine) fails its own test, naming the signal, and the
rest of ``pytest -m gpu`` runs on. ``tests/workers/test_gpu_isolation.py`` proves the helper on the CPU.
"""
from __future__ import annotations

import dataclasses
import os

import pytest
import torch

from gapfuzz.core.bugs import Status, Verdict
from gapfuzz.core.modes import Mode
from gapfuzz.core.tolerances import Tolerances
from gapfuzz.workers.judge.compare import attribute
from gapfuzz.workers.run.executor import Executor
from gapfuzz.workers.run.pool import sandbox_env
from gapfuzz.workers.run.registry import BackendSpec, parse_backend
from gapfuzz.workers.run.sandbox import Fault, Sandbox

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(),
                                                  reason="no CUDA device visible to torch on this machine")]
RUN_LIMIT_S = 900.0  # an AOTInductor compile of a training-size model takes minutes


def disagreement(variant, backend: str | BackendSpec, timeout_s: float = RUN_LIMIT_S) -> str | None:
    """Why ``backend`` does not agree with eager on the CPU on ``variant`` (its process died, it failed, or
    its outputs diverge), None when it agrees; every run in a sandbox process that may die."""
    target = backend if isinstance(backend, BackendSpec) else parse_backend(backend)
    sb = Sandbox(threads=min(4, os.cpu_count() or 1), keep_spare=False,  # a CUDA stack compiles as a worker's does
                 env=sandbox_env(target.device, None, None, os.cpu_count() or 1))
    try:
        loaded = sb.request(Executor.load, "v", variant.to_payload(), timeout=timeout_s)
        if isinstance(loaded, Fault):
            return f"the sandbox died loading the variant ({loaded.cause}):\n{loaded.message[:1500]}"
        runs = []
        for spec in (parse_backend("eager@cpu"), parse_backend("eager-fp64@cpu"), target):
            reply = sb.request(Executor.run, "v", spec, 1, timeout=timeout_s)
            if isinstance(reply, Fault):
                frames = reply.message.split("\nExtension modules")[0]  # faulthandler's frames, not its module list
                return f"{spec.name} ended its process ({reply.status}, {reply.cause}):\n{frames[:1500]}"
            if reply.outcome.status != Status.OK:
                o = reply.outcome
                return f"{spec.name}: {o.status} at {o.stage}: {o.error_type}: {(o.message or '')[:1500]}"
            runs.append(reply)
    finally:
        sb.close()
    ref, oracle, out = runs
    verdict = attribute(out.outputs, ref.outputs, oracle.outputs, Tolerances())
    if verdict.verdict in (Verdict.AGREE, Verdict.REFERENCE_DIVERGENT):
        return None
    return f"{target.name}: {verdict.verdict} {verdict.columns()}"


def _agrees(variant, backend: str) -> None:
    why = disagreement(variant, backend)
    if why is not None:
        pytest.fail(why, pytrace=False)


@pytest.mark.parametrize("backend", ["eager@cuda", "inductor@cuda", "aot-inductor@cuda"])
def test_cuda_backend_agrees_with_the_cpu(captured_vit, backend):
    _agrees(captured_vit.variant, backend)


@pytest.mark.parametrize("backend", ["eager@cuda", "aot-eager@cuda", "inductor@cuda"])
def test_a_cuda_training_run_agrees_with_the_cpu_in_every_gradient(captured_vit, backend):
    _agrees(dataclasses.replace(captured_vit.variant, mode=Mode.TRAINING), backend)

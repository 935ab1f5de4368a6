"""What GPU work relies on, checked on the CPU. The GPU tests' helper: a backend that kills its process fails
its own test, with the signal named, and the test process lives on to run the next; a healthy backend agrees
through the same helper. A CUDA pool: ``workers: auto`` on one machine sized from its GPUs' free memory and
its cores, and its sandboxes started with Inductor's parallel compile and one compile cache."""
from __future__ import annotations

import os

import pytest
import torch

from gapfuzz.fuzzer.config.campaign import from_dict
from gapfuzz.seeds.capture import capture
from gapfuzz.seeds.spec import BuiltSeed, SeedInfo
from gapfuzz.workers.run.executor import Executor
from gapfuzz.workers.run.pool import AUTO, GpuReading, cuda_workers_per_gpu, parse_smi, sandbox_env
from gapfuzz.workers.run.registry import BackendSpec
from gapfuzz.workers.run.sandbox import Sandbox

from .test_gpu import disagreement

SEGV = BackendSpec("segv-on-prepare", "cpu", cls_path="tests.stacks.segv_backend:SegvOnPrepare")


@pytest.fixture(scope="module")
def linear():
    """An ATen graph of one Linear layer, as a capture makes it."""
    return capture(BuiltSeed(SeedInfo(id="test/linear", source="test"), torch.nn.Linear(4, 3),
                             (torch.ones(2, 4),))).variant


def test_a_backend_that_kills_its_process_fails_with_the_signal_named(linear):
    pid = os.getpid()
    why = disagreement(linear, SEGV, timeout_s=120)
    assert why is not None and why.startswith("segv-on-prepare@cpu ended its process (crash, signal:SIGSEGV)"), why
    assert "segv_backend.py" in why and "Extension modules" not in why  # the frames it died in, no more
    assert os.getpid() == pid


def test_a_healthy_backend_agrees_through_the_same_helper(linear):
    assert disagreement(linear, "eager@cpu", timeout_s=120) is None


def test_a_backend_that_raises_fails_with_its_error(linear):
    faulty = BackendSpec("faulty", "cpu", {"fault": "raise"}, cls_path="tests.stacks.faulty_backend:Faulty")
    why = disagreement(linear, faulty, timeout_s=120)
    assert why is not None and why.startswith("faulty@cpu: error") and "refused this graph" in why, why


@pytest.mark.parametrize("cores, free_gb, per_gpu", [
    (16, [139.0], 8),  # an H200 on 16 cores: half the cores
    (16, [10.0], 2),  # a GPU mostly taken by others: what its free memory holds
    (16, [80.0, 80.0], 4),  # two GPUs share the cores
    (16, [80.0, 3.0], 1),  # the fullest GPU decides
    (2, [80.0], 1),
    (1, [], 1),
])
def test_cuda_workers_per_gpu_follow_the_cores_and_the_free_memory(cores, free_gb, per_gpu):
    assert cuda_workers_per_gpu(cores, free_gb) == per_gpu


def test_an_auto_cuda_pool_on_one_machine_becomes_workers_that_share_each_gpu():
    c = from_dict({"seeds": [{"source": "timm", "include": ["test_resnet"]}],
                   "backends": {"targets": ["eager@cuda"], "skip_unavailable": True},
                   "pools": {"cuda": {"workers": "auto"}, "cpu": {"workers": "auto"}}}, "c.yaml")
    one = c.pool("cuda").on_one_machine(16, [139.0])
    assert (one.workers, one.gpus_per_worker, one.actor_options()["num_gpus"]) == (8, 0.125, 0.125)
    three = c.pool("cuda").on_one_machine(6, [80.0])
    assert three.workers == 3 and 3 * three.gpus_per_worker <= 1 < 3 * three.gpus_per_worker + 1e-3
    two = c.pool("cuda").on_one_machine(16, [80.0, 80.0])
    assert (two.workers, two.gpus_per_worker) == (8, 0.25)
    assert c.pool("cuda").on_one_machine(16, []).workers == AUTO  # nothing read: Ray's GPU count decides
    assert c.pool("cpu").on_one_machine(16, [139.0]).workers == AUTO


def test_nvidia_smi_readings_are_parsed_and_unknowns_left_out():
    got = parse_smi("87, 142336\n[N/A], 1024\n\nNo devices were found\n")
    assert got == [GpuReading(87.0, 139.0), GpuReading(None, 1.0)]


def _inductor_settings() -> tuple:
    from torch._inductor import config
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    return config.compile_threads, cache_dir()


def test_a_cuda_workers_sandbox_compiles_in_parallel_into_the_machines_one_cache():
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    assert sandbox_env("cpu", {"A": "1"}, None, 16) == {"A": "1"}  # a CPU pool: one compile thread per worker
    assert sandbox_env("cuda", {"TORCHINDUCTOR_COMPILE_THREADS": "1"}, 0.5, 16)["TORCHINDUCTOR_COMPILE_THREADS"] == "1"
    env = sandbox_env("cuda", None, 0.25, 16)  # four workers on this GPU: a quarter of the cores each
    assert env == {"TORCHINDUCTOR_COMPILE_THREADS": "4", "TORCHINDUCTOR_CACHE_DIR": cache_dir()}
    sb = Sandbox(env=env, keep_spare=False)
    try:
        assert sb.request(Executor.call, _inductor_settings, (), {}, timeout=120) == (4, cache_dir())
    finally:
        sb.close()

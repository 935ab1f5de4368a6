"""A sandbox turns every way a process can die into a Fault, and comes back for the next request."""
from __future__ import annotations

import multiprocessing
import os
from pathlib import Path

import numpy as np
import pytest

from gapfuzz.workers.run import pipe
from gapfuzz.workers.run.executor import Executor
from gapfuzz.workers.run.registry import BackendSpec
from gapfuzz.workers.run.sandbox import Fault, RemoteError, Sandbox
from tests.helpers import fault_helpers


@pytest.fixture(scope="module")
def sandbox():
    sb = Sandbox(memory_limit_gb=1.0)
    yield sb
    sb.close()


def _call(sb, name, timeout=60.0):
    return sb.request(Executor.call, getattr(fault_helpers, name), (), {}, timeout=timeout)


def test_reply_and_restart_after_each_fault(sandbox):
    assert sandbox.request(Executor.call, fault_helpers.echo, (5,), {}) == 5
    cases = {"segfault": ("crash", "signal:SIGSEGV"), "abort": ("crash", "signal:SIGABRT"),
             "hog_memory": ("oom", "limit:memory 1.0GiB")}
    for name, (status, cause) in cases.items():
        fault = _call(sandbox, name)
        assert isinstance(fault, Fault), name
        assert (fault.status, fault.cause) == (status, cause)
        if status == "crash":  # the message is where in Python it died, not what was printed before
            assert fault.message.startswith("Fatal Python error") and f"in {name}" in fault.message
        assert sandbox.request(Executor.call, fault_helpers.echo, (name,), {}) == name


def test_hang_ends_at_the_timeout(sandbox):
    fault = _call(sandbox, "hang", timeout=2.0)
    assert isinstance(fault, Fault) and fault.status == "timeout" and fault.cause == "limit:timeout 2s"
    assert sandbox.request(Executor.ping) > 0


def test_an_exception_is_reported_not_fatal(sandbox):
    with pytest.raises(RemoteError, match="bad value 42"):
        _call(sandbox, "raise_value_error")
    assert sandbox.alive()


def _spill_files() -> set:
    return {p.name for p in Path(pipe._SHM).glob("gapfuzz-*")}


def test_large_buffers_cross_both_ways_writable_and_leave_no_file(sandbox):
    before = _spill_files()
    big = np.arange(3 * pipe.SPILL_BYTES // 8, dtype=np.float64)
    small = np.arange(10, dtype=np.int32)
    back = sandbox.request(Executor.call, fault_helpers.echo, ({"big": big, "small": small},), {})
    assert np.array_equal(back["big"], big) and np.array_equal(back["small"], small)
    assert back["big"].flags.writeable  # a backend may write into what it received
    back["big"][0] = -1.0
    assert big[0] == 0.0
    assert _spill_files() == before


def test_a_region_sent_twice_is_written_once_and_arrives_intact(monkeypatch):
    """A seed's variants share their unchanged weights: a build reply holds each region once."""
    shared = np.random.default_rng(0).random(pipe.SPILL_BYTES // 8)  # 1 MiB
    other = np.arange(shared.size, dtype=np.float64)
    sizes = []
    real_spill = pipe._spill

    def spill(raws):
        path, offsets = real_spill(raws)
        sizes.append(os.path.getsize(path))
        return path, offsets

    monkeypatch.setattr(pipe, "_spill", spill)
    reader, writer = multiprocessing.Pipe(duplex=False)
    pipe.send(writer, [shared, shared[:], other, shared])  # the same bytes through three arrays
    back = pipe.recv(reader)
    assert sizes == [2 * shared.nbytes]
    assert all(np.array_equal(b, a) for b, a in zip(back, [shared, shared, other, shared]))


def test_a_large_request_to_a_process_that_dies_leaves_no_file(sandbox):
    before = _spill_files()
    big = np.zeros(2 * pipe.SPILL_BYTES, dtype=np.uint8)
    fault = sandbox.request(Executor.call, fault_helpers.segfault, (big,), {}, timeout=60.0)
    assert isinstance(fault, Fault) and fault.status == "crash"
    assert _spill_files() == before


def _linear_payload() -> dict:
    """An ATen graph of one Linear layer, as a capture makes it."""
    import torch

    from gapfuzz.seeds.capture import capture
    from gapfuzz.seeds.spec import BuiltSeed, SeedInfo

    return capture(BuiltSeed(SeedInfo(id="test/linear", source="test"), torch.nn.Linear(4, 3),
                             (torch.ones(2, 4),))).variant.to_payload()


def test_a_backend_that_writes_its_weights_never_changes_what_the_next_one_gets():
    torch = pytest.importorskip("torch")
    payload = _linear_payload()
    ex = Executor()
    ex.load("v", payload)
    eager = BackendSpec("eager", "cpu")
    zero = BackendSpec("zero-weights", "cpu", cls_path="tests.stacks.numeric_backends:ZeroWeights")
    before = ex.run("v", eager).outputs
    assert ex.run("v", zero).outputs[0].abs().sum() == 0
    after = ex.run("v", eager).outputs
    assert torch.equal(before[0], after[0]) and before[0].abs().sum() > 0


@pytest.mark.parametrize("cls, stage, says", [("RefusesToStart", "compile", "could not start its runtime"),
                                              ("InputsNowhere", "convert", "nowhere")])
def test_a_backend_that_fails_before_it_prepares_is_recorded_as_its_own_error(cls, stage, says):
    """Creating the backend or placing its inputs fails as itself, at its stage (not an UnboundLocalError)."""
    ex = Executor()
    ex.load("v", _linear_payload())
    out = ex.run("v", BackendSpec(cls, "cpu", cls_path=f"tests.stacks.faulty_backend:{cls}")).outcome
    assert (out.status, out.stage, out.error_type) == ("error", stage, "RuntimeError")
    assert says in out.message and out.compiler_passes == []


def test_a_variant_the_sandbox_built_runs_there_without_its_payload(sandbox):
    from gapfuzz.workers.run.messages import RunRequest
    from gapfuzz.workers.run.runner import run_variant
    from tests.helpers.judging import judge_settings

    payload = _linear_payload()
    sandbox.request(Executor.call, fault_helpers.as_built, (payload,), {}, keep_payloads=True)
    fetched = []

    def fetch():
        fetched.append(1)
        return payload
    request = RunRequest("built#0", "built", None, [BackendSpec("eager", "cpu")], judge_settings("eager@cpu"))
    outcomes, _ = run_variant(sandbox, request, fetch=fetch)
    assert outcomes[0].status == "ok" and not fetched
    sandbox.stop()  # a fresh process does not have it: the payload is fetched and sent
    outcomes, _ = run_variant(sandbox, request, fetch=fetch)
    assert outcomes[0].status == "ok" and fetched == [1]


def test_tensors_of_every_dtype_cross_the_pipe_exactly(sandbox):
    """Outputs of the newer unsigned dtypes used to fail in the receiver (torch pickles storages in
    its legacy format, which cannot load them back)."""
    import torch

    base = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4)
    sent = [base.to(d) for d in (torch.uint16, torch.uint32, torch.uint64, torch.bfloat16, torch.bool,
                                 torch.complex64, torch.int8)]
    sent += [base.transpose(0, 2), base[:, 1], base.expand(2, 2, 3, 4)[1], torch.tensor(7.0), torch.empty(0, 3)]
    back = sandbox.request(Executor.call, fault_helpers.echo, (sent,), {})
    for a, b in zip(sent, back, strict=True):
        assert type(b) is torch.Tensor and a.dtype == b.dtype and a.shape == b.shape and a.stride() == b.stride()
        assert torch.equal(a, b)

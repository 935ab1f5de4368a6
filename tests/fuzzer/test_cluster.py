"""A real two-node Ray cluster on this machine: runs for a device go to the node that has it."""
from __future__ import annotations

import os
import subprocess

import pandas as pd
import pytest

from scripts.loopback_cluster import LoopbackCluster
from tests.conftest import gapfuzz

pytestmark = pytest.mark.ray

CAMPAIGN = """
name: routed
seeds: [{source: timm, include: [test_resnet, test_vit]}]
variants: {per_seed: 2, mutations: 1, mutators: [insert_unary]}
sizes: {per_seed: 0, widths: 0}  # the size axis has its own tests (test_sizes, test_probes)
probes: {per_variant: 1, kinds: [example]}  # routing is the point here
backends:
  targets: [{class: "tests.stacks.fake_npu:HostDevice", device: npu}]
pools: {cpu: {workers: 1}, npu: {workers: 1}}
"""


@pytest.fixture
def cluster():
    """``ray start --head`` with CPUs only, and a second node that advertises one Ascend ``NPU``."""
    c = LoopbackCluster()
    try:
        c.start(head_cpus=2)
        npu = c.add("npu", {"NPU": 1}, cpus=1)
        yield c, npu
    finally:
        c.shutdown()


def test_runs_are_routed_by_resource(cluster, tmp_path, write_campaign):
    c, npu_node_of = cluster
    address, env, npu_node = c.address, c.env, c.node_id(npu_node_of)
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        proc = gapfuzz("run", write_campaign(CAMPAIGN), "--out", tmp_path / "run", "--address", address, "--quiet",
                       cwd=tmp_path)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    assert proc.returncode == 0, proc.stderr
    df = pd.read_parquet(tmp_path / "run" / "records")
    assert len(df) == 4 * 3
    npu = df[df["device"] == "npu"]
    assert len(npu) == 4 and (npu["status"] == "ok").all()
    assert set(npu["worker"]) == {f"npu-0@{npu_node[:8]}"}
    cpu = df[df["device"] == "cpu"]
    assert cpu["worker"].str.startswith("cpu-0@").all()


NODE_LOSS = """
name: node-loss
seeds: [{source: ops, include: ["ops/*/float32/0"], limit: 16}]
variants: {per_seed: 8, mutations: 1, mutators: [insert_unary]}
sizes: {per_seed: 0, widths: 0}
probes: {per_variant: 2}
backends:
  targets: [{class: "tests.stacks.fake_npu:SlowHostDevice", device: npu}]
pools: {cpu: {workers: 2}, npu: {workers: auto, cpus_per_worker: 0}}
run: {flush_every: 10, repeats: 0}
"""


@pytest.mark.slow  # a three-node cluster losing one (about 3 minutes): python -m pytest -m slow
def test_a_lost_node_costs_no_run_and_a_late_node_gets_work(tmp_path, write_campaign):
    """Stop (SIGKILL) one of two npu nodes while it runs, then add a third: the campaign finishes with every
    (variant, backend) pair recorded once, and the late node's worker ran some of them."""
    import sys
    import time

    cluster = LoopbackCluster({"PYTHONPATH": os.pathsep.join(sys.path)})
    try:
        cluster.start(head_cpus=2)
        first = cluster.add("npu-a", {"NPU": 1})
        cluster.add("npu-b", {"NPU": 1})
        first_id = cluster.node_id(first)
        run_dir = tmp_path / "run"
        proc = subprocess.Popen([sys.executable, "-m", "gapfuzz.fuzzer.cli", "run", str(write_campaign(NODE_LOSS)),
                                 "--out", str(run_dir), "--address", cluster.address, "--quiet"], env=cluster.env,
                                cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 300
        while proc.poll() is None and time.monotonic() < deadline:  # until the first node has run something
            files = list((run_dir / "records").glob("slow-host@npu/*.parquet"))
            if files and (pd.concat(pd.read_parquet(f, columns=["worker"]) for f in files)["worker"]
                          .str.endswith(first_id[:8]).any()):
                break
            time.sleep(0.2)
        assert cluster.stop(first) > 0
        late = cluster.add("npu-c", {"NPU": 1})
        late_id = cluster.node_id(late)
        _, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-2000:]
    finally:
        cluster.shutdown()
    assert "ActorDiedError" not in err and "pool npu: a worker was lost" in err, err[-2000:]  # one line, not Ray's
    df = pd.read_parquet(run_dir / "records")
    assert not df.duplicated(["variant_id", "backend", "probe"]).any()
    assert (df["error_type"] != "WorkerLost").all()
    assert df.groupby("variant_id")["backend"].nunique().eq(3).all() and df["variant_id"].nunique() >= 100
    npu = df[df["device"] == "npu"]
    assert npu["worker"].str.endswith(late_id[:8]).any(), npu["worker"].value_counts()
    assert npu.groupby(["variant_id", "probe"]).size().eq(1).all()

"""A real two-node Ray cluster on this machine: runs for a device go to the node that has it."""
from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import tempfile

import pandas as pd
import pytest

from .conftest import gapfuzz

pytestmark = pytest.mark.ray

CAMPAIGN = """
name: routed
seeds: [{source: timm, include: [test_resnet, test_vit]}]
variants: {per_seed: 2, mutations: 1, mutators: [insert_unary]}
sizes: {per_seed: 0}  # the size axis has its own tests (test_sizes, test_probes)
probes: {per_variant: 1}  # routing is the point here
backends:
  targets: [{class: "tests.fake_npu:HostNpu", device: npu}]
pools: {cpu: {workers: 1}, npu: {workers: 1}}
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def cluster():
    """``ray start --head`` with CPUs only, and a second node that advertises one ``npu``."""
    temp = tempfile.mkdtemp(prefix="gfray", dir="/tmp")  # short: Ray's socket paths are length-limited
    port = _free_port()
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)}
    common = ["--node-ip-address=127.0.0.1", "--disable-usage-stats"]
    try:
        subprocess.run(["ray", "start", "--head", f"--port={port}", "--num-cpus=2", f"--temp-dir={temp}",
                        "--include-dashboard=false", *common], env=env, check=True, capture_output=True)
        subprocess.run(["ray", "start", f"--address=127.0.0.1:{port}", "--num-cpus=1", '--resources={"npu": 1}',
                        *common], env=env, check=True, capture_output=True)
        yield f"127.0.0.1:{port}", env
    finally:
        subprocess.run(["pkill", "-9", "-f", temp], check=False)
        shutil.rmtree(temp, ignore_errors=True)


def _node_with(address: str, env: dict, resource: str) -> str:
    code = ("import ray, logging; ray.init(address=%r, logging_level=logging.ERROR); "
            "print([n['NodeID'] for n in ray.nodes() if n['Alive'] and %r in n['Resources']][0])") % (address, resource)
    out = subprocess.run(["python", "-c", code], env=env, capture_output=True, text=True, check=True)
    return out.stdout.strip().splitlines()[-1]


def test_runs_are_routed_by_resource(cluster, tmp_path, write_campaign):
    address, env = cluster
    npu_node = _node_with(address, env, "npu")
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

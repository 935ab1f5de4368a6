"""A backend class named by module:Class in a campaign runs with no change to gapfuzz."""
from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest

from gapfuzz.results.columns import text
from tests.conftest import REPO, gapfuzz

pytestmark = pytest.mark.ray
EXAMPLE = REPO / "docs" / "examples" / "torchscript_backend.py"


def test_docs_show_the_example_verbatim():
    assert EXAMPLE.read_text().rstrip() in (REPO / "docs" / "backends.md").read_text()


def test_campaign_runs_a_backend_loaded_from_a_path(tmp_path, write_campaign):
    path = write_campaign("""
name: ts
seeds: [{source: timm, include: [test_resnet]}]
variants: {per_seed: 2, mutations: 1, mutators: [insert_unary]}
sizes: {per_seed: 0, widths: 0}  # the size axis has its own tests (test_sizes, test_probes)
backends:
  targets: [{class: "torchscript_backend:TorchScript", device: cpu, options: {optimize: true}}]
pools: {cpu: {workers: 1}}
""")
    env_path = os.environ["PYTHONPATH"]
    os.environ["PYTHONPATH"] = os.pathsep.join([str(EXAMPLE.parent), env_path])
    try:
        proc = gapfuzz("run", path, "--out", tmp_path / "run", "--quiet", cwd=tmp_path)
    finally:
        os.environ["PYTHONPATH"] = env_path
    assert proc.returncode == 0, proc.stderr
    df = pd.read_parquet(Path(tmp_path) / "run" / "records")
    ts = df[df["backend"] == "torchscript@cpu"]
    assert len(ts) == 2 * (8 + 3) and set(ts["status"]) <= {"ok", "mismatch"}  # two variants, 8 probes and 3 layouts
    assert all("optimized" in text("backend_info", v) for v in ts["backend_info"]) and ts["latency_ms"].gt(0).all()

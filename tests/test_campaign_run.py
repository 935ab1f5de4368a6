"""A real campaign on an embedded Ray: one record per (variant, backend), even across kill -9."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from core.bugs import bug_key
from workers.align import align_case

from .conftest import gapfuzz

pytestmark = pytest.mark.ray

CAMPAIGN = """
name: small
seeds:
  - source: timm
    include: [test_resnet, test_vit, test_convnext]
variants: {per_seed: 3, mutations: 1}
backends:
  targets: [{backend: eager@cpu, label: eager-copy}]
pools: {cpu: {workers: 2}}
run: {flush_every: 1, repeats: 1}
"""
BACKENDS = 3  # reference, oracle, target
VARIANTS = 9


def _records(run_dir: Path) -> pd.DataFrame:
    return pd.read_parquet(run_dir / "records")


def _stop_ray_session_of(run_started: float) -> None:
    """Processes of the Ray session the killed driver started (they outlive a SIGKILL)."""
    latest = Path("/tmp/ray/session_latest")
    if latest.exists() and latest.resolve().stat().st_mtime >= run_started - 1:
        subprocess.run(["pkill", "-9", "-f", latest.resolve().name], check=False)


def test_campaign_writes_one_record_per_variant_and_backend(tmp_path, write_campaign):
    path = write_campaign(CAMPAIGN)
    proc = gapfuzz("run", path, "--out", tmp_path / "run", "--quiet", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    df = _records(tmp_path / "run")
    assert len(df) == VARIANTS * BACKENDS
    assert df.groupby(["variant_id", "backend"]).size().max() == 1
    assert set(df["status"]) <= {"ok", "mismatch"}
    assert (df["schema_version"] == 1).all() and df["graph_hash"].notna().all()
    assert "eager-copy@cpu" in proc.stdout and "results:" in proc.stdout
    target = df[df["backend"] == "eager-copy@cpu"]
    assert (target["verdict"] == "agree").all() and (target["max_abs_err"] == 0).all()
    assert (tmp_path / "run" / "campaign.yaml").exists()
    stats = json.loads(next((tmp_path / "run" / "stats").glob("session-*.json")).read_text())
    assert stats["builds"] and stats["workers"] and all(w["busy_s"] > 0 for w in stats["workers"])
    triage = gapfuzz("triage", tmp_path / "run")
    assert triage.returncode == 0 and "nothing to triage" in triage.stdout
    again = gapfuzz("run", path, "--out", tmp_path / "run", cwd=tmp_path)
    assert again.returncode == 2 and "--resume" in again.stderr


def test_kill_minus_9_then_resume_records_each_pair_exactly_once(tmp_path, write_campaign):
    path = write_campaign(CAMPAIGN)
    run_dir = tmp_path / "run"
    started = time.time()
    proc = subprocess.Popen([sys.executable, "-m", "fuzzer.cli", "run", str(path), "--out", str(run_dir), "--quiet"],
                            cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        if run_dir.joinpath("records").is_dir() and len(list(run_dir.glob("records/*/*.parquet"))) >= 2:
            break
        time.sleep(0.2)
    assert proc.poll() is None, "campaign finished before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    _stop_ray_session_of(started)
    partial = len(_records(run_dir))
    assert 0 < partial < VARIANTS * BACKENDS
    assert list(run_dir.glob("stats/session-*.json")), "the killed session left no figures"

    resumed = gapfuzz("run", path, "--out", run_dir, "--resume", "--quiet", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    df = _records(run_dir)
    assert len(df) == VARIANTS * BACKENDS
    assert df.groupby(["variant_id", "backend"]).size().max() == 1


def test_tier_2_locates_a_case_once_per_seed(tmp_path, write_campaign):
    """Bisection is a dozen compiles a run: a variant of the seed that diverges the same way (target,
    symptom, dtype, error decade) as one located or being located names it, even on another worker."""
    path = write_campaign("""
name: located
seeds: [{source: timm, include: [test_vit]}]
variants: {per_seed: 4, mutations: 1}
backends: {targets: [{class: "tests.numeric_backends:MiscomputeOp", device: cpu}]}
pools: {cpu: {workers: 2}}
run: {repeats: 1}
""")
    proc = gapfuzz("run", path, "--out", tmp_path / "run", "--quiet", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    df = _records(tmp_path / "run")
    div = df[(df["backend"] == "miscompute@cpu") & (df["verdict"] == "target-divergent")]
    keys = {r.variant_id: align_case(r.seed_id, bug_key({**r._asdict(), "first_div_op": None}))
            for r in div.itertuples()}
    located = div[div["first_div_op"].notna()]
    skipped = div[div["align_error"].fillna("").str.match(r"not run: (being )?located on ")]
    assert len(located) + len(skipped) == len(div) and len(skipped) >= 1
    assert len(set(keys[v] for v in located["variant_id"])) == len(located)  # each case located once
    for r in skipped.itertuples():
        vid = r.align_error.split(" located on ")[1].split(" at ")[0]
        assert vid in set(located["variant_id"]) and keys[vid] == keys[r.variant_id]

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

from gapfuzz.core.bugs import bug_key
from gapfuzz.workers.judge.align import align_case
from tests.conftest import gapfuzz

pytestmark = pytest.mark.ray

CAMPAIGN = """
name: small
seeds:
  - source: timm
    include: [test_resnet, test_vit, test_convnext]
variants: {per_seed: 3, mutations: 1}
sizes: {per_seed: 0, widths: 0}  # the size axis has its own tests (test_sizes, test_probes)
backends:
  targets: [{backend: eager@cpu, label: eager-copy}]
pools: {cpu: {workers: 2}}
run: {flush_every: 1, repeats: 1}
"""
BACKENDS = 3  # reference, oracle, target
VARIANTS = 9
PROBES = 8 + 3  # the default value probes (the timm test models take floats only, so each applies) and 3 layouts


def _records(run_dir: Path) -> pd.DataFrame:
    return pd.read_parquet(run_dir / "records")


def _stop_ray_session_of(run_started: float) -> None:
    """Processes of the Ray session the killed driver started (they outlive a SIGKILL)."""
    latest = Path("/tmp/ray/session_latest")
    if latest.exists() and latest.resolve().stat().st_mtime >= run_started - 1:
        subprocess.run(["pkill", "-9", "-f", latest.resolve().name], check=False)


def test_campaign_writes_one_record_per_variant_and_backend(tmp_path, write_campaign):
    path = write_campaign(CAMPAIGN)
    proc = gapfuzz("run", path, "--out", tmp_path / "run", "--quiet", cwd=tmp_path, joins_ray=True)
    assert proc.returncode == 0, proc.stderr
    df = _records(tmp_path / "run")
    assert len(df) == VARIANTS * BACKENDS * PROBES
    assert df.groupby(["variant_id", "backend", "probe"]).size().max() == 1
    assert df.groupby(["variant_id", "backend"])["probe"].nunique().eq(PROBES).all()
    assert set(df["status"]) <= {"ok", "mismatch"}
    assert (df["schema_version"] == 7).all() and df["graph_hash"].notna().all()
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


def _start(path: Path, run_dir: Path, *more: str) -> subprocess.Popen:
    # SIGINT at its default, as from a terminal (a shell running the tests in the background ignores it)
    return subprocess.Popen([sys.executable, "-m", "gapfuzz.fuzzer.cli", "run", str(path), "--out", str(run_dir),
                             "--quiet", *more], cwd=path.parent, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def _written(run_dir: Path) -> int:
    import pyarrow.parquet as pq

    # files being written have hidden .tmp names until they are whole
    return sum(pq.ParquetFile(f).metadata.num_rows for f in run_dir.glob("records/*/*.parquet"))


def _stop_after(proc: subprocess.Popen, run_dir: Path, records: int, sig: int) -> str:
    """Send ``sig`` once this session has written ``records`` records."""
    before, deadline = _written(run_dir), time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        if _written(run_dir) >= before + records:
            break
        time.sleep(0.1)
    assert proc.poll() is None, "campaign finished before it could be stopped"
    os.killpg(proc.pid, sig) if sig == signal.SIGKILL else proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    return err


def _catalog(run_dir: Path) -> pd.DataFrame:
    return pd.read_parquet(run_dir / "catalog" / "rows")


@pytest.mark.slow  # about 200 s on two cores: run with -m slow (CI keeps the release-axis campaign instead)
def test_kill_minus_9_three_times_and_ctrl_c_then_resume_equal_a_clean_run(tmp_path, write_campaign):
    """Stopped at three moments by SIGKILL and once by Ctrl-C, resumed each time: the records and the seed
    catalog end equal to a clean run's, each (variant, backend) and each seed exactly once."""
    slow = "targets: [{class: 'tests.stacks.numeric_backends:SlowEager', device: cpu, options: {seconds: 0.5}}]"
    path = write_campaign(CAMPAIGN.replace("per_seed: 3", "per_seed: 4").replace(
        "targets: [{backend: eager@cpu, label: eager-copy}]", slow))
    runs = 12 * BACKENDS * PROBES
    clean = gapfuzz("run", path, "--out", tmp_path / "clean", "--quiet", cwd=tmp_path)
    assert clean.returncode == 0, clean.stderr
    run_dir = tmp_path / "run"
    for i, sig in enumerate([signal.SIGINT, signal.SIGKILL, signal.SIGKILL, signal.SIGKILL]):
        started, left = time.time(), runs - _written(run_dir)
        assert left >= 2, "too little left to stop once more"
        err = _stop_after(_start(path, run_dir, *(["--resume"] if i else [])), run_dir, max(1, left // 5), sig)
        if sig == signal.SIGKILL:
            _stop_ray_session_of(started)
        else:
            assert f"continue with: gapfuzz run {path} --resume --out {run_dir}" in err, err
        df = _records(run_dir)
        assert 0 < len(df) < runs and df.groupby(["variant_id", "backend", "probe"]).size().max() == 1
        assert set(df["seed_id"]) <= set(_catalog(run_dir)["seed_id"])  # no record without its catalog row
    assert list(run_dir.glob("stats/session-*.json")), "the stopped sessions left no figures"
    resumed = gapfuzz("run", path, "--out", run_dir, "--resume", "--quiet", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    same = subprocess.run([sys.executable, str(Path(__file__).resolve().parents[2] / "scripts" / "same_records.py"),
                           str(tmp_path / "clean"), str(run_dir)], capture_output=True, text=True)
    assert same.returncode == 0 and f"same records: {runs} rows" in same.stdout, same.stdout
    cat, want = _catalog(run_dir), _catalog(tmp_path / "clean")
    assert sorted(cat["seed_id"]) == sorted(want["seed_id"]) and len(cat) == 3
    cols = ["seed_id", "status", "node_count", "op_counts", "input_spec"]
    assert _rows(cat[cols]) == _rows(want[cols])


def _as_py(v):
    if isinstance(v, (list, tuple)) or type(v).__name__ == "ndarray":
        return [_as_py(e) for e in v]
    return {k: _as_py(e) for k, e in v.items()} if isinstance(v, dict) else v


def _rows(frame) -> list:
    """A catalog frame's rows as plain Python (its nested columns are arrays), in seed order."""
    return sorted(({k: _as_py(v) for k, v in r.items()} for r in frame.to_dict("records")), key=lambda r: r["seed_id"])


def test_tier_2_locates_a_case_once_per_seed(tmp_path, write_campaign):
    """Bisection is a dozen compiles a run: a variant of the seed that diverges the same way (target,
    symptom, dtype) as one located takes its location, even on another worker, and says so."""
    path = write_campaign("""
name: located
seeds: [{source: timm, include: [test_vit]}]
variants: {per_seed: 4, mutations: 1}
sizes: {per_seed: 0, widths: 0}  # the size axis has its own tests (test_sizes, test_probes)
backends: {targets: [{class: "tests.stacks.numeric_backends:MiscomputeOp", device: cpu}]}
pools: {cpu: {workers: 2}}
run: {repeats: 1}
""")
    proc = gapfuzz("run", path, "--out", tmp_path / "run", "--quiet", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    df = _records(tmp_path / "run")
    div = df[(df["backend"] == "miscompute@cpu") & (df["verdict"] == "target-divergent")]
    keys = {r.Index: align_case(r.seed_id, bug_key({**r._asdict(), "first_div_op": None}))
            for r in div.itertuples()}  # per record: each probe of a variant is a run of its own
    why = div["align_error"].fillna("")
    located = div[div["first_div_op"].notna() & (why == "")]  # tier 2 ran on these
    inherited = div[why.str.match(r"not run: (inherited from|being located on) ")]  # another variant's case
    shared = div[why.str.startswith("not run: located on probe ")]  # its variant's first probe so diverging
    other = div[why.str.startswith("not run: left to probe ")]  # that probe was left unlocated
    assert len(located) + len(inherited) + len(shared) + len(other) == len(div) and len(inherited) >= 1
    assert len({keys[i] for i in located.index}) == len(located)  # each case located once
    for r in inherited.itertuples():
        vid = r.align_error.split(" from ")[-1].split(" on ")[-1].split(",")[0]
        theirs = located[located["variant_id"] == vid]
        assert keys[r.Index] in {keys[i] for i in theirs.index}
        if "inherited" in r.align_error:  # the location travels with the run
            assert r.first_div_op in set(theirs["first_div_op"]) and r.align_error.endswith(f"at {r.first_div_op}")
    for r in shared.itertuples():  # the location of the same variant and backend, on the probe it names
        probe = r.align_error.removeprefix("not run: located on probe ")
        first = div[(div["variant_id"] == r.variant_id) & (div["probe"] == probe)]
        assert list(first["first_div_op"]) == [r.first_div_op]


def test_a_time_budget_starts_no_pair_after_it_and_resume_runs_the_rest(tmp_path, write_campaign):
    """``--time-budget``: no pair starts past it (here: spent while the workers start), the command ends as a
    campaign does, and ``--resume`` without a budget runs the whole plan once."""
    path = write_campaign(CAMPAIGN.replace("include: [test_resnet, test_vit, test_convnext]", "include: [test_resnet]")
                          .replace("per_seed: 3", "per_seed: 2"))
    run = tmp_path / "run"
    first = gapfuzz("run", path, "--out", run, "--quiet", "--time-budget", "1s", cwd=tmp_path, joins_ray=True)
    assert first.returncode == 0, first.stderr
    assert "time budget of 1 s spent" in first.stdout and "--resume" in first.stdout
    assert not list(run.glob("records/*/*.parquet"))
    rest = gapfuzz("run", path, "--out", run, "--quiet", "--resume", cwd=tmp_path, joins_ray=True)
    assert rest.returncode == 0, rest.stderr
    df = _records(run)
    assert len(df) == 2 * BACKENDS * PROBES and df.groupby(["variant_id", "backend", "probe"]).size().max() == 1

"""Every way a backend can die costs one record: crash, timeout and oom, each under its own status."""
from __future__ import annotations

import signal
import subprocess
import sys
import time

import pandas as pd
import pytest

from tests.conftest import gapfuzz
from tests.stacks.faulty_backend import FAULTS, fault_of

pytestmark = pytest.mark.ray

CAMPAIGN = """
name: faults
seeds:
  - {source: ops, include: ["ops/*/float32/0"], sample: 50}
variants: {per_seed: 1, mutations: 0}
sizes: {per_seed: 0, widths: 0}  # the size axis has its own tests (test_sizes, test_probes)
probes: {per_variant: 1, kinds: [example]}  # the example inputs alone: a fault depends on the graph here
backends:
  targets: [{class: "tests.stacks.faulty_backend:Faulty", device: cpu, timeout_s: 6}]
pools: {cpu: {workers: 2, memory_gb: 1.5}}
run: {timeout_s: 120, repeats: 1}
"""
EXPECTED = {"ok": ("ok", None), "segfault": ("crash", "signal:SIGSEGV"), "abort": ("crash", "signal:SIGABRT"),
            "hang": ("timeout", "limit:timeout 6s"), "oom": ("oom", "limit:memory 1.5GiB"), "raise": ("error", None)}


@pytest.mark.slow  # CI's time (two to three minutes); each fault alone is tested in test_sandbox.py
def test_fifty_variants_with_every_fault_lose_no_record(tmp_path, write_campaign):
    path = write_campaign(CAMPAIGN)
    proc = gapfuzz("run", path, "--out", tmp_path / "run", "--quiet", cwd=tmp_path, timeout=900)
    assert proc.returncode == 0, proc.stderr
    df = pd.read_parquet(tmp_path / "run" / "records")
    variants = df["variant_id"].nunique()
    assert variants == 50 and len(df) == variants * 3  # reference, oracle, faulty
    faulty = df[df["backend"] == "faulty@cpu"].set_index("variant_id")

    from gapfuzz.fuzzer.generate import replay
    from gapfuzz.fuzzer.recipe import Recipe
    from gapfuzz.results.columns import text

    seen = set()
    for vid, row in faulty.iterrows():
        fault = fault_of(replay(Recipe.from_json(text("recipe", row["recipe"]))).gm)  # a struct column's value
        status, cause = EXPECTED[fault]
        assert row["status"] in (status, "ok" if fault == "ok" else status), (vid, fault, row["status"])
        if cause:
            assert row["cause"] == cause, (vid, fault, row["cause"])
        if fault != "ok":
            assert row["reproducible"] in (True, None) or fault == "raise", (vid, fault)
        seen.add(fault)
    assert seen >= set(FAULTS) - {"ok"}, f"the sample exercised only {sorted(seen)}"
    others = df[df["backend"] != "faulty@cpu"]
    assert (others["status"] == "ok").all()


HUNG = """
name: hung
seeds:
  - {source: ops, include: ["ops/add/float32/0", "ops/sub/float32/0"]}
variants: {per_seed: 1, mutations: 0}
sizes: {per_seed: 0, widths: 0}  # the size axis has its own tests (test_sizes, test_probes)
backends:
  targets: [{class: "tests.stacks.faulty_backend:Faulty", device: cpu, options: {fault: hang, mark: "MARK"}}]
pools: {cpu: {workers: 2}}
run: {timeout_s: 900, repeats: 1}
"""


def test_ctrl_c_inside_a_long_run_stops_at_once_and_says_how_to_resume(tmp_path, write_campaign):
    """A worker busy in a run would answer only when the run ends: Ctrl-C must not wait for it. (Waiting
    on each of the two hung workers in turn, as before, took 40 s apiece.)"""
    mark = tmp_path / "hanging"
    mark.mkdir()
    path, out = write_campaign(HUNG.replace("MARK", str(mark))), tmp_path / "run"
    # as from a terminal: a shell that starts the tests in the background (CI, nohup ... &) passes SIGINT on
    # ignored, and Python then never raises KeyboardInterrupt
    proc = subprocess.Popen([sys.executable, "-m", "gapfuzz.fuzzer.cli", "run", str(path), "--out", str(out),
                             "--quiet"], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 300
        while len(list(mark.iterdir())) < 2 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.5)  # until both workers are inside their hanging runs
        assert proc.poll() is None and len(list(mark.iterdir())) == 2, proc.communicate()[1]
        proc.send_signal(signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=60)  # not the 900 s the runs could take
        except subprocess.TimeoutExpired:
            proc.kill()
            raise AssertionError("still running 60 s after Ctrl-C:\n" + proc.communicate()[1][-3000:]) from None
    finally:
        proc.kill()
    assert proc.returncode == 130 and "--resume" in err, err
    assert list(out.glob("stats/session-*.json")) and (out / "campaign.yaml").exists()

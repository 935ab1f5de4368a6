#!/usr/bin/env python
"""Mutator guidance compared: uniform choice, LEMON's MCMC, and gapfuzz's coverage guidance.

    python scripts/bench_guidance.py [--seeds 16] [--per-seed 6] [--repeats 2]

The same campaign (same seeds, same variant budget) runs once per guidance mode and campaign
seed on one embedded Ray; for each it prints what a campaign is for: distinct clusters found
(all, and vendor findings), (operator, backend) pairs that completed, and distinct operators
exercised. Targets are ONNX Runtime and OpenVINO, fast enough for many variants.
"""
from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import tempfile
from pathlib import Path

import ray

from gapfuzz.analysis.api import load_run
from gapfuzz.core.bugs import COMPLETED
from gapfuzz.fuzzer.config.campaign import from_dict
from gapfuzz.fuzzer.driver import Driver

SEEDS = [{"source": "timm", "include": ["test_*"]},
         {"source": "ops", "include": ["ops/*/float32/0"], "sample": 8}]


def campaign(mode: str, seed: int, seeds: int, per_seed: int) -> dict:
    return {"name": f"guide-{mode}-{seed}", "seed": seed,
            "seeds": [dict(SEEDS[0], limit=seeds - SEEDS[1]["sample"]), SEEDS[1]],
            "variants": {"per_seed": per_seed, "mutations": 2, "include_seed": False, "guidance": mode},
            "backends": {"targets": ["onnxruntime@cpu", "openvino@cpu"]},
            "pools": {"cpu": {"workers": 2}}, "run": {"repeats": 1, "timeout_s": 120},
            "compare": {"align": False}}


def measure(run_dir: Path) -> dict:
    run = load_run(run_dir)
    c = run.clusters()
    recs = run.records(["backend", "status", "ops"])
    done = recs[recs["status"].isin(COMPLETED)].explode("ops")
    return {"clusters": len(c), "vendor": int(c["vendor"].sum()),
            "op_backend": int(done[["ops", "backend"]].drop_duplicates().shape[0]),
            "ops": int(recs.explode("ops")["ops"].nunique())}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", type=int, default=16)
    p.add_argument("--per-seed", type=int, default=6)
    p.add_argument("--repeats", type=int, default=2, help="campaign seeds per mode")
    a = p.parse_args()
    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
    out = Path(tempfile.mkdtemp(prefix="gapfuzz-guidance-"))
    results: dict[str, list[dict]] = {}
    try:
        for seed in range(a.repeats):
            for mode in ("uniform", "mcmc", "coverage"):
                c = from_dict(campaign(mode, seed, a.seeds, a.per_seed), "bench")
                run_dir = out / c.name
                Driver(c, run_dir, progress=False).run()
                results.setdefault(mode, []).append(measure(run_dir))
                print(f"{mode:9s} seed {seed}: {results[mode][-1]}", file=sys.stderr)
    finally:
        ray.shutdown()
    print(f"{a.seeds} seeds x {a.per_seed} variants x 2 mutations, targets onnxruntime@cpu and openvino@cpu, "
          f"{a.repeats} campaign seed(s) per mode (mean, then each):")
    for mode, rows in results.items():
        figures = {k: statistics.mean(r[k] for r in rows) for k in rows[0]}
        each = "; ".join(" ".join(f"{k}={r[k]}" for k in r) for r in rows)
        print(f"  {mode:9s} " + "  ".join(f"{k} {v:.1f}" for k, v in figures.items()) + f"   ({each})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

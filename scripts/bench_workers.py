#!/usr/bin/env python
"""Worker scaling and pipeline overhead, measured side by side in one run.

    python scripts/bench_workers.py [--per-seed 12] [--repeats 5] [--cold]

Runs the same eager-dominated campaign (mid-size timm models; reference, fp64 oracle and a
second eager target) with 1 worker and with 2, on one embedded Ray, and prints variants per
minute for each and their ratio, then splits the workers' busy time into backend prepare and
runs, variant building (capture, mutation, validation), and everything else (transport,
loading, comparison, bookkeeping). Both runs use one capture cache in a temporary folder,
filled before the first (a farm re-running its seed set); ``--cold`` turns it off, so every
run exports its seeds again.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import ray

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gapfuzz.fuzzer.config.campaign import from_dict
from gapfuzz.fuzzer.driver import Driver
from gapfuzz.fuzzer.generate import captured

SEEDS = ["resnet18", "efficientnet_b0", "mobilenetv3_large_100", "convnext_atto", "regnetx_004",
         "deit_tiny_patch16_224"]


def campaign(workers: int, per_seed: int, repeats: int, cache: bool) -> dict:
    return {"name": f"bench-{workers}", "seeds": [{"source": "timm", "include": SEEDS}], "capture": {"cache": cache},
            "variants": {"per_seed": per_seed, "mutations": 1},
            "backends": {"targets": [{"backend": "eager@cpu", "label": "eager-copy"}]},
            "pools": {"cpu": {"workers": workers, "threads": 1}}, "run": {"repeats": repeats, "flush_every": 50}}


def run_one(workers: int, out: Path, per_seed: int, repeats: int, cold: bool) -> dict:
    c = from_dict(campaign(workers, per_seed, repeats, cache=not cold), "bench")
    run_dir = out / f"w{workers}"
    driver = Driver(c, run_dir, progress=False)
    t0 = time.perf_counter()
    driver.run()
    wall = time.perf_counter() - t0
    df = pd.read_parquet(run_dir / "records")
    stats = json.loads(sorted((run_dir / "stats").glob("*.json"))[-1].read_text())
    busy = sum(w["busy_s"] for w in stats["workers"])
    local = sum(w.get("local_loads", 0) for w in stats["workers"])
    backend = float((df["prepare_s"].fillna(0) + df["run_s"].fillna(0)).sum())
    builds = sum(b["build_s"] or 0 for b in stats["builds"])
    n = df["variant_id"].nunique()
    return {"workers": workers, "variants": n, "runs": len(df), "wall_s": wall, "start_s": stats["start_s"],
            "per_min": 60 * n / wall, "steady_per_min": 60 * n / (wall - stats["start_s"]), "busy_s": busy,
            "backend_s": backend, "build_s": builds, "other_s": busy - backend - builds, "local": local}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--per-seed", type=int, default=12)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--cold", action="store_true", help="no capture cache: every run exports its seeds")
    a = p.parse_args()
    out = Path(tempfile.mkdtemp(prefix="gapfuzz-bench-"))
    os.environ["GAPFUZZ_CACHE_DIR"] = str(out / "cache")
    if not a.cold:
        t0 = time.perf_counter()
        for seed in SEEDS:
            captured(f"timm/{seed}", None)
        print(f"capture cache filled in {time.perf_counter() - t0:.1f} s")
    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
    try:
        rows = [run_one(w, out, a.per_seed, a.repeats, a.cold) for w in (1, 2)]
    finally:
        ray.shutdown()
    print(f"machine: {os.cpu_count()} cores; campaign: {len(SEEDS)} timm seeds x {a.per_seed} variants, "
          f"eager reference + fp64 oracle + eager target, {a.repeats} timed calls each; "
          f"capture cache {'empty (cold)' if a.cold else 'filled (warm)'}")
    for r in rows:
        print(f"{r['workers']} worker(s): {r['variants']} variants, {r['runs']} runs in {r['wall_s']:.1f} s "
              f"= {r['per_min']:.1f} variants/min; {r['start_s']:.1f} s of it starting the workers, "
              f"{r['steady_per_min']:.1f} variants/min after")
    print(f"throughput ratio, 2 workers / 1 worker: {rows[1]['per_min'] / rows[0]['per_min']:.2f}x with start-up, "
          f"{rows[1]['steady_per_min'] / rows[0]['steady_per_min']:.2f}x after it")
    for r in rows:
        b = r["busy_s"]
        print(f"{r['workers']} worker(s) busy {b:.1f} s: backend prepare+run {r['backend_s'] / b:.1%}, "
              f"building variants {r['build_s'] / b:.1%}, other (transport, load, compare) {r['other_s'] / b:.1%}; "
              f"{r['local']} of {r['variants']} variants ran on the worker that built them (no transfer)")
    worst = max(r["other_s"] / r["busy_s"] for r in rows)
    print(f"pipeline overhead (worker time outside backend prepare, runs and variant building): at most "
          f"{worst:.1%}  [goal <= 5%: {'met' if worst <= 0.05 else 'NOT met'}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())

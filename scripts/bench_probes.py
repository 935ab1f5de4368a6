"""Benchmark: what 8 input probes per prepared backend buy against 1, side by side in one run.

    python scripts/bench_probes.py [--ops 24] [--skip-models] [--no-align]

The same campaign runs twice on one embedded Ray, ``probes.per_variant`` 1 and 8:

- an operator-seed campaign (float, integer and bool dtypes, one variant each: the seed) against
  Inductor, ONNX Runtime and OpenVINO on the CPU: compared (probe, backend) pairs per CPU-second of
  the workers (their busy time; each worker runs one thread);
- a model campaign (the default campaign's four timm test models, five variants each): wall time.

Sizes are off in both (``sizes.per_seed: 0``): this measures probes alone. Seeds are captured
before either run and Inductor's compile caches are off, so the second run has no head start. It
prints both figures and their ratios, and exits 1 when a goal is missed: at least 5x the pairs per
CPU-second, at most 1.15x the model campaign's wall time.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gapfuzz.core.bugs import COMPLETED
from gapfuzz.fuzzer.config.campaign import from_dict
from gapfuzz.fuzzer.config.plan import select_seeds, with_sizes
from gapfuzz.fuzzer.driver import Driver
from gapfuzz.fuzzer.generate import captured
from gapfuzz.workers.run.pool import connect

TARGETS = ["inductor@cpu", "onnxruntime@cpu", "openvino@cpu"]


def ops_campaign(n: int, probes: int, align: bool) -> dict:
    per = max(1, n // 3)
    return {"name": f"ops-{probes}", "seeds": [{"source": "ops", "include": [f"ops/*/{dtype}/0"], "sample": per}
                                               for dtype in ("float32", "int32", "bool")],
            "variants": {"per_seed": 1}, "probes": {"per_variant": probes}, "sizes": {"per_seed": 0},
            "backends": {"targets": TARGETS},
            "pools": {"cpu": {"workers": 2}}, "run": {"repeats": 1, "timeout_s": 120}, "compare": {"align": align}}


def model_campaign(probes: int, align: bool) -> dict:
    return {"name": f"models-{probes}",
            "seeds": [{"source": "timm", "include": ["test_resnet", "test_vit", "test_convnext", "test_efficientnet"]}],
            "variants": {"per_seed": 5, "mutations": 2}, "probes": {"per_variant": probes}, "sizes": {"per_seed": 0},
            "backends": {"targets": TARGETS}, "pools": {"cpu": {"workers": 2}}, "compare": {"align": align}}


def precapture(config: dict) -> None:
    """Capture the campaign's seeds into the cache first, so that neither run pays for it."""
    c = from_dict(config, "bench")
    for seed_id in with_sizes(c, select_seeds(c)):
        try:
            captured(seed_id, None)
        except Exception:  # noqa: BLE001 - a seed that does not capture costs both runs alike
            pass


def run(config: dict, out: Path) -> dict:
    c = from_dict(config, "bench")
    run_dir = out / c.name
    t0 = time.perf_counter()
    Driver(c, run_dir, progress=False).run()
    wall = time.perf_counter() - t0
    df = pd.read_parquet(run_dir / "records")
    stats = json.loads(sorted((run_dir / "stats").glob("*.json"))[-1].read_text())
    busy = sum(w["busy_s"] for w in stats["workers"])
    targets = df[df["backend"].isin(TARGETS)]
    pairs = int(targets["status"].isin(COMPLETED).sum())
    return {"name": c.name, "wall_s": wall, "busy_s": busy, "pairs": pairs, "records": len(df),
            "per_cpu_s": pairs / busy, "align_s": float(df["align_s"].fillna(0).sum()),
            "mismatches": int((targets["status"] == "mismatch").sum())}


def show(r: dict) -> str:
    return (f"{r['name']:10s} {r['records']:5d} records, {r['pairs']:5d} compared target (probe, backend) pairs "
            f"({r['mismatches']} mismatches) in {r['wall_s']:6.1f} s wall, {r['busy_s']:6.1f} s of worker time "
            f"(tier 2 {r['align_s']:.1f} s): {r['per_cpu_s']:.2f} pairs per CPU-second")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ops", type=int, default=24, help="operator seeds (a third each float32, int32, bool)")
    p.add_argument("--skip-models", action="store_true", help="only the operator campaign")
    p.add_argument("--no-align", action="store_true", help="campaigns without tier 2")
    a = p.parse_args()
    out = Path(tempfile.mkdtemp(prefix="gapfuzz-probes-"))
    os.environ.setdefault("GAPFUZZ_CACHE_DIR", str(out / "cache"))
    os.environ["TORCHINDUCTOR_FX_GRAPH_CACHE"] = "0"  # every compile cold: the second run gets no head start
    os.environ["TORCHINDUCTOR_AUTOGRAD_CACHE"] = "0"
    connect(None, os.cpu_count())
    ok = True
    precapture(ops_campaign(a.ops, 1, True))
    ops = [run(ops_campaign(a.ops, n, not a.no_align), out) for n in (1, 8)]
    for r in ops:
        print(show(r))
    ratio = ops[1]["per_cpu_s"] / ops[0]["per_cpu_s"]
    print(f"operator seeds: 8 probes give {ratio:.2f}x the compared pairs per CPU-second of 1 (goal: at least 5x)")
    ok &= ratio >= 5
    if not a.skip_models:
        precapture(model_campaign(1, True))
        models = [run(model_campaign(n, not a.no_align), out) for n in (1, 8)]
        for r in models:
            print(show(r))
        wall = models[1]["wall_s"] / models[0]["wall_s"]
        print(f"model campaign: 8 probes take {wall:.2f}x the wall time of 1 (goal: at most 1.15x)")
        ok &= wall <= 1.15
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

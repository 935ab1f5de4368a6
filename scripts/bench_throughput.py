#!/usr/bin/env python
"""Throughput of a fixed operator campaign for a fixed wall time: what a change to the pipeline buys.

    python scripts/bench_throughput.py [--minutes 4] [--baseline REV] [--out DIR]

The campaign: 24 single-operator seeds (float32), three variants each, PyTorch eager against Inductor,
aot-eager, ONNX Runtime and OpenVINO on the CPU, with the float64 oracle, on the embedded Ray. It is
stopped with Ctrl-C (SIGINT, as a user would; records so far are kept) after ``--minutes`` of wall time,
then read with ``gapfuzz.analysis``. Printed per version: target runs compared (ended ok or mismatch) per
minute, compiles per minute (prepares of the pairs run, tier 2's and attribution's), pairs, and the
distinct vendor findings (clusters). With ``--baseline REV`` the same campaign runs first under that
revision of gapfuzz (installed into a scratch folder from ``git worktree``), then under this checkout,
one after the other on the same machine: the two columns are comparable, the figures of two machines
are not. Caches (Inductor's, gapfuzz's capture cache) are fresh for each run.
"""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OPS = ["add", "mul", "sub", "addcdiv", "nn.functional.relu", "nn.functional.gelu", "tanh", "sigmoid", "exp", "log",
       "sqrt", "rsqrt", "softmax", "log_softmax", "sum", "mean", "amax", "cumsum", "matmul", "mm", "bmm",
       "native_layer_norm", "round", "clamp"]
CAMPAIGN = """name: throughput
seed: 0
seeds: [{{source: ops, include: {include}}}]
variants: {{per_seed: 3, mutations: 2}}
sizes: {{per_seed: 0}}
backends:
  reference: eager@cpu
  oracle: eager-fp64@cpu
  targets: [inductor@cpu, aot-eager@cpu, onnxruntime@cpu, openvino@cpu]
pools:
  cpu: {{workers: auto}}
"""
TARGETS = ("inductor@cpu", "aot-eager@cpu", "onnxruntime@cpu", "openvino@cpu")


def campaign_file(folder: Path) -> Path:
    path = folder / "throughput.yaml"
    path.write_text(CAMPAIGN.format(include=[f"ops/{op}/float32/0" for op in OPS]))
    return path


def install(rev: str, scratch: Path) -> Path:
    """gapfuzz at ``rev`` installed (no dependencies) into ``scratch/site``: put first on PYTHONPATH, it
    stands before this checkout's editable install."""
    tree = scratch / "tree"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), rev], check=True,
                   capture_output=True)
    try:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                        "--target", str(scratch / "site"), str(tree)], check=True)
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], capture_output=True)
    return scratch / "site"


def run(name: str, site: Path | None, minutes: float, out: Path) -> dict:
    """The campaign for ``minutes``, then SIGINT; its figures from the run folder."""
    folder, caches = out / name, out / f"{name}-caches"
    shutil.rmtree(folder, ignore_errors=True)
    shutil.rmtree(caches, ignore_errors=True)
    env = {**os.environ, "GAPFUZZ_CACHE_DIR": str(caches / "gapfuzz"),
           "TORCHINDUCTOR_CACHE_DIR": str(caches / "inductor")}
    if site is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(site), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    cmd = [sys.executable, "-m", "gapfuzz.fuzzer.cli", "run", str(campaign_file(out)), "--out", str(folder)]
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        proc.wait(timeout=minutes * 60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGINT)  # as Ctrl-C: the campaign writes what it has and stops
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    wall = time.monotonic() - t0
    return {"wall_s": wall, **figures(folder, min(wall, minutes * 60))}


def figures(folder: Path, seconds: float) -> dict:
    from gapfuzz.analysis.api import load_run

    r = load_run(folder)
    df = r.records()
    targets = df[df["backend"].isin(TARGETS)]
    compared = targets[targets["status"].isin(["ok", "mismatch"])]
    pairs = targets.drop_duplicates(["variant_id", "backend"])
    compiles = int(pairs["prepare_s"].notna().sum()) + int(targets["align_prepares"].fillna(0).sum()) + \
        int(targets["bisect_compiles"].fillna(0).sum())
    minutes = seconds / 60
    return {"runs": len(compared), "runs/min": len(compared) / minutes, "compiles/min": compiles / minutes,
            "pairs": len(pairs), "findings": len(r.clusters(vendor=True)),
            "bisect_s": float(targets["bisect_s"].fillna(0).sum()),
            "align_s": float(targets["align_s"].fillna(0).sum())}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=4.0, help="wall time of each run (default: 4)")
    ap.add_argument("--baseline", metavar="REV", help="also run the campaign under this git revision, first")
    ap.add_argument("--out", type=Path, help="where the run folders go (default: a temporary folder)")
    args = ap.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="gapfuzz-throughput-"))
    out.mkdir(parents=True, exist_ok=True)
    results = {}
    if args.baseline:
        with tempfile.TemporaryDirectory(prefix="gapfuzz-baseline-") as scratch:
            results[args.baseline] = run("baseline", install(args.baseline, Path(scratch)), args.minutes, out)
    results["this checkout"] = run("current", None, args.minutes, out)
    names = list(results)
    print(f"\n{'figure':<14}" + "".join(f"{n:>16}" for n in names))
    for key in next(iter(results.values())):
        print(f"{key:<14}" + "".join(f"{results[n][key]:>16.1f}" for n in names))
    print(f"\nrun folders: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

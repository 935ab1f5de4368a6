"""Benchmark: cluster a million synthetic records of the real schema, in a fresh process.

    python scripts/bench_triage.py [--records 1000000] [--keep DIR]

Builds a run folder with the store's schema and atomic writer (10 backends, thousands of seeds,
ATen op lists, a realistic mix of statuses; error messages from real torch / Inductor / ONNX
Runtime / OpenVINO formats with random numbers, shapes and names), then times, in a child
process, loading + clustering + the portability tables, and prints wall seconds and peak RSS.
It checks that the messages' incidental parts did not split clusters, and exits 1 when the
budget (30 s, 4 GiB) is exceeded. A share of the divergences carry an explanation (behaviour
clusters) or were left unlocated by the ledger (they inherit a location when clustered), so the
derivations of ``analysis.causes`` are timed too.
"""
from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from gapfuzz.core.bugs import LIMITS, Kind, Stage, Status, Symptom, Verdict
from gapfuzz.results.schema import arrow_schema
from gapfuzz.results.store import RecordStore

BUDGET_S, BUDGET_GIB = 30.0, 4.0
BACKENDS = ["eager@cpu", "eager-fp64@cpu", "inductor@cpu", "onnxruntime@cpu", "openvino@cpu", "openvino-f32@cpu",
            "aot-inductor@cpu", "eager@cuda", "inductor@cuda", "eager@mps"]
STATUS_P = {Status.OK: 0.78, Status.MISMATCH: 0.08, Status.ERROR: 0.07, Status.UNSUPPORTED: 0.04,
            Status.CRASH: 0.015, Status.TIMEOUT: 0.01, Status.OOM: 0.005}
# (status, stage, error type, format): {n} number, {h} hex id, {s} shape, {name} generated name
FORMATS = [
    (Status.ERROR, Stage.RUN, "RuntimeError", "mat1 and mat2 shapes cannot be multiplied ({n}x{n} and {n}x{n})"),
    (Status.ERROR, Stage.RUN, "RuntimeError", "shape '{s}' is invalid for input of size {n}"),
    (Status.ERROR, Stage.RUN, "IndexError", "index {n} is out of bounds for dimension {n} with size {n}"),
    (Status.ERROR, Stage.COMPILE, "torch._inductor.exc.InductorError",
     "LoweringException: AssertionError: \n  target: aten.cat.default\n  args[0]: "
     "TensorBox(StorageBox(InputBuffer(name='{name}', "
     "layout=FixedLayout('cpu', torch.float32, size={s}, stride={s}))))"),
    (Status.ERROR, Stage.COMPILE, "torch._inductor.exc.CppCompileError",
     "C++ compile error\n\nCommand:\ng++ /tmp/torchinductor_root/{h}/c{h}.cpp -shared -fPIC -O3 -o "
     "/tmp/torchinductor_root/{h}/c{h}.so\n\nOutput:\n/tmp/torchinductor_root/{h}/c{h}.cpp:{n}:{n}: error: "
     "'{name}' was not declared in this scope"),
    (Status.ERROR, Stage.COMPILE, "onnxruntime.capi.onnxruntime_pybind11_state.InvalidGraph",
     "[ONNXRuntimeError] : 10 : INVALID_GRAPH : This is an invalid model. Type Error: Type 'tensor(bfloat16)' of "
     "input parameter ({name}) of operator (Conv) in node (node_{name}) is invalid."),
    (Status.ERROR, Stage.RUN, "onnxruntime.capi.onnxruntime_pybind11_state.Fail",
     "[ONNXRuntimeError] : 1 : FAIL : Non-zero status code returned while running Reshape node. Name:'node_{name}' "
     "Status Message: The input tensor cannot be reshaped to the requested shape. Input shape:{s}, "
     "requested shape:{s}"),
    (Status.UNSUPPORTED, Stage.COMPILE, "onnxruntime.capi.onnxruntime_pybind11_state.NotImplemented",
     "[ONNXRuntimeError] : 9 : NOT_IMPLEMENTED : Could not find an implementation for Equal({n}) node with name "
     "'node_{name}'"),
    (Status.ERROR, Stage.CONVERT, "openvino._pyopenvino.OpConversionFailure",
     "Check 'false' failed at src/frontends/common_translators/src/unconverted_ops_report.cpp:{n}:\nFrontEnd API "
     "failed with OpConversionFailure:\nModel wasn't fully converted.\nSummary:\n-- No conversion rule found for "
     "operations: aten._upsample_bicubic2d_aa.default"),
    (Status.UNSUPPORTED, Stage.COMPILE, "RuntimeError",
     "Exception from src/inference/src/cpp/core.cpp:{n}:\nCheck 'newNode' failed at src/plugins/intel_cpu/src/"
     "node.cpp:{n}:\nUnsupported operation of type: Convolution name: {name}/aten.convolution.default/Convolution\n"
     "Details:\nNot Implemented:\nDoesn't support dynamic weights shape"),
    (Status.ERROR, Stage.RUN, "RuntimeError",
     "Exception from src/inference/src/cpp/infer_request.cpp:{n}:\nParameterMismatch: Failed to set tensor for input "
     "with precision: f16, since the model input tensor precision is: bf16"),
    (Status.CRASH, Stage.RUN, "SIGSEGV",
     "Fatal Python error: Segmentation fault\n\nCurrent thread 0x{h} (most recent call "
     "first):\n  File \"/usr/lib/python3/site-packages/openvino/runtime/{name}.py\", line {n} in infer"),
    (Status.CRASH, Stage.RUN, "SIGABRT", "terminate called after throwing an instance of 'c10::Error'\n  what():  "
     "CUDA error: an illegal memory access was encountered at {n}"),
    (Status.TIMEOUT, Stage.RUN, "timeout", "Compiling kernel {name} ... {n} of {n}"),
    (Status.OOM, Stage.RUN, "memory", "allocated {n} bytes for tensor of shape {s}"),
]
CAUSE = {Status.CRASH: "signal:{t}", Status.TIMEOUT: "limit:timeout {n}s", Status.OOM: "limit:memory {n}GiB"}


def _fill(fmt: str, r: random.Random) -> str:
    """One message of a format, with fresh numbers, shapes, hex ids and generated names."""
    out = fmt
    while "{" in out:
        out = out.replace("{n}", str(r.randint(1, 99_999)), 1).replace("{h}", f"{r.getrandbits(40):x}", 1)
        out = out.replace("{s}", str([r.randint(1, 1023) for _ in range(r.randint(1, 4))]), 1)
        name = f"{r.choice(['add', 'convolution', 'getitem', 'buf', 'arg'])}_{r.randint(1, 999)}"
        out = out.replace("{name}", name, 1)
        out = out.replace("{t}", "SIGSEGV")
    return out


def _lists(rng, n: int, vocab: np.ndarray, lo: int, hi: int) -> pa.ListArray:
    lengths = rng.integers(lo, hi + 1, n)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    zipf = 1 / np.arange(1, len(vocab) + 1)  # a few operators are everywhere, most are rare
    picks = rng.choice(len(vocab), offsets[-1], p=zipf / zipf.sum())
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(vocab).take(pa.array(picks)))


def generate(run_dir: Path, n: int, seed: int = 0) -> dict:
    """Write ``n`` records (a multiple of the backends) and return the expected crash-cluster count."""
    rng = np.random.default_rng(seed)
    nv = n // len(BACKENDS)
    n = nv * len(BACKENDS)
    ops = np.array([f"aten.op{i}.default" for i in range(400)], dtype=object)
    muts = np.array([f"mutator_{c}" for c in "abcdefghijklmnopqrstuvwxyzABCDE"], dtype=object)
    nseeds, nfam = 5000, 300
    seed_of = rng.integers(0, nseeds, nv)
    src = np.array(["timm", "torchvision", "transformers", "ops"], dtype=object)[seed_of % 4]
    seed_ids = np.array([f"{s}/model_{i}" for i, s in zip(seed_of, src)], dtype=object)
    variant_ids = np.array([f"{s}#{i}" for i, s in enumerate(seed_ids)], dtype=object)
    v_ops, v_muts = _lists(rng, nv, ops, 1, 30), _lists(rng, nv, muts, 0, 3)
    vi = np.tile(np.arange(nv), len(BACKENDS))  # row -> variant
    bi = np.repeat(np.arange(len(BACKENDS)), nv)  # row -> backend
    status = rng.choice(list(STATUS_P), n, p=list(STATUS_P.values())).astype(object)
    status[bi < 2] = Status.OK
    fmt_i = np.full(n, -1)
    expected = set()
    stack_dev = np.array([b.split("@")[0].removesuffix("-f32") + "@" + b.split("@")[1] for b in BACKENDS])
    for st in (Status.ERROR, Status.UNSUPPORTED, Status.CRASH, Status.TIMEOUT, Status.OOM):
        rows = np.flatnonzero(status == st)
        choices = [i for i, f in enumerate(FORMATS) if f[0] == st]
        fmt_i[rows] = np.asarray(choices)[rng.integers(0, len(choices), len(rows))]
        expected |= {(stack_dev[b], f if st not in LIMITS else st) for b, f in zip(bi[rows], fmt_i[rows])}
    failed = fmt_i >= 0
    message = np.full(n, None, dtype=object)
    cause = np.full(n, None, dtype=object)
    r = random.Random(seed)
    message[failed] = [_fill(FORMATS[i][3], r) for i in fmt_i[failed]]
    cause[failed] = [_fill(CAUSE[FORMATS[i][0]], r) if FORMATS[i][0] in CAUSE else None for i in fmt_i[failed]]
    stage = np.where(failed, np.array([f[1] for f in FORMATS] + [None], dtype=object)[fmt_i], None)
    err = np.where(failed, np.array([f[2] for f in FORMATS] + [None], dtype=object)[fmt_i], None)
    mism = status == Status.MISMATCH
    done = (status == Status.OK) | mism
    tol_ratio = np.where(done, 10 ** rng.uniform(-3, 0, n), np.nan)
    tol_ratio[mism] = 10 ** rng.uniform(0, 7, int(mism.sum()))
    verdict = np.where(bi == 0, None, np.where(bi == 1, Verdict.ORACLE, Verdict.AGREE)).astype(object)
    verdict[mism] = rng.choice([Verdict.TARGET_DIVERGENT, Verdict.AMPLIFIED, Verdict.ILL_CONDITIONED], int(mism.sum()),
                               p=[.7, .2, .1])
    verdict[~done] = None
    flat_ops = np.asarray(v_ops.values.to_numpy(zero_copy_only=False))
    first_op = np.where(mism, flat_ops[v_ops.offsets.to_numpy()[:-1][vi]], None)
    skipped = mism & (rng.random(n) < 0.3)  # the ledger left these to another variant of the seed
    first_op[skipped] = None
    align_error = np.where(skipped, "not run: being located on another variant", None)
    explained = mism & np.isin(bi, [4, 5]) & (rng.random(n) < 0.5)
    explanation = np.where(explained, "bfloat16", None)
    probe = rng.choice(["example", "special:nan:single", "random:large", "ties"], n).astype(object)
    cols = {
        "campaign": np.full(n, "bench", dtype=object), "variant_id": variant_ids[vi], "seed_id": seed_ids[vi],
        "backend": np.array(BACKENDS, dtype=object)[bi], "seed_source": src[vi],
        "family": np.array([f"family_{i}" for i in range(nfam)], dtype=object)[(seed_of % nfam)][vi],
        "mutations": v_muts.take(pa.array(vi)), "ops": v_ops.take(pa.array(vi)),
        "node_count": rng.integers(1, 400, nv)[vi], "stack": stack_dev[bi].astype(object),
        "device": np.array([b.split("@")[1] for b in BACKENDS], dtype=object)[bi],
        "status": status, "stage": stage, "error_type": err, "message": message, "cause": cause,
        "verdict": verdict,
        "symptom": np.where(mism, rng.choice([Symptom.NUMERIC, Symptom.NONFINITE, Symptom.SHAPE], n), None),
        "first_div_op": first_op, "output_dtype": np.where(done, "float32", None), "align_error": align_error,
        "explanation": explanation, "probe": probe,
        "tol_ratio": tol_ratio, "tol_needed": tol_ratio * 1e-5,
        "task_agree": np.where(mism & (rng.random(n) < 0.2), rng.random(n), np.nan),
        "latency_ms": np.where(done, 10 ** rng.uniform(-1, 2, n), np.nan),
    }
    cols["stack"] = np.array([s.split("@")[0] for s in cols["stack"]], dtype=object)
    schema = arrow_schema()
    arrays = {f.name: pa.nulls(n, f.type) if f.name not in cols else cols[f.name] if isinstance(cols[f.name], pa.Array)
              else pa.array(cols[f.name], f.type, from_pandas=True) for f in schema}
    arrays["schema_version"] = pa.array(np.ones(n, dtype=np.int64))
    table = pa.table(arrays, schema=schema)
    store = RecordStore(run_dir)
    for b, name in enumerate(BACKENDS):
        part = table.filter(pa.array(bi == b))
        store.folder.write_table(part, "records", name, f"part-bench-{b:02d}.parquet")
    (run_dir / "campaign.yaml").write_text("name: bench\nbackends: {reference: eager@cpu, oracle: eager-fp64@cpu}\n")
    return {"records": n, "expected_crash_clusters": len(expected)}


def measure(run_dir: str) -> None:
    """Child process: load, cluster and tabulate; print a JSON line of figures."""
    import pyarrow as pa_

    from gapfuzz.analysis.api import load_run

    t0 = time.perf_counter()
    run = load_run(run_dir)
    c = run.clusters()
    t1 = time.perf_counter()
    tables = {"support": run.support(), "portability": run.portability(), "slowdown": run.slowdown_summary(),
              "tolerance": run.tolerance_curve(), "divergence": run.divergence()}
    t2 = time.perf_counter()
    print(json.dumps({"records": len(run.records(["backend"])), "clusters": len(c),
                      "crash_clusters": int((c["kind"] == Kind.FAILURE).sum()),
                      "discrepancy_clusters": int((c["kind"] != Kind.FAILURE).sum()), "cluster_s": t1 - t0,
                      "tables_s": t2 - t1, "total_s": t2 - t0, "support_rows": len(tables["support"]),
                      "peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
                      "arrow_peak_gib": pa_.default_memory_pool().max_memory() / 2**30}))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--keep", help="write the run folder here and keep it")
    ap.add_argument("--measure", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.measure:
        measure(args.measure)
        return 0
    with tempfile.TemporaryDirectory(prefix="gf-bench-") as tmp:
        run_dir = Path(args.keep or tmp) / "bench"
        t0 = time.perf_counter()
        info = generate(run_dir, args.records)
        print(f"generated {info['records']:,} records in {time.perf_counter() - t0:.1f} s "
              f"({sum(p.stat().st_size for p in run_dir.rglob('*.parquet')) / 2**20:.0f} MiB of Parquet)")
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, __file__, "--measure", str(run_dir)], capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if proc.returncode:
            print(proc.stderr, file=sys.stderr)
            return 1
        r = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"records        {r['records']:,}\nclusters       {r['clusters']} ({r['crash_clusters']} crash, "
          f"{r['discrepancy_clusters']} discrepancy; {info['expected_crash_clusters']} crash clusters expected)\n"
          f"load+cluster   {r['cluster_s']:.1f} s\nport. tables   {r['tables_s']:.1f} s\n"
          f"total          {r['total_s']:.1f} s (child process wall, with interpreter start: {wall:.1f} s)\n"
          f"peak RSS       {r['peak_rss_gib']:.2f} GiB (Arrow pool peak {r['arrow_peak_gib']:.2f} GiB)")
    ok = r["total_s"] < BUDGET_S and r["peak_rss_gib"] < BUDGET_GIB
    split = r["crash_clusters"] != info["expected_crash_clusters"]
    if split:
        print("messages that differ only in numbers, shapes or names were split (or merged) into wrong clusters")
    print("within budget" if ok else f"OVER BUDGET ({BUDGET_S:.0f} s, {BUDGET_GIB:.0f} GiB)")
    return 0 if ok and not split else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python
"""A campaign of 100,000 runs on a multi-node Ray cluster on loopback: the pipeline itself, measured.

    python scripts/bench_cluster.py [--runs 100000] [--out DIR] [--no-kills]

The cluster (``scripts/loopback_cluster.py``): a head and a CPU node with the CPU pool (builds and
CPU runs), two nodes advertising ``npu`` and one ``xpu``; a second ``xpu`` node joins in the middle,
and the first ``npu`` node and the CPU node are stopped (SIGKILL of their raylets and all under
them) before that: variants the CPU node built lose their inputs and are built again. The campaign: single
operator seeds (float32), eager reference, float64 oracle and an eager copy on the CPU, and the
test-only host stack (eager on the host CPU) on ``npu`` and ``xpu``: the backends cost an eager
call, so what is measured is the driver, the transport, the workers' bookkeeping and the writing.
It runs ``gapfuzz run`` (the console entry point) and samples the driver and the workers from
``/proc``. Then: ``--resume`` on the finished folder (the time to skip every done run), and a
smaller campaign run clean and again with the driver killed by SIGKILL at three moments (while its
workers start, at half, near the end) and resumed after each, compared record by record.

Prints each figure beside its goal: driver CPU at most 1 ms per run, driver and worker memory
growth under 200 MB, resume of 100,000 done runs under 10 s, no run lost or duplicated.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scripts.loopback_cluster import LoopbackCluster, cpu_s, machine_busy_s, rss_mb  # noqa: E402

PROBES, PER_SEED = 8, 10
BACKENDS = 5  # reference, oracle, eager copy, host@npu, host@xpu
HOST = "tests.stacks.fake_npu:HostDevice"
XPU_NODE = {"GPU": 1, "accelerator_type:Intel-GPU-Max-1550": 1}  # what Ray detects on an Intel GPU node


def campaign(name: str, seeds: int) -> str:
    return f"""name: {name}
seeds: [{{source: ops, include: ["ops/*/float32/0"], limit: {seeds}}}]
variants: {{per_seed: {PER_SEED}, mutations: 1}}
sizes: {{per_seed: 0}}
probes: {{per_variant: {PROBES}}}
backends:
  reference: eager@cpu
  oracle: eager-fp64@cpu
  targets: [{{backend: eager@cpu, label: eager-copy}}, {{class: "{HOST}", device: npu}}, \
{{class: "{HOST}", device: xpu}}]
pools:
  cpu: {{workers: auto}}
  npu: {{workers: auto, cpus_per_worker: 0}}
  xpu: {{workers: auto, cpus_per_worker: 0}}
run: {{repeats: 0}}
"""


class RecordCount:
    """Rows written so far, from the Parquet footers (each file read once)."""

    def __init__(self, run_dir: Path):
        self.dir, self.rows = run_dir / "records", {}

    def __call__(self) -> int:
        for f in self.dir.glob("*/*.parquet") if self.dir.is_dir() else []:
            if f not in self.rows and not f.parent.name.startswith("."):  # .tmp: files being written
                try:
                    self.rows[f] = pq.read_metadata(f).num_rows
                except OSError:
                    continue
        return sum(self.rows.values())


class Sampler(threading.Thread):
    """Once a second: driver CPU and memory, the workers' memory, records written."""

    def __init__(self, pid: int, cluster: LoopbackCluster, count: RecordCount):
        super().__init__(daemon=True)
        self.pid, self.cluster, self.count = pid, cluster, count
        self.samples: list[dict] = []
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.is_set():
            workers = self.cluster.worker_pids()
            s = {"t": time.monotonic(), "records": self.count(), "driver_cpu_s": cpu_s(self.pid),
                 "driver_mb": rss_mb(self.pid), "machine_cpu_s": machine_busy_s(),
                 "workers_mb": sum(rss_mb(p) for p in workers), "workers": len(workers)}
            if s["driver_mb"]:
                self.samples.append(s)
            self.stopped.wait(1.0)


def gapfuzz(*args, env) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "gapfuzz.fuzzer.cli", *map(str, args)], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for(cond, proc: subprocess.Popen, every: float = 0.5) -> bool:
    while proc.poll() is None:
        if cond():
            return True
        time.sleep(every)
    return False


def records(run_dir: Path) -> pd.DataFrame:
    return pd.read_parquet(run_dir / "records", columns=["variant_id", "backend", "probe", "status", "error_type",
                                                        "worker", "device"])


def at(samples: list[dict], records: float) -> dict:
    return next((s for s in samples if s["records"] >= records), samples[-1])


def main_campaign(cluster: LoopbackCluster, out: Path, runs: int, faults: bool) -> dict:
    seeds = math.ceil(runs / (PER_SEED * PROBES * BACKENDS) * 1.1)
    path = out / "scale.yaml"
    path.write_text(campaign("scale", seeds))
    run_dir = out / "scale"
    env = cluster.env
    t0 = time.monotonic()
    proc = gapfuzz("run", path, "--out", run_dir, "--address", cluster.address, "--quiet", env=env)
    count = RecordCount(run_dir)
    sampler = Sampler(proc.pid, cluster, count)
    sampler.start()
    events = {}
    if faults:
        if wait_for(lambda: count() >= 0.35 * runs, proc):
            events["npu and cpu nodes stopped at records"] = count()
            events["processes killed"] = sum(cluster.stop(n) for n in cluster.nodes if n.name in ("npu-a", "cpu-b"))
        if wait_for(lambda: count() >= 0.5 * runs, proc):
            events["xpu node joined at records"] = count()
            cluster.add("xpu-late", XPU_NODE)
    stdout, stderr = proc.communicate()
    wall = time.monotonic() - t0
    sampler.stopped.set()
    sampler.join()
    if proc.returncode != 0:
        raise SystemExit(f"gapfuzz run failed ({proc.returncode}): {stderr.strip()[-2000:]}")
    s = sampler.samples
    first = next(x for x in s if x["records"] > 0)
    n = count()
    last = at(s, n)  # when the last record was written: after it the workers stop and the CLI prints its summary
    stats = json.loads(sorted((run_dir / "stats").glob("*.json"))[-1].read_text())
    busy = sum(w["busy_s"] for w in stats["workers"])
    serving = sum(w.get("serving_s", w["alive_s"]) for w in stats["workers"])
    df = records(run_dir)
    dup = int(df.duplicated(["variant_id", "backend", "probe"]).sum())
    lost = int((df["error_type"] == "WorkerLost").sum())
    xpu_nodes = df.loc[df["device"] == "xpu", "worker"].str.split("@").str[1].nunique()
    npu_nodes = df.loc[df["device"] == "npu", "worker"].str.split("@").str[1].nunique()
    return {"seeds": seeds, "records": n, "variants": int(df["variant_id"].nunique()), "wall_s": wall,
            "steady_s": last["t"] - first["t"], "driver_cpu_s": s[-1]["driver_cpu_s"],
            "driver_cpu_steady_s": last["driver_cpu_s"] - first["driver_cpu_s"],
            "records_steady": last["records"] - first["records"],
            "driver_mb": [first["driver_mb"], at(s, n / 2)["driver_mb"], last["driver_mb"],
                          max(x["driver_mb"] for x in s)],
            "workers_mb": [first["workers_mb"], at(s, n / 2)["workers_mb"], last["workers_mb"]],
            "worker_procs": [first["workers"], at(s, n / 2)["workers"], last["workers"]],
            "busy_share": busy / serving if serving else 0.0,
            "machine_busy": ((last["machine_cpu_s"] - first["machine_cpu_s"])
                             / (os.cpu_count() * max(1e-9, last["t"] - first["t"]))),
            "pools": stats.get("pools"), "requeued": stats.get("lost", 0), "rebuilt": stats.get("rebuilt", 0),
            "duplicates": dup, "worker_lost_records": lost, "npu_nodes_used": int(npu_nodes),
            "xpu_nodes_used": int(xpu_nodes), "events": events, "run_dir": str(run_dir), "campaign": str(path)}


def resume_time(cluster: LoopbackCluster, m: dict) -> dict:
    env = cluster.env
    before = RecordCount(Path(m["run_dir"]))()
    t0 = time.monotonic()
    proc = gapfuzz("run", m["campaign"], "--out", m["run_dir"], "--address", cluster.address, "--resume", "--quiet",
                   env=env)
    _, err = proc.communicate()
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        raise SystemExit(f"resume failed: {err.strip()[-1000:]}")
    from gapfuzz.results.store import RecordStore

    t1 = time.perf_counter()
    done = len(RecordStore(m["run_dir"]).done_keys())
    return {"resume_s": wall, "done_keys_s": time.perf_counter() - t1, "done_pairs": done,
            "new_records": RecordCount(Path(m["run_dir"]))() - before}


def driver_kills(cluster: LoopbackCluster, out: Path, seeds: int) -> dict:
    env = cluster.env
    path = out / "kills.yaml"
    path.write_text(campaign("kills", seeds))
    clean, killed = out / "kills-clean", out / "kills-killed"
    proc = gapfuzz("run", path, "--out", clean, "--address", cluster.address, "--quiet", env=env)
    _, err = proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"clean run failed: {err.strip()[-1000:]}")
    total = RecordCount(clean)()
    count = RecordCount(killed)
    moments = [("while its workers start", lambda: (killed / "campaign.yaml").exists(), 3.0),
               ("at half the records", lambda: count() >= total / 2, 0.0),
               ("near the end", lambda: count() >= 0.9 * total, 0.0)]
    kills = []
    for i, (what, cond, delay) in enumerate(moments):
        args = ["run", path, "--out", killed, "--address", cluster.address, "--quiet", *(["--resume"] if i else [])]
        proc = gapfuzz(*args, env=env)
        if wait_for(cond, proc, every=0.1):
            time.sleep(delay)
            proc.kill()  # SIGKILL: no flush, no clean-up
            proc.wait()
            kills.append({"moment": what, "records_on_disk": count()})
        else:
            kills.append({"moment": what, "missed": f"the run ended first ({proc.returncode})"})
        time.sleep(2.0)  # Ray notices the driver is gone and frees its workers' resources
    proc = gapfuzz("run", path, "--out", killed, "--address", cluster.address, "--quiet", "--resume", env=env)
    _, err = proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"final resume failed: {err.strip()[-1000:]}")
    from scripts.same_records import differences, load

    a, b = records(clean), records(killed)
    diff = differences(load(str(clean)), load(str(killed)))
    return {"clean_records": len(a), "killed_records": len(b),
            "duplicates": int(b.duplicated(["variant_id", "backend", "probe"]).sum()), "differences": len(diff),
            "first_differences": diff[:5], "kills": kills}


def report(m: dict, r: dict | None, k: dict | None) -> None:
    per_run = 1000 * m["driver_cpu_s"] / m["records"]
    steady = 1000 * m["driver_cpu_steady_s"] / max(1, m["records_steady"])
    d, w = m["driver_mb"], m["workers_mb"]
    print(f"campaign: {m['records']} runs ({m['variants']} variants of {m['seeds']} operator seeds, {BACKENDS} "
          f"backends, {PROBES} probes) in {m['wall_s']:.0f} s on {os.cpu_count()} cores; "
          f"pools at the end: {m['pools']}")
    print(f"runs per second: {m['records'] / m['wall_s']:.0f} overall, "
          f"{m['records_steady'] / max(1e-9, m['steady_s']):.0f} from the first record written to the last")
    print(f"driver CPU per run: {per_run:.3f} ms in all (start-up included), {steady:.3f} ms while running  "
          f"[goal <= 1 ms: {'met' if per_run <= 1 else 'NOT met'}]")
    print(f"driver memory (MB) at the first, middle and last record: {d[0]:.0f} / {d[1]:.0f} / {d[2]:.0f}, growth "
          f"{d[2] - d[0]:+.0f} MB  [goal < 200 MB: {'met' if d[2] - d[0] < 200 else 'NOT met'}]; peak {d[3]:.0f} MB "
          f"(after the campaign, the CLI's summary reads the records)")
    per = [x / max(1, c) for x, c in zip(w, m["worker_procs"])]
    print(f"worker memory (MB) at the first, middle and last record: {w[0]:.0f} / {w[1]:.0f} / {w[2]:.0f} over "
          f"{'/'.join(map(str, m['worker_procs']))} processes (actors and sandboxes), per process {per[0]:.0f} / "
          f"{per[1]:.0f} / {per[2]:.0f}, growth {per[2] - per[0]:+.0f} MB  [goal < 200 MB: "
          f"{'met' if per[2] - per[0] < 200 else 'NOT met'}]")
    print(f"workers kept busy: {m['busy_share']:.0%} of their time from ready to shut down (busy = inside a build or "
          f"a variant's runs); the machine's cores were {m['machine_busy']:.0%} busy while records were written")
    if m["events"]:
        print(f"faults: {m['events']}; jobs run again after a lost worker: {m['requeued']} ({m['rebuilt']} of them "
              f"variants built again, their inputs gone with the node); npu nodes that ran: "
              f"{m['npu_nodes_used']}, xpu nodes that ran: {m['xpu_nodes_used']} (the late one included when 2)")
    print(f"lost or duplicated: {m['duplicates']} duplicate (variant, backend, probe) rows, "
          f"{m['worker_lost_records']} WorkerLost records")
    if r:
        print(f"resume of {r['done_pairs']} done (variant, backend) pairs ({m['records']} runs): {r['resume_s']:.1f} s "
              f"for the whole command ({r['done_keys_s']:.2f} s reading what is done), {r['new_records']} runs added "
              f"[goal < 10 s: {'met' if r['resume_s'] < 10 else 'NOT met'}]")
    if k:
        print(f"driver killed (SIGKILL) {len(k['kills'])} times: {k['kills']}")
        print(f"  then resumed: {k['killed_records']} records vs {k['clean_records']} in the clean run, "
              f"{k['duplicates']} duplicates, {k['differences']} differing values {k['first_differences']}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=100_000, help="runs the main campaign aims at (at least)")
    p.add_argument("--out", type=Path, help="folder for the campaigns (default: a temporary one)")
    p.add_argument("--no-kills", action="store_true", help="skip the node stop and the driver kills")
    p.add_argument("--kill-seeds", type=int, default=20, help="seeds of the driver-kill campaign")
    a = p.parse_args()
    out = a.out or Path(tempfile.mkdtemp(prefix="gapfuzz-cluster-"))
    out.mkdir(parents=True, exist_ok=True)
    cluster = LoopbackCluster({"PYTHONPATH": str(ROOT)})  # its workers import gapfuzz and the test stack
    try:
        cluster.start(head_cpus=2)
        cluster.add("cpu-b", {}, cpus=1)
        cluster.add("npu-a", {"NPU": 1})
        cluster.add("npu-b", {"NPU": 1})
        cluster.add("xpu-a", XPU_NODE)
        m = main_campaign(cluster, out, a.runs, faults=not a.no_kills)
        r = resume_time(cluster, m)
        k = None if a.no_kills else driver_kills(cluster, out, a.kill_seeds)
    finally:
        cluster.shutdown()
    report(m, r, k)
    (out / "figures.json").write_text(json.dumps({"campaign": m, "resume": r, "kills": k}, indent=1, default=str))
    print(f"figures: {out / 'figures.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

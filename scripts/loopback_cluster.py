"""A real multi-node Ray cluster on one machine (every node on 127.0.0.1), for the cluster benchmark.

Each node is a ``ray start`` raylet of its own, advertising the CPUs and custom resources it is
given; a node is stopped the way a machine fails, by SIGKILL of its raylet and everything under it,
and one can join at any time. Processes are read from ``/proc`` (Linux).
"""
from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

COMMON = ["--node-ip-address=127.0.0.1", "--disable-usage-stats"]


def free_port() -> int:
    """A free port above Ray's worker port range (10002-19999)."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port > 20000:
            return port


def children() -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            out.setdefault(ppid, []).append(int(entry.name))
    return out


def descendants(pid: int, tree: dict[int, list[int]] | None = None) -> list[int]:
    tree, out, todo = tree or children(), [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += tree.get(p, [])
    return out


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def cpu_s(pid: int) -> float:
    """User and system CPU seconds of one process (all its threads)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_busy_s() -> float:
    """CPU seconds the whole machine has spent outside idle and iowait, over all cores."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


@dataclass
class Node:
    name: str
    port: int  # its node manager port: how its raylet is found
    resources: dict


class LoopbackCluster:
    def __init__(self, env: dict | None = None):
        self.temp = tempfile.mkdtemp(prefix="gfc", dir="/tmp")  # short: Ray's socket paths are length-limited
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32), **(env or {})}
        self.nodes: list[Node] = []

    def start(self, head_cpus: int) -> None:
        port = free_port()
        self._ray("start", "--head", f"--port={self.port}", f"--num-cpus={head_cpus}", f"--temp-dir={self.temp}",
                  "--include-dashboard=false", f"--node-manager-port={port}")
        self.nodes.append(Node("head", port, {"CPU": head_cpus}))

    def add(self, name: str, resources: dict, cpus: int = 0) -> Node:
        """A node with ``resources`` (Ray's ``GPU`` among them goes to ``--num-gpus``, as Ray asks)."""
        port = free_port()
        custom = {k: v for k, v in resources.items() if k != "GPU"}
        gpus = [f"--num-gpus={resources['GPU']}"] if "GPU" in resources else []
        self._ray("start", f"--address={self.address}", f"--num-cpus={cpus}", *gpus,
                  f"--resources={json.dumps(custom)}", f"--node-manager-port={port}")
        node = Node(name, port, {"CPU": cpus, **resources})
        self.nodes.append(node)
        return node

    def node_id(self, node: Node) -> str:
        """Ray's id of a node (gapfuzz's worker names carry its first eight characters)."""
        code = ("import ray, logging; ray.init(address=%r, logging_level=logging.ERROR); "
                "print([n['NodeID'] for n in ray.nodes() "
                "if n['NodeManagerPort'] == %d][0])") % (self.address, node.port)
        out = subprocess.run([sys.executable, "-c", code], env=self.env, capture_output=True, text=True, check=True)
        return out.stdout.strip().splitlines()[-1]

    def raylet(self, node: Node) -> int | None:
        flag = f"--node_manager_port={node.port} "
        return next((int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()
                     and "raylet/raylet" in (c := cmdline(int(p.name))) and flag in c + " " and self.temp in c), None)

    def stop(self, node: Node) -> int:
        """Kill the node like a machine that fails: its raylet and every process under it, at once."""
        pid = self.raylet(node)
        if pid is None:
            return 0
        pids = descendants(pid)
        for p in pids:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return len(pids)

    def worker_pids(self) -> list[int]:
        """The gapfuzz workers of this cluster: pool actors and their sandboxes, on every node."""
        out, tree = [], children()
        for node in self.nodes:
            pid = self.raylet(node)
            for p in descendants(pid, tree) if pid else []:
                c = cmdline(p)
                if "PoolWorker" in c or "workers.run.executor" in c:
                    out.append(p)
        return out

    def _ray(self, *args: str) -> None:
        proc = subprocess.run(["ray", *args, *COMMON], env=self.env, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"ray {' '.join(args[:2])}: {proc.stderr.strip().splitlines()[-1:]}")

    def shutdown(self) -> None:
        subprocess.run(["pkill", "-9", "-f", self.temp], check=False)
        shutil.rmtree(self.temp, ignore_errors=True)

"""Worker pools: one per device kind, each worker a Ray actor that owns a warm sandbox.

A worker asks Ray for its device's resource under the name Ray itself detects it by (``GPU`` for
NVIDIA, AMD, Intel and Apple GPUs, with Ray's accelerator type where the kind is not NVIDIA's: an Intel
``xpu`` node is a ``GPU`` node whose ``accelerator_type`` is Intel's; ``NPU`` for Ascend), so on a
heterogeneous cluster each run lands on a machine that has the device, and a node Ray set up on its own
is used as it is. How many workers a pool has, as nodes come and go, is the
``workers.run.fleet``'s; a CUDA pool of ``workers: auto`` on one machine alone is sized here, from its
GPUs' free memory and its cores, since runs take milliseconds and a lone worker leaves the GPU idle.
A worker answers ``doing()`` (the pair it works on, its stage and age: ``workers.run.budget``) in a thread
of its own while it runs, so the driver's progress line can name the oldest pair in flight.
"""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field

import ray

from gapfuzz.workers.run.budget import PairClock
from gapfuzz.workers.run.executor import Executor
from gapfuzz.workers.run.messages import CallReply, PayloadReply, RunRequest
from gapfuzz.workers.run.runner import run_variant
from gapfuzz.workers.run.sandbox import Fault, RemoteError, Sandbox

AUTO = "auto"  # pool size: as many workers as the cluster's resources place, growing as nodes join
CUDA_WORKER_GB = 4.0  # GPU memory a warm CUDA sandbox is taken to need: its context, allocator cache, a compile
GPU_DEVICES = ("cuda", "xpu", "mps")  # device kinds Ray counts as its GPU resource
RAY_RESOURCES = {"npu": "NPU"}  # Ray's own resource names of the other device kinds (ray._private.accelerators)
XPU_TYPE = "Intel-GPU-Max-1550"  # an xpu pool's default accelerator type (ray.util.accelerators.INTEL_MAX_1550)
ACCELERATOR_TYPE = "accelerator_type:"  # the resource Ray gives a node of that type, 0.001 a worker of it
WATCH_GROUP = "watch"  # the actor's concurrency group of ``doing``: answered while a run holds the default one


@dataclass
class GpuReading:
    utilisation: float | None  # percent of the last sample period a kernel ran
    free_gb: float | None


def parse_smi(text: str) -> list[GpuReading]:
    """``nvidia-smi --query-gpu=utilization.gpu,memory.free --format=csv,noheader,nounits`` (MiB), one GPU a line."""
    def number(cell: str) -> float | None:
        try:
            return float(cell)
        except ValueError:  # "[N/A]", "[Not Supported]"
            return None
    rows = [[c.strip() for c in line.split(",")] for line in text.splitlines() if line.strip()]
    return [GpuReading(number(u), None if number(m) is None else number(m) / 1024) for u, m in
            (r for r in rows if len(r) == 2)]


def read_gpus(timeout_s: float = 2.0) -> list[GpuReading]:
    """This machine's GPUs (those ``CUDA_VISIBLE_DEVICES`` names), read by ``nvidia-smi`` so that this process
    holds no CUDA context; [] where there is none or it does not answer."""
    smi, visible = shutil.which("nvidia-smi"), os.environ.get("CUDA_VISIBLE_DEVICES")
    if smi is None or (visible is not None and not visible.strip()):
        return []
    try:
        out = subprocess.run([smi, "--query-gpu=utilization.gpu,memory.free", "--format=csv,noheader,nounits",
                              *(["-i", visible] if visible else [])], capture_output=True, text=True,
                             timeout=timeout_s, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return parse_smi(out)


def gpu_utilisation() -> list[float]:
    """Each GPU's utilisation in percent, for the progress line; [] where it cannot be read."""
    return [g.utilisation for g in read_gpus() if g.utilisation is not None]


def cuda_workers_per_gpu(cores: int, free_gb: list[float], per_worker_gb: float = CUDA_WORKER_GB) -> int:
    """Warm CUDA workers per GPU on one machine: half its cores, shared among its GPUs, and no more than the
    GPU with the least free memory holds; at least one."""
    by_cores = cores // 2 // max(1, len(free_gb))
    by_memory = int(min(free_gb) // per_worker_gb) if free_gb else 1
    return max(1, min(by_cores, by_memory))


def gpu_share(workers_per_gpu: int) -> float:
    """The GPU fraction each of ``workers_per_gpu`` workers asks Ray for, rounded down to Ray's precision
    (1e-4) so that all of them fit on one GPU."""
    return math.floor(1e4 / max(1, workers_per_gpu)) / 1e4


def sandbox_env(device: str, env: dict | None, gpu_fraction: float | None, cores: int) -> dict:
    """A worker's sandbox environment: the pool's ``env`` over, for a CUDA worker, Inductor's parallel compile
    on its share of the machine's cores (the sandbox's default, one thread, suits a CPU pool of one worker a
    core) and one compile cache for every worker of the machine (Inductor's own, resolved once here unless
    the environment names one), so that a graph one worker compiled is a cache hit for the others."""
    if device != "cuda":
        return dict(env or {})
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    sharing = max(1, round(1 / gpu_fraction)) if gpu_fraction else 1  # the workers on this worker's GPU
    return {"TORCHINDUCTOR_COMPILE_THREADS": str(max(2, cores // sharing)), "TORCHINDUCTOR_CACHE_DIR": cache_dir(),
            **(env or {})}


@dataclass
class PoolSettings:
    device: str = "cpu"
    workers: int | str = 1  # or AUTO
    cpus_per_worker: float = 1.0
    gpus_per_worker: float = 1.0  # a fraction lets several workers share one large GPU
    memory_gb: float | None = None  # per-worker limit; past it the run ends as status oom
    threads: int = 1  # intra-op threads inside each worker's sandbox
    env: dict = field(default_factory=dict)
    name: str = ""  # the pool's: its device's, or ``device~pins`` for a release of its own (workers.run.releases)
    runtime_env: dict | None = None  # Ray's, for a release's pool: its interpreter, image or pip packages
    accelerator_type: str | None = None  # Ray's accelerator type its nodes must have (A100, Intel-GPU-Max-1100)

    def resources_needed(self) -> dict[str, float]:
        """What one worker takes from its node, by Ray resource name."""
        opts = self.actor_options()
        return {"CPU": opts["num_cpus"], **({"GPU": opts["num_gpus"]} if "num_gpus" in opts else {}),
                **opts.get("resources", {}),
                **({ACCELERATOR_TYPE + opts["accelerator_type"]: 0.001} if "accelerator_type" in opts else {})}

    def on_one_machine(self, cores: int, free_gb: list[float]) -> PoolSettings:
        """This pool on a machine alone (no cluster) with ``cores`` and GPUs with ``free_gb`` free: a CUDA pool of
        ``workers: auto`` gets ``cuda_workers_per_gpu`` workers a GPU, sharing it; any other pool is unchanged."""
        if self.device != "cuda" or self.workers != AUTO or not free_gb:
            return self
        per_gpu = cuda_workers_per_gpu(cores, free_gb)
        return dataclasses.replace(self, workers=per_gpu * len(free_gb), gpus_per_worker=gpu_share(per_gpu))

    def actor_options(self) -> dict:
        opts = {"num_cpus": self.cpus_per_worker, "max_restarts": 0,
                **({"runtime_env": self.runtime_env} if self.runtime_env else {})}
        if self.device in GPU_DEVICES:
            opts["num_gpus"] = self.gpus_per_worker
        elif self.device != "cpu":
            opts["resources"] = {RAY_RESOURCES.get(self.device, self.device.upper()): 1}
        kind = self.accelerator_type or (XPU_TYPE if self.device == "xpu" else None)
        if kind:
            opts["accelerator_type"] = kind
        return opts


class PoolWorker:
    """The Ray actor body; kept a plain class so tests can drive it without Ray."""

    def __init__(self, device: str, index: int, threads: int = 1, memory_gb: float | None = None,
                 env: dict | None = None, gpu_fraction: float | None = None, pool: str | None = None):
        node = ray.get_runtime_context().get_node_id() if ray.is_initialized() else ""
        self.name = f"{pool or device}-{index}@{node[:8]}" if node else f"{pool or device}-{index}"
        self.device = device
        self.sandbox = Sandbox(threads=threads, memory_limit_gb=memory_gb,
                               env=sandbox_env(device, env, gpu_fraction, os.cpu_count() or 1))
        self.sandbox.start()
        self.busy_s = 0.0
        self.started = self.serving = time.monotonic()  # serving: since its sandbox answered (torch imported)
        self.built: set[str] = set()  # variants the current sandbox process built and keeps
        self.built_in = 0  # the sandbox start those belong to
        self.local_loads = 0
        self.clock: PairClock | None = None  # the pairs of the variant it runs now

    def ready(self) -> str:
        self.sandbox.request(Executor.ping, timeout=120)
        self.serving = time.monotonic()
        return self.name

    def run_variant(self, request: RunRequest, home_outputs=None):
        """``request.payload``: the payload, or an ObjectRef, fetched only when this worker's sandbox
        did not build the variant itself."""
        t0 = time.perf_counter()
        fetch, payload, vid = None, request.payload, request.variant_id
        if isinstance(payload, ray.ObjectRef):
            fetch = lambda: ray.get(request.payload)  # noqa: E731
            local = vid in self.built and self.built_in == self.sandbox.starts
            payload = None if local else fetch()
            self.local_loads += local
        self.built.discard(vid)
        self.clock = PairClock.of(request)
        try:
            outcomes, home = run_variant(self.sandbox, dataclasses.replace(request, payload=payload), home_outputs,
                                         self.name, fetch, self.clock)
        finally:
            self.busy_s += time.perf_counter() - t0
            self.clock = None
        return outcomes, home

    @ray.method(concurrency_group=WATCH_GROUP)
    def doing(self) -> dict | None:
        """The pair this worker works on, its stage and age (``PairClock.now``); None between variants."""
        clock = self.clock
        return None if clock is None else {**clock.now(), "worker": self.name}

    def call(self, fn, *args, timeout: float | None = None, keep_payloads: bool = False) -> CallReply:
        """``fn(*args)`` in the sandbox. With ``keep_payloads``, a ``PayloadReply``'s payloads go into the
        object store from here and stay in the sandbox, for this worker to run without a transfer."""
        t0 = time.perf_counter()
        try:
            reply = self.sandbox.request(Executor.call, fn, tuple(args), {}, keep_payloads=keep_payloads,
                                         timeout=timeout)
        except RemoteError as e:
            return CallReply(self.name, error=e.info)
        finally:
            self.busy_s += time.perf_counter() - t0
        if isinstance(reply, Fault):
            return CallReply(self.name, fault=reply)
        if keep_payloads and isinstance(reply, PayloadReply):
            if self.built_in != self.sandbox.starts:
                self.built, self.built_in = set(), self.sandbox.starts
            self.built |= set(reply.payloads)
            reply.payloads = {vid: ray.put(p) for vid, p in reply.payloads.items()}
        return CallReply(self.name, value=reply)

    def stats(self) -> dict:
        now = time.monotonic()
        return {"worker": self.name, "busy_s": self.busy_s, "alive_s": now - self.started,
                "serving_s": now - self.serving, "sandbox_starts": self.sandbox.starts, "local_loads": self.local_loads}

    def shutdown(self) -> None:
        self.sandbox.close()


RemotePoolWorker = ray.remote(concurrency_groups={WATCH_GROUP: 1})(PoolWorker)


@contextlib.contextmanager
def _sigterm_kept():
    """The caller's SIGTERM handler, put back after ``ray.init``, which installs its own in the driver (Python's
    ``sys.exit`` and, in its core worker, a C++ one that prints a stack and aborts: no ``finally`` runs, the
    workers and their sandboxes are left running). ``gapfuzz``'s (``fuzzer.cli.stopping``) then ends a campaign as
    Ctrl-C does; where none was set (Python's default), Ray's stays."""
    main = threading.current_thread() is threading.main_thread()
    previous = signal.getsignal(signal.SIGTERM) if main else None
    try:
        yield
    finally:
        if callable(previous):
            signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def _quiet_unless_it_works():
    """What the process writes to its stderr (C++ included) is held back, and shown only if the block ends
    without an exception: a failure is then the caller's one line."""
    sys.stderr.flush()
    saved, held = os.dup(2), tempfile.TemporaryFile()
    os.dup2(held.fileno(), 2)
    try:
        yield
    except BaseException:
        os.dup2(saved, 2)
        raise
    else:
        os.dup2(saved, 2)
        held.seek(0)
        sys.stderr.write(held.read().decode(errors="replace"))
    finally:
        os.close(saved)
        held.close()


def connect(address: str | None, num_cpus: int | None = None) -> bool:
    """Join the Ray cluster at ``address`` (else at ``RAY_ADDRESS``, as inside a Ray job), or start an embedded
    one with ``num_cpus`` (default: one per core); True when this process started Ray (and so shuts it down)."""
    if ray.is_initialized():
        return False
    address = address or os.environ.get("RAY_ADDRESS") or None
    # a worker Ray kills leaves its calls' unread results to print ~30 lines of ActorDiedError each;
    # the fleet says it in one line of its own (workers.run.fleet.Fleet.lose)
    os.environ.setdefault("RAY_IGNORE_UNHANDLED_ERRORS", "1")
    if address:
        os.environ.setdefault("RAY_gcs_server_port_wait_time_s", "10")  # a cluster that does not answer: ~10 s, not 20
        with _sigterm_kept(), _quiet_unless_it_works():  # Ray prints a warning a second while it retries
            ray.init(address=address, logging_level=logging.ERROR, log_to_driver=False)
        return False
    for attempt in (1, 2):  # a loaded machine can take longer than Ray's 30 s to start a node: once more, longer
        try:
            with _sigterm_kept(), _quiet_unless_it_works():
                ray.init(num_cpus=num_cpus or os.cpu_count() or 1, include_dashboard=False, log_to_driver=False,
                         logging_level=logging.ERROR)
            return True
        except Exception as e:  # noqa: BLE001 - Ray raises a bare Exception when its node times out starting
            ray.shutdown()
            if attempt == 2:
                first = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
                raise ConnectionError(f"the embedded Ray did not start (twice, the second time waiting 120 s): "
                                      f"{first}") from None
            os.environ["RAY_raylet_start_wait_time_s"] = "120"
    return True

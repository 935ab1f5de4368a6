"""The sandboxed process that runs backends: started and watched by a :class:`Sandbox`.

It stays warm across runs (imports and compile caches reused) and dies alone when a
backend segfaults, aborts or is killed for a limit. Requests arrive as pickled tuples on
one pipe; each gets one reply on the other: ``("ok", value)`` or ``("err", description)``.
"""
from __future__ import annotations

import ctypes
import faulthandler
import gc
import importlib
import os
import signal
import statistics
import sys
import time
from multiprocessing.connection import Connection

from . import pipe
from .faults import describe, status_of_error
from .sandbox import rss_bytes

FULL_COLLECT_GROWTH = 256 * 2**20  # bytes of growth (or a quarter, if more) before a full collection
KEEP_BYTES = 1 << 30  # built payloads kept for local loads


def payload_bytes(payload: dict) -> int:
    wires = [*payload.get("tensors", {}).values(), *payload.get("inputs", [])]
    return sum(w["data"].nbytes for w in wires)


def _die_with_parent() -> None:
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except OSError:
            pass


def synchronize(device: str) -> None:
    import torch

    mod = {"cuda": "cuda", "mps": "mps", "xpu": "xpu", "npu": "npu"}.get(device)
    if mod and hasattr(torch, mod):
        getattr(torch, mod).synchronize()


def to_host(out) -> list:
    """Flat outputs, detached on the CPU; non-tensor leaves kept as plain values."""
    import torch

    from .ir import flatten_outputs

    host = []
    for leaf in flatten_outputs(out):
        if isinstance(leaf, torch.Tensor):
            host.append(leaf.detach().to("cpu", copy=True))
        elif leaf is None or isinstance(leaf, (bool, int, float, str)):
            host.append(leaf)
        else:
            host.append(repr(leaf))
    return host


def same_bits(a: list, b: list) -> bool:
    import torch

    from .ir import byte_view

    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
            if x.shape != y.shape or x.dtype != y.dtype:
                return False
            if x.numel() and not torch.equal(byte_view(x), byte_view(y)):
                return False
        elif x != y:
            return False
    return True


def first_call_stage(backend, exc: BaseException) -> str:
    """Lazy compilers (torch.compile) compile on the first call: their errors are compile errors."""
    modules = getattr(backend, "compile_error_modules", ())
    origin = type(exc).__module__ or ""
    return "compile" if any(origin.startswith(m) for m in modules) else "run"


class Executor:
    def __init__(self):
        self.payloads: dict[str, dict] = {}
        self.checksums: dict[str, dict] = {}
        self._modules_frozen = 0
        self._rss_settled = 0  # resident memory after the last full collection
        self._pristine = None
        self.kept: dict[str, dict] = {}  # payloads of variants this process built, oldest first

    def _settle(self) -> None:
        """Collect the last run's cycles before this one, fully only once memory has grown: a full
        collection walks every object the imports made (0.1-0.3 s a run), a young one does not."""
        rss = rss_bytes(os.getpid())
        if rss < self._rss_settled + max(FULL_COLLECT_GROWTH, self._rss_settled // 4):
            gc.collect(1)
            return
        gc.collect()
        self._rss_settled = rss_bytes(os.getpid())

    def load(self, variant_id: str, payload: dict | None = None) -> dict:
        """Deserialise a variant and checksum what arrived. ``payload`` None: a variant this process
        built (see ``call``'s ``keep_key``), which then never crosses a process boundary; the reply
        carries its seed outputs, which the caller would otherwise read from the payload."""
        from .ir import Variant

        local = payload is None
        if local and variant_id not in self.kept:
            raise KeyError(f"variant {variant_id} was not built in this process")
        payload = self.kept.pop(variant_id) if local else payload
        self.payloads, self._pristine = {}, None  # one variant at a time keeps memory flat
        if len(sys.modules) != self._modules_frozen:  # nothing of a variant is alive: freeze what the
            gc.collect()  # imports made, so that full collections skip it
            gc.freeze()
            self._modules_frozen = len(sys.modules)
        self.payloads = {variant_id: payload}
        v = Variant.from_payload(payload, copy=False)  # ours alone; only intact stacks will read it
        self.checksums = {"input_checksum": v.input_checksum(), "weight_checksum": v.weight_checksum()}
        self._pristine = (variant_id, v)
        return {**self.checksums, "seed_outputs": payload.get("seed_outputs")} if local else self.checksums

    def _variant_for(self, variant_id: str, backend):
        """The loaded variant for one backend. Backends that never write what they are given
        (``leaves_variant_intact``) share it; any other gets its own copy, so that each backend
        sees exactly what was sent."""
        from .ir import Variant

        if getattr(backend, "leaves_variant_intact", False) and self._pristine and self._pristine[0] == variant_id:
            return self._pristine[1]
        return Variant.from_payload(self.payloads[variant_id])

    def run(self, variant_id: str, spec: dict, repeats: int = 3) -> dict:
        """Prepare and run one backend on the loaded variant; errors become a result."""
        import torch

        from .ir import clone_exact
        from .registry import BackendSpec

        self._settle()
        bspec = BackendSpec(**spec)
        result = {"status": "ok", "stage": None, **self.checksums}
        device = bspec.device
        stage, started = "compile", None
        try:
            backend = bspec.create()
            variant = self._variant_for(variant_id, backend)
            stage = getattr(backend, "prepare_stage", "compile")
            device = getattr(backend, "input_device", None) or device
            inputs = tuple(t.to(device) for t in variant.inputs)
            calls = [tuple(clone_exact(t) for t in inputs) for _ in range(repeats + 1)]
            with torch.no_grad():
                t0 = started = time.perf_counter()
                try:
                    fn = backend.prepare(variant.gm, inputs, bspec.device)
                except Exception:
                    stage = getattr(backend, "stage", None) or stage
                    raise
                stage = "run"
                t1 = time.perf_counter()
                try:
                    first = to_host(fn(*calls[0]))
                except Exception as e:
                    stage = first_call_stage(backend, e)
                    raise
                synchronize(device)
                t2 = time.perf_counter()
                result["prepare_s"], result["first_run_s"] = t2 - t0, t2 - t1
                times, last = [], first
                for args in calls[1:]:
                    t0 = time.perf_counter()
                    out = fn(*args)
                    synchronize(device)
                    times.append(time.perf_counter() - t0)
                    last = out
                last = to_host(last)
            result["latency_ms"] = 1e3 * statistics.median(times) if times else None
            result["run_s"] = sum(times)
            result["runs"] = len(times)
            result["outputs"] = first
            result["nondeterministic"] = not same_bits(first, last)
            result["inputs_mutated"] = not same_bits(to_host(list(calls[0])), list(variant.inputs))
            result["info"] = dict(getattr(backend, "info", {}) or {})
        except Exception as e:  # noqa: BLE001 - anything a backend raises is a record
            if started is not None and "prepare_s" not in result:
                result["prepare_s"] = time.perf_counter() - started  # the time the failed prepare took
            d = describe(e)
            result.update(d, stage=stage, status=status_of_error(d["error_type"], d["message"]))
        finally:
            self._release(device)
        return result

    def align(self, variant_id: str, spec: dict, compare: dict, reference_device: str = "cpu") -> dict:
        """Tier 2 for one divergent target: the first divergent node, its growth, amplification."""
        from .align import Aligner
        from .compare import Settings
        from .ir import Variant
        from .registry import BackendSpec

        self._settle()
        bspec = BackendSpec(**spec)
        variant = Variant.from_payload(self.payloads[variant_id])
        probe = bspec.create()
        aligner = Aligner(variant, bspec.create, bspec.device, getattr(probe, "input_device", None) or bspec.device,
                          Settings.from_dict(compare), reference_device)
        try:
            return aligner.locate(bool(getattr(probe, "capture_nodes", False)))
        finally:
            self._release(bspec.device)

    def _release(self, device: str) -> None:
        try:
            import torch

            torch._dynamo.reset()
            if device == "cuda" and torch.cuda.is_available():
                gc.collect()  # device memory held by cycles goes back before the next variant
                torch.cuda.empty_cache()
        except Exception:  # noqa: BLE001 - best effort cleanup between runs
            pass

    def call(self, fn_path: str, args: tuple, kwargs: dict, keep_key: str | None = None):
        """``module:function(*args, **kwargs)``. With ``keep_key``, the reply's
        ``["variants"][i][keep_key]`` payloads are also kept here (the newest, up to KEEP_BYTES),
        so that ``load(variant_id)`` in this process needs no transfer."""
        module, _, qual = fn_path.partition(":")
        fn = importlib.import_module(module)
        for part in qual.split("."):
            fn = getattr(fn, part)
        reply = fn(*args, **kwargs)
        if keep_key and isinstance(reply, dict):
            for item in reply.get("variants", []):
                self.kept[item["variant_id"]] = item[keep_key]
            kept_bytes = sum(map(payload_bytes, self.kept.values()))
            while kept_bytes > KEEP_BYTES:
                kept_bytes -= payload_bytes(self.kept.pop(next(iter(self.kept))))
        return reply

    def ping(self) -> int:
        return os.getpid()


def _warm() -> None:
    """Imports that every variant's first run would otherwise make (Dynamo, which the cleanup
    between runs resets, and with it sympy for FX metadata: ~1.5 s), made while the worker starts,
    so that they are start-up time and not a variant's."""
    import torch._dynamo

    torch._dynamo.reset()
    gc.collect()
    gc.freeze()


def serve(rfd: int, wfd: int) -> None:
    _die_with_parent()
    faulthandler.enable(all_threads=False)  # a crash prints the frames it died in (only its own thread:
    # the other threads' stacks vary from run to run and would split one crash into several clusters)
    threads = int(os.environ.get("GAPFUZZ_THREADS", "0"))
    import torch

    if threads > 0:
        torch.set_num_threads(threads)
    _warm()
    inbox, outbox = Connection(rfd, writable=False), Connection(wfd, readable=False)
    ex = Executor()
    pipe.send(outbox, ("ready", os.getpid()))  # imports done: timeouts start now
    while True:
        try:
            kind, args, kwargs = pipe.recv(inbox)
        except (EOFError, OSError):
            return
        try:
            reply = ("ok", getattr(ex, kind)(*args, **kwargs))
        except Exception as e:  # noqa: BLE001 - returned to the supervisor, which decides
            reply = ("err", describe(e))
        try:
            message = pipe.encode(reply)
        except Exception as e:  # noqa: BLE001 - an unpicklable reply is reported, not fatal
            message = pipe.encode(("err", describe(e)))
        pipe.send_encoded(outbox, message)


if __name__ == "__main__":
    serve(int(sys.argv[1]), int(sys.argv[2]))

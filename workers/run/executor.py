"""The sandboxed process that runs backends: started and watched by a :class:`Sandbox`.

It stays warm across runs (imports and compile caches reused) and dies alone when a
backend segfaults, aborts or is killed for a limit. Requests arrive as pickled tuples on
one pipe, each naming an ``Executor`` method (by reference); each gets one reply on the other:
``(REPLY, value)`` or ``(RAISED, description)``.
"""
from __future__ import annotations

import ctypes
import faulthandler
import gc
import os
import signal
import sys
from multiprocessing.connection import Connection

from gapfuzz.core.failures import describe
from gapfuzz.workers.run import pipe
from gapfuzz.workers.run.backend_run import BackendRun
from gapfuzz.workers.run.judging_calls import InSandbox
from gapfuzz.workers.run.messages import Execution, PayloadReply
from gapfuzz.workers.run.probes import Probe, ProbeSettings, choose
from gapfuzz.workers.run.resize import resize_probes
from gapfuzz.workers.run.sandbox import RAISED, REPLY, rss_bytes

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


class Executor(InSandbox):
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

    def load(self, variant_id: str, payload: dict | None = None, probes: ProbeSettings | None = None) -> dict:
        """Deserialise a variant and checksum what arrived. ``payload`` None: a variant this process
        built (see ``call``'s ``keep_payloads``), which then never crosses a process boundary; the reply
        carries its seed outputs, which the caller would otherwise read from the payload, and the
        variant's probes (``workers.run.probes.choose``, then its ``resize_probes``): all of them, and per
        ``Backend.any_strides`` those of a stack that takes it."""
        from gapfuzz.core.ir import Variant

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
        resized = resize_probes(v.gm, v.inputs, probes, variant_id) if probes else []
        chosen = {strides: [*choose(v.gm, v.inputs, probes, variant_id, strides), *resized] if probes else [Probe()]
                  for strides in (True, False, None)}  # Backend.any_strides -> that stack's probes
        return {"checksums": self.checksums, "seed_outputs": payload.get("seed_outputs") if local else None,
                "probes": chosen[True], "stack_probes": chosen, "ops": list(v.ops)}

    def _variant_for(self, variant_id: str, backend):
        """The loaded variant for one backend. Backends that never write what they are given
        (``leaves_variant_intact``) share it; any other gets its own copy, so that each backend
        sees exactly what was sent."""
        from gapfuzz.core.ir import Variant

        if backend.leaves_variant_intact and self._pristine and self._pristine[0] == variant_id:
            return self._pristine[1]
        return Variant.from_payload(self.payloads[variant_id])

    def run(self, variant_id: str, spec, repeats: int = 3, probes: tuple = ()) -> Execution:
        """Prepare and run one backend (a BackendSpec) on the loaded variant's example inputs (timed), then
        call the prepared backend once per probe (``workers.run.probes``); errors become a result, each at
        its own stage (``workers.run.backend_run``)."""
        self._settle()
        run = BackendRun(spec, self.checksums, lambda backend: self._variant_for(variant_id, backend))
        try:
            return run.execute(repeats, probes)
        finally:
            self._release(run.device)

    def _release(self, device: str) -> None:
        try:
            import torch

            torch._dynamo.reset()
            if device == "cuda" and torch.cuda.is_available():
                gc.collect()  # device memory held by cycles goes back before the next variant
                torch.cuda.empty_cache()
        except Exception:  # noqa: BLE001 - best effort cleanup between runs
            pass

    def call(self, fn, args: tuple, kwargs: dict, keep_payloads: bool = False):
        """``fn(*args, **kwargs)``. With ``keep_payloads``, a ``PayloadReply``'s payloads are also kept
        here (the newest, up to KEEP_BYTES), so that ``load(variant_id)`` in this process needs no
        transfer."""
        reply = fn(*args, **kwargs)
        if keep_payloads and isinstance(reply, PayloadReply):
            self.kept.update(reply.payloads)
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
            method, args, kwargs = pipe.recv(inbox)
        except (EOFError, OSError):
            return
        try:
            if getattr(Executor, getattr(method, "__name__", ""), None) is not method:
                raise TypeError(f"{method!r} is not a request this executor answers")
            reply = (REPLY, method(ex, *args, **kwargs))
        except Exception as e:  # noqa: BLE001 - returned to the supervisor, which decides
            reply = (RAISED, describe(e))
        try:
            message = pipe.encode(reply)
        except Exception as e:  # noqa: BLE001 - an unpicklable reply is reported, not fatal
            message = pipe.encode((RAISED, describe(e)))
        pipe.send_encoded(outbox, message)


if __name__ == "__main__":
    from gapfuzz.workers.run.executor import serve as serve_imported  # requests name the imported module's Executor

    serve_imported(int(sys.argv[1]), int(sys.argv[2]))

"""A test-only stack that kills its process in ``prepare``, as a CUDA stack's package loader did
(``aoti_load_package``: SIGSEGV), loaded by ``{class: "tests.stacks.segv_backend:SegvOnPrepare", device: cpu}``.
It proves that the GPU tests' helper fails such a backend's own test, naming the signal, and lives on."""
from __future__ import annotations

import os
import signal

from gapfuzz.workers.run.registry import Backend


class SegvOnPrepare(Backend):
    name = "segv-on-prepare"

    def prepare(self, gm, example_inputs, device):
        os.kill(os.getpid(), signal.SIGSEGV)  # the executor's faulthandler prints this frame, then dies of it
        raise AssertionError("unreachable: the process is gone")

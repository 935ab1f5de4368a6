"""A test-only stack that cannot run on this host: its ``prepare`` kills its process with SIGSEGV on every
variant, as AOTInductor's package loader did on a machine whose image could load no package at all
(``aoti_load_package``). Loaded by ``{class: "tests.stacks.crashing_backends:DiesPreparing", device: cpu}``; it
shows that the campaign marks such a stack unusable on its host after a few variants (``fuzzer.unusable``)
and that triage does not offer its crashes as a vendor finding."""
from __future__ import annotations

import os
import signal

from gapfuzz.workers.run.registry import Backend


class DiesPreparing(Backend):
    name = "dies-preparing"

    def prepare(self, gm, example_inputs, device):
        os.kill(os.getpid(), signal.SIGSEGV)  # the sandbox's faulthandler prints this frame, then the process dies
        raise AssertionError("unreachable: the process is gone")

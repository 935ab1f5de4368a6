"""A test-only backend that fails on chosen variants in every way a vendor stack can.

Loaded by ``module:Class`` (``tests.stacks.faulty_backend:Faulty``). The fault depends on the graph
alone (its hash), so a variant fails the same way on every try: reproducible faults.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import time

from gapfuzz.core.ir import graph_to_json

FAULTS = ("ok", "segfault", "abort", "hang", "oom", "raise")


def fault_of(gm) -> str:
    digest = hashlib.sha256(graph_to_json(gm.graph).encode()).digest()
    return FAULTS[digest[0] % len(FAULTS)]


class Faulty:
    """Eager execution, except on the variants whose graph hash picks a fault."""

    name = "faulty"
    devices = ("cpu",)

    def __init__(self, **options):
        self.options = options
        self.info = {}

    @classmethod
    def available(cls, device):
        return device == "cpu"

    def prepare(self, gm, example_inputs, device):
        fault = self.options.get("fault") or fault_of(gm)
        self.info = {"fault": fault}

        def run(*inputs):
            if fault == "segfault":
                ctypes.string_at(0)
            elif fault == "abort":
                os.abort()
            elif fault == "hang":
                if self.options.get("mark"):  # a folder: tells a test that the hang has begun
                    open(os.path.join(self.options["mark"], str(os.getpid())), "w").close()
                time.sleep(3600)
            elif fault == "oom":
                hog = []
                while True:  # filled in C, so every page is resident at once, however loaded the machine
                    hog.append(b"\x01" * (64 << 20))
            elif fault == "raise":
                raise ValueError("faulty backend refused this graph")
            return gm(*inputs)
        return run


class RefusesToStart(Faulty):
    """A stack whose creation raises (a runtime it cannot load): a failure before it prepares anything."""

    def __init__(self, **options):
        raise RuntimeError("faulty backend could not start its runtime")


class InputsNowhere(Faulty):
    """A stack that takes its inputs on a device that does not exist: placing them raises."""

    input_device = "nowhere"
    prepare_stage = "convert"

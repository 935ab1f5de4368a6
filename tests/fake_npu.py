"""A test-only stack presented on the ``npu`` device kind: it runs eager on the host CPU, so a
test can show that runs for a device are routed to the Ray node that advertises it."""
from __future__ import annotations

from workers.registry import Backend


class HostNpu(Backend):
    name = "host-npu"
    devices = ("npu",)
    input_device = "cpu"

    @classmethod
    def unavailable_reason(cls, device):
        return None if device == "npu" else f"host-npu runs only as npu, not {device}"

    def prepare(self, gm, example_inputs, device):
        return gm

"""A test-only stack presented on accelerator device kinds (``npu``, ``xpu``): it runs eager on the
host CPU, so a test (or the cluster benchmark) can show that runs for a device are routed to the Ray
nodes that advertise it, at the cost of an eager call."""
from __future__ import annotations

from gapfuzz.workers.run.registry import Backend


class HostDevice(Backend):
    name = "host"
    devices = ("npu", "xpu")
    input_device = "cpu"

    @classmethod
    def unavailable_reason(cls, device):
        return None if device in cls.devices else f"host runs only as {' or '.join(cls.devices)}, not {device}"

    def prepare(self, gm, example_inputs, device):
        return gm


class SlowHostDevice(HostDevice):
    """The host stack at a tenth of a second a call: a campaign that lasts long enough for nodes to come and go."""

    name = "slow-host"

    def prepare(self, gm, example_inputs, device):
        import time

        def call(*inputs):
            time.sleep(0.1)
            return gm(*inputs)

        return call

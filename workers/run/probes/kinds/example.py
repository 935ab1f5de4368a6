"""The example: the capture's own inputs, every variant's first probe."""
from __future__ import annotations

from gapfuzz.workers.run.probes.base import EXAMPLE, ProbeKind
from gapfuzz.workers.run.probes.registry import PROBE_KINDS


@PROBE_KINDS.register
class Example(ProbeKind):
    """The capture's own inputs, unchanged."""

    name = EXAMPLE
    order = 0

    def make(self, inputs, input_roles, params, g):
        return tuple(inputs)

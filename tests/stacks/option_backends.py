"""A test-only stack with an option space and a fault behind one value of one option, in training only,
loaded by ``tests.stacks.option_backends:OptionTanh``.

It takes options ``a: 0|1``, ``b: 0|1|2``, ``c: false|true`` and ``d: x|y`` and runs eager, exactly,
except that with ``b: 2`` its ``tanh`` has the backward with a dropped square
(``tests.stacks.planted_backward``): an inference run agrees whatever its options, and a training run is
wrong only when its option set has ``b: 2``.
"""
from __future__ import annotations

import torch

from gapfuzz.workers.run.registry import Backend

from .numeric_backends import _retargeted
from .planted_backward import _tanh

aten = torch.ops.aten
SPACE = {"a": [0, 1], "b": [0, 1, 2], "c": [False, True], "d": ["x", "y"]}
FAULTY = ("b", 2)


class OptionTanh(Backend):
    name = "option-tanh"
    trains = True

    @classmethod
    def known_options(cls) -> list[str]:
        return sorted(SPACE)

    def prepare(self, gm, example_inputs, device):
        if self.options.get(FAULTY[0]) == FAULTY[1]:
            return _retargeted(gm, (aten.tanh.default,), _tanh)
        return gm

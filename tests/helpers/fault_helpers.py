"""Functions that misbehave on purpose, run inside a sandbox by the tests."""
from __future__ import annotations

import ctypes
import os
import time


def echo(x):
    return x


def segfault(*_ignored):
    ctypes.string_at(0)


def abort():
    os.abort()


def hang():
    time.sleep(3600)


def hog_memory(step_mb: int = 64):
    chunks = []
    while True:
        chunks.append(bytearray(step_mb << 20))
        for i in range(0, len(chunks[-1]), 4096):
            chunks[-1][i] = 1


def raise_value_error():
    raise ValueError("bad value 42")


def as_built(payload):
    """A reply that carries a variant's payload, which the sandbox then keeps."""
    from gapfuzz.workers.run.messages import PayloadReply

    return PayloadReply({"built#0": payload})

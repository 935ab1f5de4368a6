"""The fuzzer: campaigns, mutation, generation, and the driver that runs it all on Ray."""
if __name__ != "gapfuzz.fuzzer":  # installed as gapfuzz.fuzzer; a bare ``import fuzzer`` means another package
    raise ImportError(f"{__name__!r} is gapfuzz's fuzzer folder: import gapfuzz.fuzzer (pip install -e .)")

import logging

log = logging.getLogger("gapfuzz.fuzzer")

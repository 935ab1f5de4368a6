"""Workers: backends, sandboxes and Ray pools that run graphs and compare their outputs.

Knows nothing of seeds or mutations: it takes a variant payload (core.ir) and a list of
backend specs, and returns one RunRecord per backend and probe.
"""
if __name__ != "gapfuzz.workers":  # installed as gapfuzz.workers; a bare ``import workers`` means another package
    raise ImportError(f"{__name__!r} is gapfuzz's workers folder: import gapfuzz.workers (pip install -e .)")

import logging

log = logging.getLogger("gapfuzz.workers")

"""Analysis: reads a run folder with pandas/pyarrow and clusters it; never imports torch."""
if __name__ != "gapfuzz.analysis":  # installed as gapfuzz.analysis; a bare ``import analysis`` means another package
    raise ImportError(f"{__name__!r} is gapfuzz's analysis folder: import gapfuzz.analysis (pip install -e .)")

import logging

log = logging.getLogger("gapfuzz.analysis")

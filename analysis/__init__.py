"""Analysis: reads a run folder with pandas/pyarrow and clusters it; never imports torch."""
import logging

log = logging.getLogger("gapfuzz.analysis")

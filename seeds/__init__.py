"""Seeds: real architectures with seeded random weights, captured with torch.export.

Knows nothing of mutation; the fuzzer turns captured seeds into variants.
"""
if __name__ != "gapfuzz.seeds":  # installed as gapfuzz.seeds; a bare ``import seeds`` means another package
    raise ImportError(f"{__name__!r} is gapfuzz's seeds folder: import gapfuzz.seeds (pip install -e .)")

import logging

from .registry import SeedError, create_seed, get_source, list_seeds, register_source, source_names
from .spec import BuiltSeed, SeedInfo

log = logging.getLogger("gapfuzz.seeds")

__all__ = ["BuiltSeed", "SeedError", "SeedInfo", "create_seed", "get_source", "list_seeds",
           "register_source", "source_names", "log"]

"""Seeds: real architectures with seeded random weights, captured with torch.export.

Knows nothing of mutation; the fuzzer turns captured seeds into variants.
"""
import logging

from .registry import SeedError, create_seed, get_source, list_seeds, register_source, source_names
from .spec import BuiltSeed, SeedInfo

log = logging.getLogger("gapfuzz.seeds")

__all__ = ["BuiltSeed", "SeedError", "SeedInfo", "create_seed", "get_source", "list_seeds",
           "register_source", "source_names", "log"]

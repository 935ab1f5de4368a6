"""The error every seed module raises, at the bottom of ``seeds`` so that all of them can import it."""
from __future__ import annotations


class SeedError(LookupError):
    """An unknown seed id or source (bad input: one clear line)."""

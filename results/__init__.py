"""Results: what writes and reads a run folder (the record, the folder, the store, the seed catalog,
``run.json``). Below every other package but core; needs no torch."""
if __name__ != "gapfuzz.results":  # installed as gapfuzz.results; a bare ``import results`` means another package
    raise ImportError(f"{__name__!r} is gapfuzz's results folder: import gapfuzz.results (pip install -e .)")


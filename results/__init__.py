"""Results: what writes and reads a run folder (the record, the folder, the store, the seed catalog,
``run.json``). Below every other package but core; needs no torch."""

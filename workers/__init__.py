"""Workers: backends, sandboxes and Ray pools that run graphs and compare their outputs.

Knows nothing of seeds or mutations: it takes a variant payload (core.ir) and a list of
backend specs, and returns one RunRecord per backend and probe.
"""
import logging

log = logging.getLogger("gapfuzz.workers")

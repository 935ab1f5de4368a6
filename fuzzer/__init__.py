"""The fuzzer: campaigns, mutation, generation, and the driver that runs it all on Ray."""
import logging

log = logging.getLogger("gapfuzz.fuzzer")

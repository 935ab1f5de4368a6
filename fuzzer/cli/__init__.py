"""The ``gapfuzz`` command line."""

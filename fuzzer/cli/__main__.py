"""``python -m gapfuzz.fuzzer.cli``: the ``gapfuzz`` console script."""
import sys

from gapfuzz.fuzzer.cli.main import main

sys.exit(main())

"""The parts every stage shares and none owns: the IR (``core.ir``), what a bug is
(``core.bugs``), message templates (``core.templates``) and the plug-in registries
(``core.registry``).

``seeds``, ``fuzzer``, ``workers`` and ``analysis`` import from here, never the other way, so no
stage depends on another for its vocabulary. Importing ``core`` imports no torch; ``core.ir`` does.
"""
if __name__ != "gapfuzz.core":  # installed as gapfuzz.core; a bare ``import core`` means another package
    raise ImportError(f"{__name__!r} is gapfuzz's core folder: import gapfuzz.core (pip install -e .)")


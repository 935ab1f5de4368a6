"""A local file written whole or not at all, with no temporary file left behind whatever happens
(a full disk, an exception, Ctrl-C): the caches and indexes beside a run folder use it; and where
those caches live."""
from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def cache_dir() -> Path:
    """Where gapfuzz keeps what it can rebuild: ``$GAPFUZZ_CACHE_DIR``, else ``~/.cache/gapfuzz``."""
    if os.environ.get("GAPFUZZ_CACHE_DIR"):
        return Path(os.environ["GAPFUZZ_CACHE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gapfuzz"


def write_whole(path: str | Path, write, mode: int = 0o644) -> None:
    """``write(file)`` into a hidden temporary beside ``path``, then renamed into place."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
        os.chmod(tmp, mode)
        os.replace(tmp, path)  # a reader sees the old file or the new one, never half of one
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)  # gone already once renamed

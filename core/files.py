"""A local file written whole or not at all, with no temporary file left behind whatever happens
(a full disk, an exception, Ctrl-C): the caches and indexes beside a run folder use it; where those
caches live; and paths that stay inside their folder (``inside``): a run folder may come from anyone,
so a name read from it is checked as a name, and no link in it is followed when writing."""
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


MAX_NAME_CHARS = 100


class OutsideFolder(ValueError):
    """A write that would leave its folder: a name that is a path, or a symbolic link on the way."""


def plain_name(name, what: str = "a name") -> str:
    """``name`` when it names one entry of a folder (no separator, not ``.`` or ``..``, printable, short)."""
    text = str(name)
    if not text or text in (".", "..") or "/" in text or "\\" in text or not text.isprintable() or \
            len(text) > MAX_NAME_CHARS:
        raise OutsideFolder(f"{what} {text[:MAX_NAME_CHARS]!r} is not a plain file name (one entry of a folder, "
                            f"printable, without / or .., at most {MAX_NAME_CHARS} characters)")
    return text


def inside(root: str | Path, *parts: str) -> Path:
    """``root/parts...``, each part a plain name and none of them (nor what stands there) a symbolic link:
    a path to write to that cannot leave ``root``."""
    path = Path(root)
    for part in parts:
        path = path / plain_name(part, "the name")
        if path.is_symlink():
            raise OutsideFolder(f"{path}: is a symbolic link; gapfuzz follows no link when it writes into a "
                                f"folder (remove the link)")
    return path

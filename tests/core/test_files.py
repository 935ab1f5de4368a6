"""Caches and indexes are written whole: a write that fails leaves neither half a file nor a temporary."""
from __future__ import annotations

import pytest

from gapfuzz.core.files import write_whole


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "cache" / "entry.pt"
    write_whole(path, lambda f: f.write(b"old"))

    def broken(f):
        f.write(b"half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_whole(path, broken)
    assert path.read_bytes() == b"old" and sorted(p.name for p in path.parent.iterdir()) == ["entry.pt"]

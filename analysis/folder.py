"""Where a run folder lives: a local path (an NFS mount is one), or a URI of any filesystem pyarrow
can write: ``s3://bucket/runs/x``, ``gs://...``, ``hdfs://...``, and through fsspec any scheme it
registers (``memory://`` among them), so that a campaign on a cluster writes where everyone reads.

Every file of a run folder is written through a ``Folder``, whole: on a filesystem with renames, to
a hidden temporary name that is renamed into place; on an object store, in one upload that becomes
visible when it completes. Either way a reader sees a whole file or none. Only the driver writes.
"""
from __future__ import annotations

import io
import os
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq


class ResultsError(RuntimeError):
    """A run folder that cannot be read (bad input: one clear line)."""


class FolderError(ResultsError):
    """A run-folder location that cannot be used (one line, naming it)."""


def _filesystem(uri: str) -> tuple[pafs.FileSystem, str]:
    try:
        return pafs.FileSystem.from_uri(uri)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError) as arrow_error:
        scheme = uri.split("://", 1)[0]
        try:
            import fsspec
        except ImportError:
            raise FolderError(f"{uri}: pyarrow has no filesystem for {scheme}:// ({arrow_error})") from None
        try:
            fs = fsspec.filesystem(scheme)
        except (ValueError, ImportError) as e:
            raise FolderError(f"{uri}: no filesystem for {scheme}:// (pyarrow: {arrow_error}; fsspec: {e})") from None
        return pafs.PyFileSystem(pafs.FSSpecHandler(fs)), uri.split("://", 1)[1]


class Folder:
    def __init__(self, where: str | Path):
        self.uri = str(where)
        if "://" in self.uri:
            self.fs, base = _filesystem(self.uri)
        else:
            self.fs, base = pafs.LocalFileSystem(), os.path.abspath(self.uri)
        self.base = base.rstrip("/") or "/"
        self.renames = isinstance(self.fs, pafs.LocalFileSystem)  # object stores have no atomic rename

    def __str__(self) -> str:
        return self.uri

    @property
    def name(self) -> str:
        return self.base.rsplit("/", 1)[-1]

    @property
    def local_path(self) -> Path | None:
        """The folder as a local path, for what only a local folder holds (reproducers); None elsewhere."""
        return Path(self.base) if self.renames else None

    def path(self, *parts: str) -> str:
        return "/".join([self.base, *parts])

    def _type(self, *parts: str) -> pafs.FileType:
        try:
            return self.fs.get_file_info(self.path(*parts)).type
        except (OSError, pa.ArrowException) as e:
            raise FolderError(f"{self.uri}: cannot be reached: {' '.join(str(e).split())[:200]}") from None

    def exists(self, *parts: str) -> bool:
        return self._type(*parts) != pafs.FileType.NotFound

    def is_dir(self, *parts: str) -> bool:
        return self._type(*parts) == pafs.FileType.Directory

    def files(self, *parts: str, suffix: str = ".parquet") -> list[str]:
        """Files under ``parts`` (at any depth) ending in ``suffix``, sorted; hidden folders left out."""
        top = self.path(*parts)
        if self._type(*parts) != pafs.FileType.Directory:
            return []
        infos = self.fs.get_file_info(pafs.FileSelector(top, recursive=True))
        return sorted(i.path for i in infos if i.type == pafs.FileType.File and i.path.endswith(suffix)
                      and not any(p.startswith(".") for p in i.path[len(top):].split("/")))

    def read_bytes(self, *parts: str) -> bytes:
        with self.fs.open_input_stream(self.path(*parts)) as f:
            return f.read()

    def write_bytes(self, data: bytes, *parts: str) -> str:
        """Write a whole file (see the module docstring); returns its path."""
        final = self.path(*parts)
        self.fs.create_dir(final.rsplit("/", 1)[0], recursive=True)
        if not self.renames:
            with self.fs.open_output_stream(final) as f:
                f.write(data)
            return final
        tmp = f"{final.rsplit('/', 1)[0]}/.{uuid.uuid4().hex}.tmp"
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, final)
        return final

    def write_table(self, table: pa.Table, *parts: str) -> str:
        buf = io.BytesIO()
        pq.write_table(table, buf, compression="zstd")
        return self.write_bytes(buf.getvalue(), *parts)

    def open(self, path: str):
        """A file of this folder (a path ``files`` returned) for pyarrow to read."""
        return self.fs.open_input_file(path)

    def mkdir(self) -> None:
        self.fs.create_dir(self.base, recursive=True)

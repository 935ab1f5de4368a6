"""Where a run folder lives: a local path (an NFS mount is one), or a URI of any filesystem pyarrow
can write: ``s3://bucket/runs/x``, ``gs://...``, ``hdfs://...``, and through fsspec any scheme it
registers (``memory://`` among them), so that a campaign on a cluster writes where everyone reads.

Every file of a run folder is written through a ``Folder``, whole: on a filesystem with renames, to
a hidden temporary name that is renamed into place; on an object store, in one upload that becomes
visible when it completes. Either way a reader sees a whole file or none. Only the driver writes.

A local run folder is read only from inside itself: no symbolic link is followed below its top (a
link to ``/`` or a loop in ``records/`` is left out, not walked), and only regular files are read.
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
    except OSError as e:  # a store that cannot be reached: no network, no such bucket, no credentials
        raise FolderError(f"{uri}: cannot be reached: {' '.join(str(e).split())[:200]}") from None
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

    def _inside(self, *parts: str) -> None:
        """Refuse a local path below the top whose components include a symbolic link."""
        if not self.renames:
            return
        at = self.base
        for part in "/".join(parts).split("/"):
            at = f"{at}/{part}"
            if os.path.islink(at):
                raise FolderError(f"{at}: a symbolic link inside the run folder {self.uri}; gapfuzz reads a run "
                                  f"folder only from inside itself (replace the link with what it points to)")

    def files(self, *parts: str, suffix: str = ".parquet") -> list[str]:
        """Files under ``parts`` (at any depth) ending in ``suffix``, sorted; hidden folders left out. In a
        local folder no symbolic link is followed and only regular files are listed."""
        top = self.path(*parts)
        if self._type(*parts) != pafs.FileType.Directory:
            return []
        if self.renames:
            self._inside(*parts)
            found = []
            for root, dirs, names in os.walk(top, followlinks=False):
                dirs[:] = sorted(d for d in dirs if not d.startswith(".") and not os.path.islink(os.path.join(root, d)))
                for n in names:
                    p = os.path.join(root, n)
                    if n.endswith(suffix) and not n.startswith(".") and not os.path.islink(p) and os.path.isfile(p):
                        found.append(p)
            return sorted(found)
        infos = self.fs.get_file_info(pafs.FileSelector(top, recursive=True))
        return sorted(i.path for i in infos if i.type == pafs.FileType.File and i.path.endswith(suffix)
                      and not any(p.startswith(".") for p in i.path[len(top):].split("/")))

    def read_bytes(self, *parts: str, limit: int = 16 << 20) -> bytes:
        """A whole small file of the folder (a local one: a regular file reached by no symbolic link);
        more than ``limit`` bytes is a ``FolderError``."""
        path = self.path(*parts)
        if self.renames:
            self._inside(*parts)
            if os.path.exists(path) and not os.path.isfile(path):
                raise FolderError(f"{path}: not a regular file (a folder, a device or a FIFO)")
        with self.fs.open_input_stream(path) as f:
            data = f.read(limit + 1)
        if len(data) > limit:
            raise FolderError(f"{path}: more than {limit} bytes; not a file gapfuzz wrote")
        return data

    def write_bytes(self, data: bytes, *parts: str) -> str:
        """Write a whole file (see the module docstring); returns its path."""
        final = self.path(*parts)
        self.fs.create_dir(final.rsplit("/", 1)[0], recursive=True)
        if not self.renames:
            with self.fs.open_output_stream(final) as f:
                f.write(data)
            return final
        return self._replace_local(final, lambda f: f.write(data))

    @staticmethod
    def _replace_local(final: str, write) -> str:
        """``write(file)`` into a hidden temporary beside ``final`` (no reader lists it), synced, then renamed."""
        tmp = f"{final.rsplit('/', 1)[0]}/.{uuid.uuid4().hex}.tmp"
        try:
            with open(tmp, "wb") as f:
                write(f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, final)
        finally:  # a full disk or an interrupt leaves no hidden half file behind
            if os.path.lexists(tmp):
                os.unlink(tmp)
        return final

    def write_table(self, table: pa.Table, *parts: str) -> str:
        buf = io.BytesIO()
        pq.write_table(table, buf, compression="zstd")
        return self.write_bytes(buf.getvalue(), *parts)

    def write_batches(self, schema: pa.Schema, batches, final: str) -> str:
        """A Parquet file of record batches at ``final`` (a path in this folder, as ``files`` gives them), whole
        or not at all like every file here; on a local folder streamed (a batch in memory at a time),
        elsewhere gathered and uploaded in one piece."""
        def write(f) -> None:
            with pq.ParquetWriter(f, schema, compression="zstd") as w:
                for batch in batches:
                    w.write_batch(batch)

        if not self.renames:
            buf = io.BytesIO()
            write(buf)
            with self.fs.open_output_stream(final) as f:
                f.write(buf.getvalue())
            return final
        return self._replace_local(final, write)

    def remove(self, path: str) -> None:
        """Delete one file of this folder (a path ``files`` returned); one already gone is no error."""
        try:
            self.fs.delete_file(path)
        except FileNotFoundError:
            pass

    def open(self, path: str):
        """A file of this folder (a path ``files`` returned) for pyarrow to read."""
        return self.fs.open_input_file(path)

    def mkdir(self) -> None:
        self.fs.create_dir(self.base, recursive=True)


_RESOLVED_KEYS = {"seeds", "backends", "variants", "compare", "pools", "run", "ray", "capture"}


def is_run_folder(d: Path) -> bool:
    """Whether local folder ``d`` is a gapfuzz run folder: it holds ``records/``, or the resolved
    ``campaign.yaml`` a run writes first (every section filled in, as no hand-written file has it)."""
    from gapfuzz.core.strict_yaml import load, read_file

    try:
        if (d / "records").is_dir():
            return True
        if not (d / "campaign.yaml").is_file():
            return False
        given = load(read_file(d / "campaign.yaml"), str(d / "campaign.yaml"))
    except (OSError, ValueError):
        return False
    return isinstance(given, dict) and _RESOLVED_KEYS <= set(given)


def run_folder_around(path: str | Path) -> Path | None:
    """The nearest run folder above a local ``path`` (``path`` itself left out; links resolved), None
    when there is none or ``path`` is a URI: what a command writes there must not land in another
    run's folder, and nothing but records may land in a run's ``records/``."""
    if "://" in str(path):
        return None
    for parent in Path(path).resolve().parents:
        if is_run_folder(parent):
            return parent
    return None

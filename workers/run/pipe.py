"""Messages between a sandbox and its executor: pickle protocol 5 with out-of-band buffers.

A variant's weights are tens of megabytes of numpy buffers, and a pipe moves about
200 MB/s on a small VM. So a message's out-of-band buffers, when they are large, are
written once to a file in shared memory that the receiver maps copy-on-write: the arrays
it unpickles are writable and cost no copy until written. Small messages use the pipe.
The receiver removes the file once mapped; the sender removes it too (``discard``) when
the other side died before it could.
"""
from __future__ import annotations

import io
import itertools
import mmap
import os
import pickle
import sys
import tempfile
from multiprocessing.connection import Connection

import numpy as np

SPILL_BYTES = 1 << 20  # buffers at least this large in all go through shared memory
ALIGN = 64  # each buffer starts on a cache line in the file, so tensors viewing it are aligned
_SHM = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else tempfile.gettempdir()
_names = itertools.count()


class _Pickler(pickle.Pickler):
    """Plain CPU tensors travel as wire dicts (their bytes out of band). torch's own pickling
    writes each storage with the legacy ``torch.save`` format, which is slow and cannot load back
    the newer dtypes (``uint16``/``uint32``/``uint64``): an operator's output in one of those would
    fail in the receiver."""

    def reducer_override(self, obj):
        torch = sys.modules.get("torch")
        if (torch is None or type(obj) is not torch.Tensor or obj.layout != torch.strided or obj.is_quantized
                or obj.device.type != "cpu" or obj.requires_grad or obj.is_conj() or obj.is_neg()):
            return NotImplemented
        from gapfuzz.core.ir import tensor_from_wire, tensor_to_wire

        return tensor_from_wire, (tensor_to_wire(obj), False)


def encode(obj) -> tuple[bytes, list]:
    """The pickled message and its out-of-band buffers; raises before anything is sent."""
    buffers: list[pickle.PickleBuffer] = []
    out = io.BytesIO()
    _Pickler(out, protocol=5, buffer_callback=buffers.append).dump(obj)
    return out.getvalue(), [b.raw() for b in buffers]


def send(conn: Connection, obj) -> str | None:
    return send_encoded(conn, encode(obj))


def send_encoded(conn: Connection, message: tuple[bytes, list]) -> str | None:
    """Send; the path of the shared-memory file the buffers went through, if any."""
    head, raws = message
    sizes = [r.nbytes for r in raws]
    path, offsets = _spill(raws) if sum(sizes) >= SPILL_BYTES else (None, None)
    conn.send_bytes(pickle.dumps((sizes, offsets, path, head), protocol=5))
    if path is None:
        for raw in raws:
            _write_all(conn.fileno(), raw)
    return path


def recv(conn: Connection):
    sizes, offsets, path, head = pickle.loads(conn.recv_bytes())
    return pickle.loads(head, buffers=_mapped(path, sizes, offsets) if path else
                        [_read(conn.fileno(), n) for n in sizes])


def discard(path: str | None) -> None:
    if path:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def _write_all(fd: int, raw: memoryview) -> None:
    view = raw.cast("B") if raw.format != "B" else raw
    while view:
        view = view[os.write(fd, view):]


def _spill(raws: list) -> tuple[str, list[int]]:
    """The file and each buffer's offset in it. A memory region that several buffers are (the
    unchanged weights that a seed's variants share) is written once: they arrive as one."""
    path = os.path.join(_SHM, f"gapfuzz-{os.getpid()}-{next(_names)}")
    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    written: dict[tuple[int, int], int] = {}
    offsets, end = [], 0
    try:
        for raw in raws:
            key = (np.asarray(raw).__array_interface__["data"][0], raw.nbytes)
            if key not in written:
                written[key] = end
                _write_all(fd, raw)
                pad = -raw.nbytes % ALIGN
                if pad:
                    os.write(fd, bytes(pad))
                end += raw.nbytes + pad
            offsets.append(written[key])
    except BaseException:
        discard(path)
        raise
    finally:
        os.close(fd)
    return path, offsets


def _mapped(path: str, sizes: list[int], offsets: list[int]) -> list:
    """Copy-on-write views of the file's buffers; the file is gone once mapped."""
    try:
        with open(path, "rb") as f:
            m = mmap.mmap(f.fileno(), 0, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    finally:
        discard(path)
    view = memoryview(m)
    return [view[o:o + n] for o, n in zip(offsets, sizes)]


def _read(fd: int, size: int) -> bytearray:
    buf = bytearray(size)
    view = memoryview(buf)
    while view:
        n = os.readv(fd, [view])
        if n == 0:
            raise EOFError("the other process closed the pipe mid-message")
        view = view[n:]
    return buf

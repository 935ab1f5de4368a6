"""A test-only stack whose behaviour is its package's release, loaded by ``tests.stacks.release_backend:Released``.

The package ``relstack`` computes ``tanh``: release 1.0 as torch does, release 2.0 2 % too large (a
regression in one operator, present from 2.0 on). ``write_wheels`` writes its releases as wheels into a
folder for pip's find-links (no build tool, no index), and one more, 0.9, that fits no Python 3: an
environment that cannot be made.
"""
from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path

import torch

from gapfuzz.workers.run.backend import Backend

from .numeric_backends import _retargeted

aten = torch.ops.aten
BODY = '''"""relstack {version}: a tanh kernel."""
import torch

__version__ = "{version}"


def tanh(x):
    return torch.ops.aten.tanh.default(x) * {factor}
'''


class Released(Backend):
    name = "relstack"
    module = "relstack"  # and its distribution: a campaign's ``versions:`` name relstack's releases

    def prepare(self, gm, example_inputs, device):
        import relstack

        return _retargeted(gm, (aten.tanh.default,), relstack.tanh)


def write_wheel(folder: Path, version: str, factor: float, requires_python: str | None = None) -> Path:
    """``relstack-<version>-py3-none-any.whl`` in ``folder``: the module, its metadata and its RECORD."""
    info = f"relstack-{version}.dist-info"
    meta = f"Metadata-Version: 2.1\nName: relstack\nVersion: {version}\n"
    if requires_python:
        meta += f"Requires-Python: {requires_python}\n"
    files = {"relstack/__init__.py": BODY.format(version=version, factor=factor), f"{info}/METADATA": meta,
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: gapfuzz-tests\nRoot-Is-Purelib: true\n"
                              "Tag: py3-none-any\n"}
    record = []
    for name, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(text.encode())}")
    files[f"{info}/RECORD"] = "\n".join([*record, f"{info}/RECORD,,"]) + "\n"
    path = Path(folder) / f"relstack-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
    return path


def write_wheels(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    write_wheel(folder, "1.0", 1.0)
    write_wheel(folder, "2.0", 1.02)
    write_wheel(folder, "0.9", 1.0, requires_python="<3")
    return folder

"""Captured seeds kept on disk, so a seed is exported once per library versions, not per campaign.

torch.export of a mid-size model takes seconds (more than the eager runs of all its variants);
campaigns, resumed campaigns and ``gapfuzz repro`` capture the same seeds again and again.
An entry is the captured graph (JSON), its tensors and the seed's facts, saved with
``torch.save`` and read back with ``weights_only=True``. The key covers the seed id, the
versions of torch, torchvision, timm and transformers, and the source of the ``seeds``
package, so a changed seed builder or library never serves a stale graph. Failures are
not cached; entries over ``MAX_ENTRY_BYTES`` are not written.
"""
from __future__ import annotations

import hashlib
import importlib.metadata
import logging
from functools import lru_cache
from pathlib import Path

import torch

from gapfuzz.core.files import write_whole
from gapfuzz.core.ir import IRError, Variant

from .capture import Captured, check_budget
from .spec import SeedInfo, cache_dir

log = logging.getLogger("gapfuzz.seeds")
FORMAT = 1
MAX_ENTRY_BYTES = 512 * 2**20
_LIBRARIES = ("torch", "torchvision", "timm", "transformers")


@lru_cache(maxsize=1)
def _fingerprint() -> str:
    h = hashlib.sha256(f"format {FORMAT}".encode())
    for lib in _LIBRARIES:
        try:
            h.update(f"{lib} {importlib.metadata.version(lib)}".encode())
        except importlib.metadata.PackageNotFoundError:
            h.update(f"{lib} -".encode())
    for path in sorted(Path(__file__).parent.rglob("*.py")):
        h.update(path.read_bytes())
    return h.hexdigest()


class CaptureCache:
    def __init__(self, root: Path | None = None):
        self.root = Path(root) if root is not None else cache_dir() / "captures"

    def path(self, seed_id: str) -> Path:
        key = hashlib.sha256(f"{_fingerprint()}|{seed_id}".encode()).hexdigest()[:24]
        return self.root / f"{key}.pt"

    def get(self, seed_id: str, max_params: int | None) -> tuple[dict, Captured] | None:
        """The seed's facts and capture, or None; raises CaptureError at the budget stage as a fresh capture would."""
        path = self.path(seed_id)
        try:
            entry = torch.load(path, weights_only=True)  # tensors and plain data only: no code
        except Exception:  # noqa: BLE001 - absent, torn or foreign: a miss, and replaced
            return None
        if not isinstance(entry, dict) or entry.get("seed_id") != seed_id:
            return None
        try:
            params = set(entry["param_names"])
            tensors = {n: (t, n in params) for n, t in entry["tensors"].items()}
            variant = Variant.from_parts(entry["graph"], tensors, tuple(entry["inputs"]), entry["output_names"])
            info, count, capture_s = dict(SeedInfo(**entry["info"]).to_dict()), int(entry["params"]), \
                float(entry["capture_s"])
        except (IRError, KeyError, TypeError, ValueError, AttributeError) as e:  # foreign or poisoned: replaced
            log.warning("capture cache entry %s for %s is not usable (%s); capturing again", path, seed_id, e)
            return None
        check_budget(count, max_params, info)
        return info, Captured(variant, count, capture_s)

    def put(self, seed_id: str, info: dict, cap: Captured) -> bool:
        v = cap.variant
        tensors = v.tensors()
        size = sum(t.numel() * t.element_size() for t in [*tensors.values(), *v.inputs])
        if size > MAX_ENTRY_BYTES:
            return False
        entry = {"seed_id": seed_id, "info": info, "params": cap.params, "capture_s": cap.capture_s,
                 "graph": v.graph_json, "output_names": list(v.output_names),
                 "tensors": {n: t.detach() for n, t in tensors.items()},
                 "param_names": sorted(dict(v.gm.named_parameters())), "inputs": list(v.inputs)}
        try:
            write_whole(self.path(seed_id), lambda f: torch.save(entry, f))
        except OSError:  # a cache that cannot be written is only not used
            return False
        return True

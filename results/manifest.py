"""``run.json``: what a reader of a run folder needs to know of the run, as the driver resolved it.

The backends by the names their records hold (labels applied), which is the reference and which
the oracle, the tolerances every verdict was judged with, and the modes. Analysis reads this,
never the campaign file (whose defaults and plug-in labels it would have to resolve again); a
folder written before run.json existed falls back to its ``campaign.yaml``. It is data: read as
JSON, checked field by field, nothing in it imported or run.
"""
from __future__ import annotations

import datetime as dt
import json
from dataclasses import asdict, dataclass, field

from .folder import Folder, ResultsError

NAME = "run.json"
VERSION = 1
MAX_BYTES = 1 << 20


@dataclass
class RunManifest:
    campaign: str
    reference: str
    oracle: str | None
    targets: list[str]
    backends: dict  # name -> {"stack", "device", "options"}
    compare: dict  # tolerances {dtype: [rtol, atol]}, multiplier, far, sweep
    modes: list[str] = field(default_factory=lambda: ["inference"])
    version: int = VERSION
    written: str = ""

    def write(self, folder: Folder) -> None:
        self.written = self.written or dt.datetime.now(dt.timezone.utc).isoformat()
        folder.write_bytes(json.dumps(asdict(self), indent=1, sort_keys=True, default=str).encode(), NAME)

    @classmethod
    def read(cls, folder: Folder) -> RunManifest | None:
        """The folder's manifest; None when it has none (written before run.json existed)."""
        where = f"{folder}/{NAME}"
        try:
            if not folder.exists(NAME):
                return None
            raw = folder.read_bytes(NAME)
        except OSError as e:
            raise ResultsError(f"{where}: cannot read: {e.strerror or e}") from None
        if len(raw) > MAX_BYTES:
            raise ResultsError(f"{where}: over {MAX_BYTES} bytes; not a run manifest")
        try:
            data = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as e:
            raise ResultsError(f"{where}: not JSON: {e}") from None
        return cls._checked(data, where)

    @classmethod
    def _checked(cls, data, where: str) -> RunManifest:
        if not isinstance(data, dict):
            raise ResultsError(f"{where}: a JSON object is expected")
        types = {"campaign": str, "reference": str, "oracle": (str, type(None)), "targets": list, "backends": dict,
                 "compare": dict, "modes": list, "version": int, "written": str}
        unknown = sorted(set(data) - set(types))
        if unknown:
            raise ResultsError(f"{where}: unknown key {unknown[0]!r}")
        for key, kind in types.items():
            if key in data and not isinstance(data[key], kind):
                raise ResultsError(f"{where}: {key} has the wrong type ({type(data[key]).__name__})")
        missing = [k for k in ("campaign", "reference", "targets", "backends", "compare") if k not in data]
        if missing:
            raise ResultsError(f"{where}: missing {missing[0]!r}")
        if not all(isinstance(t, str) for t in data["targets"]) or not all(isinstance(m, str) for m in
                                                                           data.get("modes", [])):
            raise ResultsError(f"{where}: targets and modes are lists of names")
        if data.get("version", VERSION) > VERSION:
            raise ResultsError(f"{where}: version {data['version']} is newer than this gapfuzz reads ({VERSION})")
        return cls(**{"oracle": None, **data})

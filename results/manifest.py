"""``run.json``: what a reader of a run folder needs to know of the run, as the driver resolved it.

The backends by the names their records hold (labels applied, a plug-in class's own name), which is
the reference and which the oracle, the tolerances every verdict was judged with, and the modes.
Analysis reads this rather than the campaign file, whose defaults, labels and plug-in classes it
would have to resolve again (a plug-in's name is known only by importing it); a folder written
before run.json existed falls back to its ``campaign.yaml``. It is data: read as JSON, checked
field by field, nothing in it imported or run. It is built from a campaign on the fuzzer side
(``fuzzer.config.campaign.manifest_of``): this layer knows no campaign.
"""
from __future__ import annotations

import datetime as dt
import json
from dataclasses import asdict, dataclass, field

from gapfuzz.core.modes import DEFAULT_MODE

from .folder import Folder, ResultsError
from .schema import SCHEMA_VERSION

NAME = "run.json"
VERSION = 1  # of this file's layout; the records' own is ``schema_version``
MAX_BYTES = 1 << 20  # read back; a run never writes more (``encoded``), and a campaign file is at most 1/8 of it
_BACKEND = {"stack": str, "device": str, "options": dict, "option_space": dict, "modes": list,
            "class": (str, type(None)), "option_cover": (str, dict),  # option_cover: with an option_space only
            "line": str, "release": dict}  # with releases: the name without the release, and {distribution: version}


@dataclass
class RunManifest:
    campaign: str  # the campaign's name
    reference: str  # record names (``backend`` column): ``stack@device`` or ``label@device``
    oracle: str | None
    targets: list[str]
    backends: dict  # every name above -> {"stack", "device", "options", "option_space", "modes", "class"}
    # (and "option_cover", core.covering's pairs, all, {all: [...]} or draw, where there is an option space;
    # "line" and "release" where a stack runs in several releases: the name it has without its release, such as
    # "onnxruntime@cpu", and the release's {distribution: version}, the installed one's included)
    compare: dict  # Tolerances as resolved: {"tolerances": {dtype: [rtol, atol]}, "multiplier", "far"}, "sweep"
    modes: list[str] = field(default_factory=lambda: [DEFAULT_MODE])
    schema_version: int = SCHEMA_VERSION  # of the records this gapfuzz writes
    version: int = VERSION
    written: str = ""  # UTC, ISO 8601

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, sort_keys=True, allow_nan=False)

    def encoded(self) -> bytes:
        """``run.json``'s bytes; a ``ResultsError`` (its size and the limit) when they are more than ``read``
        takes, so that a run never writes a manifest it cannot read back. The campaign is checked with it
        at load (``fuzzer.config.campaign``), before anything is written."""
        data = self.to_json().encode()
        if len(data) > MAX_BYTES - 64:  # room for the time ``write`` stamps
            raise ResultsError(f"the {NAME} a run writes would be {len(data)} bytes; at most {MAX_BYTES} bytes "
                               f"are read back (name fewer backends or option values)")
        return data

    def write(self, folder: Folder) -> str:
        """Write ``run.json`` whole (replacing an earlier one: a resumed run's); returns its path."""
        self.written = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        return folder.write_bytes(self.encoded(), NAME)

    @classmethod
    def read(cls, folder: Folder) -> RunManifest | None:
        """The folder's manifest; None when it has none (written before run.json existed)."""
        where = f"{folder}/{NAME}"
        try:
            if not folder.exists(NAME):
                return None
            raw = folder.read_bytes(NAME, limit=MAX_BYTES)
        except OSError as e:
            raise ResultsError(f"{where}: cannot read: {e.strerror or e}") from None
        try:
            data = json.loads(raw, parse_constant=_no_constant)
        except (ValueError, UnicodeDecodeError) as e:
            raise ResultsError(f"{where}: not JSON: {' '.join(str(e).split())[:160]}") from None
        except RecursionError:
            raise ResultsError(f"{where}: not a run manifest: nested too deep") from None
        return cls.checked(data, where)

    @classmethod
    def checked(cls, data, where: str) -> RunManifest:
        """``data`` (parsed JSON) as a manifest; anything else is one ResultsError line naming ``where``."""
        def bad(problem: str):
            raise ResultsError(f"{where}: {problem}")

        if not isinstance(data, dict):
            bad("a JSON object is expected")
        types = {"campaign": str, "reference": str, "oracle": (str, type(None)), "targets": list, "backends": dict,
                 "compare": dict, "modes": list, "schema_version": int, "version": int, "written": str}
        unknown = sorted(set(data) - set(types))
        if unknown:
            bad(f"unknown key {unknown[0]!r}")
        missing = [k for k in ("campaign", "reference", "targets", "backends", "compare") if k not in data]
        if missing:
            bad(f"missing {missing[0]!r}")
        for key, kind in types.items():
            if key in data and (not isinstance(data[key], kind) or isinstance(data[key], bool)):
                bad(f"{key} has the wrong type ({type(data[key]).__name__})")
        if data.get("version", VERSION) > VERSION:
            bad(f"version {data['version']} is newer than this gapfuzz reads ({VERSION})")
        for key in ("targets", "modes"):
            if not all(isinstance(x, str) for x in data.get(key, [])):
                bad(f"{key}: a list of names is expected")
        for name, entry in data["backends"].items():
            if not isinstance(entry, dict) or set(entry) - set(_BACKEND) or not {"stack", "device", "options"} <= set(
                    entry) or not all(isinstance(v, _BACKEND[k]) for k, v in entry.items()):
                bad(f"backends.{name}: {{stack, device, options, option_space, modes, class}} is expected")
            if not all(isinstance(m, str) for m in entry.get("modes", [])):
                bad(f"backends.{name}.modes: a list of names is expected")
            if not all(isinstance(k, str) and isinstance(v, str) for k, v in entry.get("release", {}).items()):
                bad(f"backends.{name}.release: {{distribution: version}} is expected")
        named = [data["reference"], *([data["oracle"]] if data.get("oracle") is not None else []), *data["targets"]]
        absent = [n for n in named if n not in data["backends"]]
        if absent:
            bad(f"{absent[0]} is not one of its backends")
        return cls(**{"oracle": None, **data})


def _no_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")

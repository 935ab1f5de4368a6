"""The campaign file's JSON Schema and its defaults (docs: README, campaigns/*.yaml)."""
from __future__ import annotations

from gapfuzz.core.bugs import DEFAULT_ORACLE, DEFAULT_REFERENCE, Mode
from gapfuzz.seeds.sizes import DIMENSION_SIZES, WIDTHS
from gapfuzz.workers.probes import DEFAULT_KINDS

from .settings import AlignScope, GuidanceMode

# Names that become folder names (the campaign's, a backend label's): no hidden or path-like ones, no
# trailing newline (``\Z``, not ``$``), and short enough for every file system's file names.
NAME_MAX = 100
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,%d}\Z" % (NAME_MAX - 1)
NAME_RULE = f"letters, digits and . _ + -, not starting with . _ + -, at most {NAME_MAX} characters"
# Counts past these are typos (a count of a million variants per seed would run for years).
MAX_COUNT = 1_000_000  # seeds sampled or taken from a selection
MAX_PER_SEED = 10_000  # variants, tries, probes, repeats
MAX_WORKERS = 4096
_STR_LIST = {"type": "array", "items": {"type": "string"}}
_GLOBS = {"oneOf": [{"type": "string"}, _STR_LIST]}
_POS_INT = {"type": "integer", "minimum": 1, "maximum": MAX_PER_SEED}
_NONNEG_NUM = {"type": "number", "minimum": 0}

# Enums as schema lists and defaults hold their plain values: the resolved campaign is written as YAML.
_MODE_NAMES = [m.value for m in Mode]
_MODES = {"oneOf": [{"enum": _MODE_NAMES},
                   {"type": "array", "minItems": 1, "uniqueItems": True, "items": {"enum": _MODE_NAMES}}]}

_BACKEND = {"oneOf": [
    {"type": "string"},
    {"type": "object", "additionalProperties": False,
     "properties": {"backend": {"type": "string"}, "class": {"type": "string"}, "device": {"type": "string"},
                    "label": {"type": "string", "pattern": NAME_PATTERN}, "options": {"type": "object"},
                    "timeout_s": {"type": "number", "exclusiveMinimum": 0}, "mode": _MODES,
                    "option_space": {"type": "object", "additionalProperties": {"type": "array", "minItems": 1}},
                    # pairs, all, draw or {all: [options]}: names checked in fuzzer.campaign (did you mean)
                    "option_cover": {"type": ["string", "object"]}}},
]}

_SELECTION = {
    "type": "object", "additionalProperties": False, "required": ["source"],
    "properties": {
        "source": {"type": "string"},
        "include": _GLOBS,
        "exclude": _GLOBS,
        "limit": {"type": ["integer", "null"], "minimum": 0, "maximum": MAX_COUNT},
        "sample": {"type": ["integer", "null"], "minimum": 0, "maximum": MAX_COUNT},
        "catalog": {"type": ["string", "null"]},
    },
}

_POOL = {
    "type": "object", "additionalProperties": False,
    "properties": {"workers": {"oneOf": [{"type": "integer", "minimum": 1, "maximum": MAX_WORKERS}, {"const": "auto"}]},
                   "cpus_per_worker": _NONNEG_NUM, "threads": {"type": "integer", "minimum": 1, "maximum": MAX_WORKERS},
                   "gpus_per_worker": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
                   "memory_gb": {"type": ["number", "null"], "exclusiveMinimum": 0},
                   "env": {"type": "object", "additionalProperties": {"type": "string"}}},
}

SCHEMA = {
    "type": "object", "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "pattern": NAME_PATTERN},
        "description": {"type": "string"},
        "seed": {"type": "integer", "minimum": 0},
        "mode": _MODES,
        "train_layers": {"type": "boolean"},
        "output": {"type": "string"},
        "seeds": {"type": "array", "minItems": 1, "items": _SELECTION},
        "capture": {"type": "object", "additionalProperties": False, "properties": {
            "max_params": {"type": ["integer", "null"], "minimum": 1},
            "timeout_s": {"type": "number", "exclusiveMinimum": 0},
            "cache": {"type": "boolean"}}},
        "variants": {"type": "object", "additionalProperties": False, "properties": {
            "per_seed": _POS_INT,
            "include_seed": {"type": "boolean"},
            "mutations": {"type": "integer", "minimum": 0, "maximum": MAX_PER_SEED},
            "mutators": _GLOBS,
            "exclude_mutators": _GLOBS,
            "guidance": {"enum": [g.value for g in GuidanceMode]},
            "max_tries": _POS_INT}},
        "probes": {"type": "object", "additionalProperties": False, "properties": {
            "per_variant": _POS_INT,
            "kinds": _GLOBS}},
        "sizes": {"type": "object", "additionalProperties": False, "properties": {
            "per_seed": {"type": "integer", "minimum": 0, "maximum": 100},
            "variants": _POS_INT,
            "values": {"type": "array", "minItems": 1,
                       "items": {"type": "integer", "minimum": 0, "maximum": 2**31 - 1}},
            "widths": {"type": "integer", "minimum": 0, "maximum": 100},
            "width_values": {"type": "array", "minItems": 1, "items": {"type": "integer", "minimum": 1,
                                                                        "maximum": 2**31 - 1}}}},
        "backends": {"type": "object", "additionalProperties": False, "required": ["targets"], "properties": {
            "reference": _BACKEND, "oracle": {"oneOf": [_BACKEND, {"type": "null"}]},
            "targets": {"type": "array", "items": _BACKEND},
            "skip_unavailable": {"type": "boolean"}, "device_reference": {"type": "boolean"}}},
        "pools": {"type": "object", "additionalProperties": False,
                  "properties": {d: _POOL for d in ("cpu", "cuda", "mps", "xpu", "npu")}},
        "run": {"type": "object", "additionalProperties": False, "properties": {
            "timeout_s": {"type": "number", "exclusiveMinimum": 0},
            "repeats": {"type": "integer", "minimum": 0, "maximum": MAX_PER_SEED},
            "retry_faults": {"type": "boolean"},
            "flush_every": {"type": "integer", "minimum": 1, "maximum": MAX_COUNT}}},
        "compare": {"type": "object", "additionalProperties": False, "properties": {
            "tolerances": {"type": "object", "additionalProperties": {
                "type": "array", "items": _NONNEG_NUM, "minItems": 2, "maxItems": 2}},
            "sweep": {"type": "array", "items": _NONNEG_NUM},
            "multiplier": {"type": "number", "exclusiveMinimum": 0},
            "far": {"type": "number", "exclusiveMinimum": 0},
            "dtype_bound_ops": {"type": "array", "items": {"type": "string", "pattern": "^aten\\.[A-Za-z0-9_.]+$"},
                                "maxItems": 1000},
            "detection_adapter": {"type": "boolean"},
            "align": {"type": "boolean"},
            "align_scope": {"enum": [a.value for a in AlignScope]},
            "explain": {"type": "boolean"},
            "bisect": {"type": "boolean"},
            "bisect_budget_s": {"type": "number", "exclusiveMinimum": 0}}},
        "ray": {"type": "object", "additionalProperties": False, "properties": {
            "address": {"type": ["string", "null"]},
            "num_cpus": {"type": ["integer", "null"], "minimum": 1, "maximum": 1 << 20}}},
    },
}

# Keys that say how a campaign runs, not what it finds: a resume may change them (a bigger cluster,
# another address, another flush size) and keep the records it continues.
OPERATIONAL_KEYS = ("description", "output", "pools", "ray", "run.flush_every")

DEFAULTS = {
    "name": "campaign",
    "description": "",
    "seed": 0,
    "mode": Mode.INFERENCE.value,
    "train_layers": False,
    "output": "runs",
    "capture": {"max_params": 100_000_000, "timeout_s": 600, "cache": True},
    "variants": {"per_seed": 3, "include_seed": True, "mutations": 1, "mutators": ["*"], "exclude_mutators": [],
                 "guidance": GuidanceMode.UNIFORM.value, "max_tries": 8},
    "probes": {"per_variant": 8, "kinds": list(DEFAULT_KINDS)},
    "sizes": {"per_seed": 3, "variants": 1, "values": list(DIMENSION_SIZES), "widths": 1, "width_values": list(WIDTHS)},
    "backends": {"reference": DEFAULT_REFERENCE, "oracle": DEFAULT_ORACLE, "targets": [], "skip_unavailable": False,
                 "device_reference": True},
    "pools": {},
    "run": {"timeout_s": 300, "repeats": 3, "retry_faults": True, "flush_every": 1000},
    "compare": {"tolerances": {}, "sweep": [1e-6, 1e-5, 1e-4, 1e-3, 1e-2], "multiplier": 3.0, "far": 1000.0,
                "dtype_bound_ops": [],
                "detection_adapter": True, "align": True,
                "align_scope": AlignScope.SEED.value, "explain": True, "bisect": True,
                "bisect_budget_s": 900},
    "ray": {"address": None, "num_cpus": None},
}

POOL_DEFAULTS = {"workers": 1, "cpus_per_worker": 1, "gpus_per_worker": 1, "threads": 1, "memory_gb": None,
                 "env": {}}
SELECTION_DEFAULTS = {"include": [], "exclude": [], "limit": None, "sample": None, "catalog": None}

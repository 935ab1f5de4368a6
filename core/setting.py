"""A configuration setting defined once: a dataclass field whose metadata holds its default and its JSON
Schema constraints, so the type, the default and the schema of a key cannot drift apart.

A settings class built from ``setting`` fields has no Python defaults: it is built from a mapping whose
defaults were filled in (``defaults_of``), or with every field named, so leaving one out is a type error.
The JSON Schema of a class (``schema_of``) follows from the fields' types: ``bool``, ``int``, ``float``,
``str``, ``X | None``, a ``StrEnum``, a nested settings class or a list of them; any other field gives
its schema explicitly.

Every number has a bound: ``bounded`` gives a numeric key without a maximum of its own the general one
(``MAX_SECONDS`` for a key of seconds, named ``..._s``; else ``MAX_NUMBER``), so no value a file gives
overflows a timer, a count or a Parquet column further in. The command line's numbers take the bounds of the
keys they stand for (``fuzzer.cli.parser``), and a campaign's plan, the product of its counts, has its own
(``MAX_PAIRS``, ``MAX_RUNS``).
"""
from __future__ import annotations

import copy
import dataclasses
import enum
import types
import typing

# Counts past these are typos (a count of a million variants per seed would run for years).
MAX_COUNT = 1_000_000  # seeds sampled or taken from a selection
MAX_PER_SEED = 10_000  # variants, tries, probes, repeats
MAX_WORKERS = 4096
MAX_SECONDS = 7 * 24 * 3600  # a timeout or a budget: a week (a thread's wait overflows past about 292 years)
MAX_NUMBER = 2**53  # any other number: integers exact as floats (JSON, Parquet, Ray)
MAX_PARAMS = 10**12  # a parameter cap past any model a worker could hold
MAX_MEMORY_GB = 1 << 20  # a worker's memory: a pebibyte
MAX_SEED = 2**63 - 1  # a random seed: an int64
# A plan's size: counts each within its bound multiply into a plan no machine holds or runs (10,000 variants
# of 10,000 operator seeds), so their product has a bound too, checked from the counts before the plan is built
# (``fuzzer.config.plan.check_size``): ten times the cluster campaign's (campaigns/cluster.yaml, ~1.4M pairs).
MAX_PAIRS = 10_000_000  # (variant, backend) pairs: a campaign's plan holds each in memory before the first runs
MAX_RUNS = 100_000_000  # runs: pairs x probes per variant

NO_DEFAULT = object()  # a key the file must give (or a list the reader checks itself)
_JSON_TYPES = {bool: "boolean", int: "integer", float: "number", str: "string"}


def setting(default=NO_DEFAULT, doc: str = "", *, schema: dict | None = None, required: bool = False,
            **constraints) -> dataclasses.Field:
    """A settings field: ``default`` is the file's (filled in by ``defaults_of``, never a Python default),
    ``constraints`` are JSON Schema keywords beside the type's (``minimum=0``), ``schema`` replaces the
    derived schema, ``required`` makes the key one the file must give."""
    return dataclasses.field(metadata={"default": default, "doc": doc, "schema": schema, "required": required,
                                       "constraints": constraints})


def _hints(cls) -> dict:
    return typing.get_type_hints(cls)


def _type_schema(tp, documented: bool) -> dict:
    """The JSON Schema a Python type stands for; nested settings classes become objects."""
    args = typing.get_args(tp)
    if isinstance(tp, types.UnionType) or typing.get_origin(tp) is typing.Union:
        inner = [a for a in args if a is not type(None)]
        if len(inner) == 1 and inner[0] in _JSON_TYPES:
            return {"type": [_JSON_TYPES[inner[0]], "null"]}
        raise TypeError(f"{tp}: give this setting's schema explicitly")
    if tp in _JSON_TYPES:
        return {"type": _JSON_TYPES[tp]}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return {"enum": [m.value for m in tp]}
    if dataclasses.is_dataclass(tp):
        return schema_of(tp, documented)
    if typing.get_origin(tp) is list and len(args) == 1 and dataclasses.is_dataclass(args[0]):
        return {"type": "array", "items": schema_of(args[0], documented)}
    raise TypeError(f"{tp}: give this setting's schema explicitly")


def field_schema(f: dataclasses.Field, tp, documented: bool = False) -> dict:
    meta = f.metadata
    if meta.get("schema") is not None:
        out = meta["schema"]
    else:
        derived = _type_schema(tp, documented)
        constraints = meta.get("constraints", {})
        if derived.get("type") == "array":  # constraints of a list of sections are the list's, the items' last
            out = {"type": "array", **constraints, "items": derived["items"]}
        else:
            out = {**derived, **constraints}
    if documented:
        out = {**out, **({"description": meta["doc"]} if meta.get("doc") else {}),
               **({"default": meta["default"]} if meta.get("default", NO_DEFAULT) is not NO_DEFAULT else {})}
    return out


def schema_of(cls, documented: bool = False) -> dict:
    """The JSON Schema object of a settings class: its fields, no other key; ``documented``: each key's
    description and default beside its constraints (for an editor; validation ignores them)."""
    hints = _hints(cls)
    fields = dataclasses.fields(cls)
    required = [f.name for f in fields if f.metadata.get("required")]
    return {"type": "object", "additionalProperties": False, **({"required": required} if required else {}),
            "properties": {f.name: field_schema(f, hints[f.name], documented) for f in fields}}


def defaults_of(cls) -> dict:
    """Every default of a settings class, nested sections included (keys without one left out)."""
    hints, out = _hints(cls), {}
    for f in dataclasses.fields(cls):
        default = f.metadata.get("default", NO_DEFAULT)
        if default is not NO_DEFAULT:
            out[f.name] = copy.deepcopy(default)
        elif dataclasses.is_dataclass(hints[f.name]) and "default" not in f.metadata:
            out[f.name] = defaults_of(hints[f.name])
    return out


def build(cls, given: dict):
    """An instance of a settings class from a mapping whose defaults are filled in: nested sections
    built too, enum values made members."""
    hints, values = _hints(cls), {}
    for f in dataclasses.fields(cls):
        tp, value = hints[f.name], given[f.name]
        if dataclasses.is_dataclass(tp):
            value = build(tp, value)
        elif typing.get_origin(tp) is list and dataclasses.is_dataclass((typing.get_args(tp) or [None])[0]):
            value = [build(typing.get_args(tp)[0], v) for v in value]
        elif isinstance(tp, type) and issubclass(tp, enum.Enum):
            value = tp(value)
        values[f.name] = value
    return cls(**values)


def bounded(schema, name: str = ""):
    """``schema`` (a JSON Schema) with every integer or number that has no maximum given the general one:
    ``MAX_SECONDS`` for a key named ``..._s``, ``MAX_NUMBER`` for any other; nested schemas alike."""
    if isinstance(schema, list):
        return [bounded(s, name) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {}
    for key, value in schema.items():
        if key == "properties" and isinstance(value, dict):
            out[key] = {k: bounded(v, k) for k, v in value.items()}
        elif key in ("items", "additionalProperties", "oneOf", "anyOf", "allOf"):
            out[key] = bounded(value, name)
        else:
            out[key] = value
    types = out.get("type")
    types = {types} if isinstance(types, str) else set(types or ())
    if types & {"integer", "number"} and "maximum" not in out and "exclusiveMaximum" not in out:
        out["maximum"] = MAX_SECONDS if name.endswith("_s") else MAX_NUMBER
    return out


def names_of(cls) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)]

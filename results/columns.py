"""The record's nested columns: one codec per column, the one place that knows both of its forms.

A run folder before schema 7 holds six columns as JSON inside strings; from 7 on they are Parquet
structs and lists that pandas, DuckDB and Polars read as they are. Each codec turns what a writer
gives (the JSON text gapfuzz's code builds, or the value) into the Parquet form (``encode``), and
whatever a reader holds (an old folder's JSON text, the Parquet form as pyarrow gives it in Python,
or the value itself) into the value (``decode``) or the JSON text the column held before (``text``).

A mapping of mixed value types (options, what a stack reported) is a list of ``{key, value, type}``
structs, not a ``map<string, string>`` of JSON: a string value is its own text, a number or boolean
its literal (``CAST(value AS DOUBLE)``), and ``type`` (str int float bool null json) gives back the
value exactly, so ``"1"`` and ``1`` stay apart; only a list or mapping value is JSON text (``json``).
"""
from __future__ import annotations

import json
import numbers
import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_STR, _NULL, _JSON = "str", "null", "json"
_TYPES = (_STR, "int", "float", "bool", _NULL, _JSON)  # a mapping value's type names (``_typed``)


def _typed(v) -> tuple[str, object]:
    """A mapping value's type name and the value as JSON writes it."""
    if v is None:
        return _NULL, None
    if isinstance(v, bool) or type(v).__name__ == "bool_":  # numpy's too
        return "bool", bool(v)
    if isinstance(v, numbers.Integral):
        return "int", int(v)
    if isinstance(v, numbers.Real):
        return "float", float(v)
    if isinstance(v, (list, tuple, dict)):
        return _JSON, v
    return _STR, str(v)


KEY_VALUES = pa.list_(pa.struct([("key", pa.string()), ("value", pa.string()), ("type", pa.string())]))


MAX_JSON_DEPTH = 64  # lists and mappings within each other in a JSON value of a record (an option's value)
_JSON_STRING, _NOT_BRACKET, _INNERMOST = re.compile(r'"(?:[^"\\]|\\.)*"'), re.compile(r"[^][{}]+"), \
    re.compile(r"\[\]|\{\}")


def _json(text: str | bytes):
    """JSON text as its value; nested more than ``MAX_JSON_DEPTH`` deep (a hostile record: ten thousand ``[``
    would be a ``RecursionError`` here or wherever the value is walked) is a ``ValueError``."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    if text.count("[") + text.count("{") > MAX_JSON_DEPTH:
        brackets = _NOT_BRACKET.sub("", _JSON_STRING.sub("", text))
        for _ in range(MAX_JSON_DEPTH):  # each pass takes away the innermost level
            brackets, found = _INNERMOST.subn("", brackets)
            if not found:
                break
        else:
            if _INNERMOST.search(brackets):
                raise ValueError(f"JSON nested more than {MAX_JSON_DEPTH} levels deep")
    return json.loads(text)


def _loads(value):
    """JSON text as its value, a missing value (None, NaN, NA) as None, a numpy array (pandas gives a Parquet
    list so) as a list; any other value as it is."""
    if isinstance(value, (str, bytes)):
        return _json(value)
    if _missing(value):
        return None
    return value.tolist() if type(value).__name__ == "ndarray" else value


def _is_kv_list(value) -> bool:
    value = _loads(value)
    return isinstance(value, (list, tuple)) and all(isinstance(e, dict) and "key" in e and "type" in e for e in value)


class KeyValues:
    """A mapping with values of any type (``backend_options``, ``versions``, ``backend_info``)."""

    arrow = KEY_VALUES

    @staticmethod
    def encode(value) -> list[dict] | None:
        value = _loads(value)
        if value is None:
            return None
        if not isinstance(value, dict):
            raise ValueError(f"a mapping is expected, not {type(value).__name__}")
        out = []
        for k, v in sorted(value.items(), key=lambda kv: str(kv[0])):
            kind, v = _typed(v)
            text = None if v is None else v if kind == _STR else json.dumps(v, sort_keys=True, default=str)
            out.append({"key": str(k), "value": text, "type": kind})
        return out

    @staticmethod
    def decode(value) -> dict:
        """The mapping; none (null) is an empty one."""
        value = _loads(value)
        if value is None:
            return {}
        if isinstance(value, dict):
            return value
        if not _is_kv_list(value):
            raise ValueError(f"a mapping is expected, not {type(value).__name__}")
        return {e["key"]: None if e["type"] == _NULL else e["value"] if e["type"] == _STR else _json(e["value"])
                for e in value}

    @classmethod
    def text(cls, value) -> str:
        return json.dumps(cls.decode(value), sort_keys=True, default=str)


class RecipeColumn:
    """``recipe``: ``{seed, mutations: [{name, params}], rng, mode, train_layers}`` (``fuzzer.recipe``)."""

    arrow = pa.struct([("seed", pa.string()),
                       ("mutations", pa.list_(pa.struct([("name", pa.string()), ("params", KEY_VALUES)]))),
                       ("rng", pa.int64()), ("mode", pa.string()), ("train_layers", pa.bool_())])

    @staticmethod
    def encode(value) -> dict | None:
        value = _loads(value)
        if not value:
            return None
        mutations = [{"name": m[0], "params": KeyValues.encode(m[1] if len(m) > 1 else {})}
                     for m in value.get("mutations") or []]
        return {"seed": value.get("seed"), "mutations": mutations, "rng": value.get("rng"),
                "mode": value.get("mode"), "train_layers": value.get("train_layers")}

    @staticmethod
    def decode(value) -> dict:
        """The recipe as ``Recipe.to_json`` writes it: mode and train_layers only when set."""
        value = _loads(value)
        if not value:
            return {}
        out = {k: v for k, v in value.items() if v is not None and k != "mutations"}
        if value.get("mutations") is not None:
            out["mutations"] = [[m["name"], KeyValues.decode(m["params"])] if isinstance(m, dict) else list(m)
                                for m in value["mutations"]]
        if out.get("train_layers") is False:
            del out["train_layers"]
        return out

    @classmethod
    def text(cls, value) -> str:
        return json.dumps(cls.decode(value), sort_keys=True, separators=(",", ":"))


class ProbeRecipeColumn:
    """``probe_recipe``: ``{kind, seed, params}`` (``workers.run.probes.Probe.recipe``)."""

    arrow = pa.struct([("kind", pa.string()), ("seed", pa.int64()), ("params", KEY_VALUES)])

    @staticmethod
    def encode(value) -> dict | None:
        value = _loads(value)
        if value is None:
            return None
        params = {k: v for k, v in value.items() if k not in ("kind", "seed")}
        return {"kind": value.get("kind"), "seed": value.get("seed"), "params": KeyValues.encode(params)}

    @staticmethod
    def decode(value) -> dict | None:
        """``{"kind", ...params, "seed"}``; none when the record has none (schema 1)."""
        value = _loads(value)
        if value is None:
            return None
        params = _loads(value.get("params"))
        if "params" not in value or set(value) - {"kind", "seed", "params"} or not _is_kv_list(params or []):
            return dict(value)  # already the value
        return {**({"kind": value["kind"]} if value.get("kind") is not None else {}), **KeyValues.decode(params),
                **({"seed": value["seed"]} if value.get("seed") is not None else {})}

    @classmethod
    def text(cls, value) -> str | None:
        v = cls.decode(value)
        return None if v is None else json.dumps(v, sort_keys=True)


class DivGrowthColumn:
    """``div_growth``: the divergent path, ``[{node, op, tol_ratio}]`` (``workers.judge.align``)."""

    arrow = pa.list_(pa.struct([("node", pa.string()), ("op", pa.string()), ("tol_ratio", pa.float64())]))

    @staticmethod
    def encode(value) -> list[dict] | None:
        value = _loads(value)
        if value is None:
            return None
        return [e if isinstance(e, dict) else {"node": e[0], "op": e[1], "tol_ratio": e[2]} for e in value]

    @staticmethod
    def decode(value) -> list[list] | None:
        """``[[node, op, tol_ratio], ...]``; none when not located."""
        value = _loads(value)
        if value is None:
            return None
        return [[e["node"], e["op"], e["tol_ratio"]] if isinstance(e, dict) else list(e) for e in value]

    @classmethod
    def text(cls, value) -> str | None:
        v = cls.decode(value)
        return None if v is None else json.dumps(v)


NESTED = {"probe_recipe": ProbeRecipeColumn, "recipe": RecipeColumn, "backend_options": KeyValues,
          "versions": KeyValues, "div_growth": DivGrowthColumn, "backend_info": KeyValues}


def json_problem(array) -> str | None:
    """What is wrong with the first value of a nested Arrow column that its codec would read as JSON (a
    mapping's number, boolean, list or mapping; ``_json``), as ``the key 'k': why``; None when each reads.
    Checked where a file is read, so that the one line names the file; each distinct value once."""
    array = array.combine_chunks() if isinstance(array, pa.ChunkedArray) else array
    t = array.type
    if pa.types.is_list(t) and pa.types.is_struct(t.value_type) and \
            sorted(f.name for f in t.value_type) == ["key", "type", "value"]:  # a mapping (``KeyValues``)
        entries = array.flatten()
        kinds = entries.field("type")
        typed = pc.invert(pc.is_in(pc.fill_null(kinds, ""), pa.array([_STR, _NULL])))
        if not pc.any(typed).as_py():
            return None
        distinct = pa.table({f: entries.field(f).filter(typed) for f in ("key", "value", "type")}) \
            .group_by(["value", "type"], use_threads=False).aggregate([("key", "min")])  # each value once, in Arrow
        for k, v, kind in zip(*(distinct.column(f).to_pylist() for f in ("key_min", "value", "type"))):
            if kind not in _TYPES:
                return f"the key {k!r}: its type {kind!r} is none of {', '.join(_TYPES)}"
            if v is None:
                return f"the key {k!r}: its {kind} value is missing"
            try:
                _json(v)
            except ValueError as e:
                return f"the key {k!r}: its {kind} value cannot be read ({' '.join(str(e).split())[:100]})"
        return None
    if pa.types.is_struct(t):
        children = array.flatten()
    elif pa.types.is_list(t) or pa.types.is_large_list(t):
        children = [array.flatten()]
    else:
        return None
    return next((p for p in map(json_problem, children) if p), None)


def decode(column: str, value):
    """A nested column's value, from any form a reader holds (``NESTED[column].decode``)."""
    return NESTED[column].decode(value)


def text(column: str, value) -> str | None:
    """A nested column's value as the JSON text it was before schema 7: hashable, for grouping and display."""
    return NESTED[column].text(value)


def backend_options_of(value) -> dict:
    return KeyValues.decode(value)


def versions_of(value) -> dict:
    return KeyValues.decode(value)


def backend_info_of(value) -> dict:
    return KeyValues.decode(value)


def recipe_of(value) -> dict:
    return RecipeColumn.decode(value)


def probe_recipe_of(value) -> dict | None:
    return ProbeRecipeColumn.decode(value)


def div_growth_of(value) -> list | None:
    return DivGrowthColumn.decode(value)


def encode_column(column: str, values: list) -> pa.Array:
    """An old folder's column of JSON text (or values) as the nested column."""
    codec, seen = NESTED[column], {}
    for v in values:
        if isinstance(v, str) and v not in seen:
            seen[v] = codec.encode(v)
    return pa.array([None if v is None else seen[v] if isinstance(v, str) else codec.encode(v) for v in values],
                    codec.arrow)


def decode_column(column: str, array) -> np.ndarray:
    """A nested Arrow column as its values, one Python object per row: rows alike share one, decoded once
    (a million rows of a few option sets in a fraction of a second, not the seconds ``to_pylist`` takes)."""
    array = array.combine_chunks() if isinstance(array, pa.ChunkedArray) else array
    indices = pc.dictionary_encode(row_keys(array)).indices.to_numpy(zero_copy_only=False)
    _, first = np.unique(indices, return_index=True)
    codec, values = NESTED[column], array.take(pa.array(first)).to_pylist()
    decoded = np.empty(len(values), dtype=object)
    for i, v in enumerate(values):
        decoded[i] = codec.decode(v)
    return decoded[indices]  # the codes are 0..n-1 and ``first`` lists them in order


# row_keys' marks: a value's text has none of them raw (``_ESCAPES``), so that two keys are equal exactly
# when the rows are (a list is bracketed and each item marked, a struct's fields are of fixed number)
_NULL_MARK, _OPEN, _ITEM, _CLOSE, _FIELD = "\x1a", "\x1c", "\x1e", "\x1d", "\x1f"
_ESCAPES = [("\x1b", "\x1b\x1b"), (_NULL_MARK, "\x1bn"), (_OPEN, "\x1bo"), (_ITEM, "\x1bi"), (_CLOSE, "\x1bc"),
            (_FIELD, "\x1bf")]


def row_keys(array: pa.Array) -> pa.Array:
    """One string per row of a nested Arrow array, equal for two rows exactly when their values are."""
    t = array.type
    if pa.types.is_struct(t):
        out = pc.binary_join_element_wise(*[row_keys(child) for child in array.flatten()], _FIELD)
    elif pa.types.is_list(t):
        items = pc.binary_join_element_wise(_ITEM, row_keys(array.values), "")
        joined = pc.binary_join(pa.ListArray.from_arrays(array.offsets, items), "")
        out = pc.binary_join_element_wise(_OPEN, joined, _CLOSE, "")
    else:
        out = pc.cast(array, pa.string())
        if pc.any(pc.match_substring_regex(out, "[\x1a-\x1f]")).as_py():  # rare: escaped only then
            for raw, escaped in _ESCAPES:
                out = pc.replace_substring(out, raw, escaped)
    return pc.if_else(array.is_null(), _NULL_MARK, out)


def texts(column: str, values) -> list:
    """``text`` of each of ``values`` (a pandas column of ``decode_column``'s objects, or JSON text): hashable,
    to group or count by; a value shared by many rows is written once."""
    seen: dict[int, tuple] = {}  # id -> (the value, kept alive so that no other takes its id; its text)
    out = []
    for v in values:
        if id(v) not in seen:
            seen[id(v)] = (v, None if _missing(v) else text(column, v))
        out.append(seen[id(v)][1])
    return out


def _missing(v) -> bool:
    """None, NaN or pandas' NA: a row without the column."""
    return v is None or (isinstance(v, float) and v != v) or type(v).__name__ == "NAType"

"""YAML as a person means it: duplicate keys refused, ``1e-5`` a number, one-line errors.

PyYAML reads YAML 1.1: a float needs a dot (``1e-5`` is the string "1e-5"), and a key given twice
silently keeps the last value. Campaign files travel between people, so both are surprises;
``load`` reads YAML 1.2's floats, refuses a repeated key with its line, refuses text that is not
UTF-8, and raises ``YamlError`` with one line naming the file. ``non_finite`` finds a NaN or an
infinity where a finite number is meant.
"""
from __future__ import annotations

import math
import re

import yaml


class YamlError(ValueError):
    """A file that is not the YAML it should be; the message is one line naming it."""


class StrictLoader(yaml.SafeLoader):
    """SafeLoader (no Python objects) with YAML 1.2 floats and no repeated keys."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                if isinstance(key, (str, int, float, bool)) and key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"the key {key!r} is given twice", key_node.start_mark)
                seen.add(key)
        return super().construct_mapping(node, deep)


StrictLoader.add_implicit_resolver(  # 1e-5, 2E3: floats in YAML 1.2, strings in 1.1
    "tag:yaml.org,2002:float", re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"))


def load(data: bytes | str, source: str):
    """The document in ``data``; ``source`` names it in errors."""
    if isinstance(data, bytes):
        if b"\0" in data:
            raise YamlError(f"{source}: not a text file (it holds NUL bytes)")
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise YamlError(f"{source}: not UTF-8 text (byte {e.start} cannot be decoded)") from None
    try:
        return yaml.load(data, Loader=StrictLoader)  # noqa: S506 - StrictLoader is a SafeLoader
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark else ""
        problem = " ".join(str(getattr(e, "problem", None) or e).split())
        raise YamlError(f"{source}: not valid YAML{at}: {problem}") from None


def non_finite(value, where: str = "") -> str | None:
    """The dotted key of the first NaN or infinity in ``value`` (None when there is none)."""
    if isinstance(value, float) and not math.isfinite(value):
        return where or "(the document)"
    if isinstance(value, dict):
        children = ((f"{where}.{k}" if where else str(k), v) for k, v in value.items())
    elif isinstance(value, list):
        children = ((f"{where}[{i}]", v) for i, v in enumerate(value))
    else:
        return None
    for path, child in children:
        found = non_finite(child, path)
        if found:
            return found
    return None

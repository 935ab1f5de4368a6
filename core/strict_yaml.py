"""YAML as a person means it: duplicate keys refused, ``1e-5`` a number, one-line errors.

PyYAML reads YAML 1.1: a float needs a dot (``1e-5`` is the string "1e-5"), and a key given twice
silently keeps the last value. Campaign files travel between people, so both are surprises;
``load`` reads YAML 1.2's floats, refuses a repeated key with its line, refuses text that is not
UTF-8, and raises ``YamlError`` with one line naming the file. ``non_finite`` finds a NaN or an
infinity where a finite number is meant, ``key_problem`` a key that is not a name.

Bounds, so that a hostile file is one line and not a hang or a crash: ``read_file`` reads only a
regular file of at most ``MAX_BYTES``; nesting deeper than ``MAX_DEPTH`` and aliases that expand
past ``MAX_NODES`` values ("billion laughs") are refused before anything is built from them, and so
is a number written with more than ``MAX_NUMBER_CHARS`` characters (Python refuses to read an integer of
thousands of digits) or one past the largest float (``1e5000``, which would silently become infinity).
"""
from __future__ import annotations

import math
import os
import re
import stat
import sys
from pathlib import Path

import yaml

MAX_BYTES = 1_000_000  # a file read here; the largest campaign shipped is a few kB
# A campaign file a person gives: a run writes it out again, every default filled in (campaign.yaml, about 2x)
# and every backend spelled out (run.json, up to about 5x), and must read both back (run.json up to 1 MiB)
CAMPAIGN_MAX_BYTES = 128 * 1024
MAX_DEPTH = 64  # lists and mappings within each other
MAX_NODES = 200_000  # values in the document once every alias is expanded
MAX_NUMBER_CHARS = 100  # a number as written; every setting's bound is far shorter
_INT, _FLOAT = "tag:yaml.org,2002:int", "tag:yaml.org,2002:float"


class YamlError(ValueError):
    """A file that is not the YAML it should be; the message is one line naming it."""


class StrictLoader(yaml.SafeLoader):
    """SafeLoader (no Python objects) with YAML 1.2 floats, no repeated keys, and bounded nesting."""

    _depth = 0

    def compose_node(self, parent, index):
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise yaml.composer.ComposerError(None, None, f"nested more than {MAX_DEPTH} levels deep",
                                                  self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                if not isinstance(key_node, yaml.ScalarNode):  # ``? [a, b]``: a key no reader can look up
                    kind = "list" if isinstance(key_node, yaml.SequenceNode) else "mapping"
                    raise yaml.constructor.ConstructorError(
                        None, None, f"a key is a {kind}; a key is a single value (a name)", key_node.start_mark)
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
    if len(data) > MAX_BYTES:
        raise YamlError(f"{source}: more than {MAX_BYTES} bytes; a file read here is at most that")
    if isinstance(data, bytes):
        if b"\0" in data:
            raise YamlError(f"{source}: not a text file (it holds NUL bytes)")
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise YamlError(f"{source}: not UTF-8 text (byte {e.start} cannot be decoded)") from None
    loader = StrictLoader(data)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _expanded_size(node, source)
        _check_numbers(loader, node, source)
        return loader.construct_document(node)
    except RecursionError:
        raise YamlError(f"{source}: nested too deeply to read (at most {MAX_DEPTH} levels)") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark else ""
        problem = " ".join(str(getattr(e, "problem", None) or e).split())
        raise YamlError(f"{source}: not valid YAML{at}: {problem}") from None
    finally:
        loader.dispose()


def _expanded_size(root, source: str) -> int:
    """How many values the document holds with every alias expanded (each distinct node counted once
    per place it appears); refuses more than ``MAX_NODES`` and an alias inside its own anchor."""
    sizes: dict[int, int] = {}
    busy: set[int] = set()

    def size(node) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in busy:
            raise YamlError(f"{source}: not valid YAML at line {node.start_mark.line + 1}: an alias refers to "
                            f"the value it is part of")
        busy.add(key)
        total = 1
        if isinstance(node, yaml.SequenceNode):
            total += sum(size(child) for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            total += sum(size(k) + size(v) for k, v in node.value)
        busy.discard(key)
        if total > MAX_NODES:
            raise YamlError(f"{source}: its aliases expand to more than {MAX_NODES} values (line "
                            f"{node.start_mark.line + 1}); write the values out or use fewer aliases")
        sizes[key] = total
        return total

    return size(root)


def _check_numbers(loader: StrictLoader, root, source: str) -> None:
    """Refuses a number too long to read or past the largest float, naming its key (each node once)."""
    seen: set[int] = set()

    def walk(node, where: str) -> None:
        if id(node) in seen:
            return
        seen.add(id(node))
        if isinstance(node, yaml.ScalarNode):
            if node.tag in (_INT, _FLOAT):
                _check_number(loader, node, f"{source}: {where or 'the document'}")
        elif isinstance(node, yaml.SequenceNode):
            for i, child in enumerate(node.value):
                walk(child, f"{where}[{i}]")
        elif isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                name = str(key.value)[:40] if isinstance(key, yaml.ScalarNode) else "?"
                walk(key, f"{where or 'the top level'}: the key {name!r}")
                walk(value, f"{where}.{name}" if where else name)

    walk(root, "")


def _check_number(loader: StrictLoader, node, where: str) -> None:
    text = node.value
    if len(text) > MAX_NUMBER_CHARS:
        raise YamlError(f"{where}: a number of {len(text)} characters ({text[:20]}...) at line "
                        f"{node.start_mark.line + 1}; a number here is at most {MAX_NUMBER_CHARS} characters")
    written_as = text.lower()  # .inf and .nan: the non-finite numbers as YAML writes them, said by the reader
    if node.tag == _FLOAT and "inf" not in written_as and "nan" not in written_as and \
            not math.isfinite(loader.construct_yaml_float(node)):
        raise YamlError(f"{where}: {text} is past the largest number there is (about {sys.float_info.max:.1e})")


def read_file(path: str | Path, what: str = "file", limit: int = MAX_BYTES) -> bytes:
    """The bytes of ``path``: a regular file (not a device, a FIFO or a folder, which are never
    opened) of at most ``limit`` bytes. Raises ``OSError`` when it cannot be read, ``YamlError``
    (one line naming it, with its size and the limit) when it is not such a file."""
    st = os.stat(path)
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(21, "it is a folder", str(path))
    if not stat.S_ISREG(st.st_mode):
        raise YamlError(f"{path}: cannot read {what}: not a regular file (a device, a FIFO or a socket)")
    if st.st_size > limit:
        raise YamlError(f"{path}: {what} of {st.st_size} bytes; at most {limit} bytes are read")
    with open(path, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise YamlError(f"{path}: {what} of more than {limit} bytes; at most {limit} bytes are read")
    return data


def key_problem(value, where: str = "") -> str | None:
    """``'where: why'`` for the first mapping key in ``value`` that is not a non-empty string (None when
    every key is a name): ``1: a`` and ``null: x`` are keys a person did not mean."""
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str) or not k:
                shown = "null" if k is None else "an empty string" if k == "" else repr(k)
                return f"{where or 'the top level'}: the key {shown} is not a name (keys are strings)"
            found = key_problem(v, f"{where}.{k}" if where else k)
            if found:
                return found
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found = key_problem(v, f"{where}[{i}]")
            if found:
                return found
    return None


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

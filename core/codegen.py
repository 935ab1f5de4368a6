"""Scripts written from data: values enter as literals, and a written script is checked to carry none as code.

A reproducer, a vendor's test file and a report's script hold text from records and campaign files (a
campaign's name, a torch version, a compiler's message), and ``gapfuzz repro`` runs what it writes. So a
value enters a script only through ``literal``, ``docstring`` or ``comment``, and ``vet`` checks the
result before it is written or run: the script parses, and taking every value out of it (each raw
occurrence, whole, line by line or cut short) leaves the same statements, only other string contents.
A value that changed a statement was code; the script is refused.
"""
from __future__ import annotations

import ast
import re

# a value without these characters cannot end a string or a comment, nor call anything
_BREAKS = re.compile(r"['\"\n\r{}#\\;()\x00]")
_SHORTEST = 6  # no shorter text both leaves a literal and calls something
_SHORTEST_CUT = 16  # a start of a value as long as this found in a script is no coincidence
_UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")


class ScriptRefused(ValueError):
    """A generated script that would carry a value as code, or does not parse."""


def literal(value) -> str:
    """``value`` (plain data: None, bool, int, float, str, and lists, tuples and dicts of them) as a
    Python literal that reads back equal."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{literal(k)}: {literal(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        inner = ", ".join(literal(v) for v in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner}{',' if len(value) == 1 else ''})"
    if isinstance(value, str):
        return repr(str(value))  # a str subclass (an enum) as the plain string
    if value is None or isinstance(value, (bool, int, float)):
        return repr(value)
    raise TypeError(f"{type(value).__name__} is not plain data for a script")


def docstring(text: str) -> str:
    """``text`` as a triple-quoted string literal: backslashes and quotes escaped, controls dropped."""
    body = _UNPRINTABLE.sub("", str(text).replace("\r\n", "\n")).replace("\\", "\\\\").replace('"', '\\"')
    out = f'"""{body}"""'
    if ast.literal_eval(out) != _UNPRINTABLE.sub("", str(text).replace("\r\n", "\n")):
        raise ScriptRefused("a docstring does not read back as its text")
    return out


def comment(text: str, limit: int = 200) -> str:
    """``text`` as one comment line: whitespace runs (newlines included) as one space, controls dropped."""
    return "# " + " ".join(_UNPRINTABLE.sub(" ", str(text)).split())[:limit]


def strings_in(*values) -> list[str]:
    """Every string in ``values`` (dict keys and values, list items, nested), for ``vet``."""
    out, todo = [], list(values)
    while todo:
        v = todo.pop()
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, dict):
            todo += [*v.keys(), *v.values()]
        elif isinstance(v, (list, tuple, set, frozenset)):
            todo += list(v)
    return out


def vet(script: str, data, what: str = "the script") -> None:
    """Refuse ``script`` (``ScriptRefused``, one line) unless it parses and every string of ``data`` in it
    is inside a string literal or a comment: its statements with the values taken out are its statements."""
    shape = _shape(script, what)
    neutral = script
    for value in sorted({v for v in data if isinstance(v, str) and _BREAKS.search(v)}, key=len, reverse=True):
        cut = _longest_prefix(value, neutral)
        for piece in (value, *value.splitlines(), cut if len(cut) >= _SHORTEST_CUT else ""):
            if len(piece) >= _SHORTEST and _BREAKS.search(piece) and piece in neutral:
                neutral = neutral.replace(piece, "x")
        try:
            changed = _shape(neutral, what) != shape
        except ScriptRefused:
            changed = True
        if changed:
            raise ScriptRefused(f"{what} would carry this text as code, so it is not written: "
                                f"{' '.join(value.split())[:80]!r}")


def _longest_prefix(value: str, text: str) -> str:
    """The longest start of ``value`` found in ``text`` (a value cut short where it was written)."""
    lo, hi = 0, len(value)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if value[:mid] in text else (lo, mid - 1)
    return value[:lo]


class _Blank(ast.NodeTransformer):
    def visit_Constant(self, node):
        return ast.Constant("") if isinstance(node.value, (str, bytes)) else node


def _shape(script: str, what: str) -> str:
    try:
        tree = ast.parse(script)
    except (SyntaxError, ValueError) as e:
        raise ScriptRefused(f"{what} does not parse ({type(e).__name__}: {getattr(e, 'msg', e)}), so it is not "
                            f"written") from None
    return ast.dump(_Blank().visit(tree), annotate_fields=False)

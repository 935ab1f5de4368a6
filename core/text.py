"""Text from records and files, made safe to store and to show: capped, escaped for a terminal, fenced
for Markdown.

A record's message is whatever a compiler printed, and a run folder may come from anyone, so its text
is data. Three bounds, one place each: a free-text field is cut at ``MAX_FIELD_CHARS`` where a record
is written and where triage reads one (an older folder may hold a 20 MB message), so no field costs
more than a bounded amount of memory; ``printable`` escapes what a terminal would obey (colour and
screen-clearing ``ESC [`` sequences, a ``\\r`` that overwrites the line, other C0 and C1 controls,
bidirectional overrides) as visible ``\\x1b``-style text; and ``fenced``/``code_span`` choose a run of
backticks longer than any in the text, so a message cannot end its code block and write Markdown.
"""
from __future__ import annotations

import re

MAX_FIELD_CHARS = 64 * 1024  # of one free-text field (a message, a traceback's tail), as written and as read
CUT_MARK = "… [cut: {} more characters]"

# C0 controls but tab and newline, DEL, C1 controls, and the bidirectional overrides and isolates that
# reorder what a terminal shows ("Trojan source")
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_CONTROL_OR_NEWLINE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_BACKTICKS = re.compile("`+")


def capped(text: str | None, limit: int = MAX_FIELD_CHARS) -> str | None:
    """``text`` cut to ``limit`` characters, ending in a mark that says how many were cut."""
    if text is None or len(text) <= limit:
        return text
    return text[:limit] + CUT_MARK.format(len(text) - limit)


def _escape(m: re.Match) -> str:
    c = m.group()
    if c == "\r":
        return "\\r"
    return f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}"


def printable(text: str, newlines: bool = True) -> str:
    """``text`` as a terminal shows it literally: every control character but tab (and newline, with
    ``newlines``) written as a visible escape (ESC as ``\\x1b``, a carriage return as ``\\r``; a Windows
    line end stays a newline)."""
    pattern = _CONTROL if newlines else _CONTROL_OR_NEWLINE
    if newlines and "\r\n" in text:
        text = text.replace("\r\n", "\n")
    return pattern.sub(_escape, text) if pattern.search(text) else text


def _ticks(text: str, least: int) -> str:
    return "`" * max(least, 1 + max((len(m) for m in _BACKTICKS.findall(text)), default=0))


def fenced(text: str, lang: str = "") -> str:
    """``text`` as a Markdown code block whose fence is longer than any run of backticks in it, so no
    line of the text can close the block (CommonMark: a closing fence is at least as long)."""
    ticks = _ticks(text, 3)
    return f"{ticks}{lang}\n{text.rstrip()}\n{ticks}"


def code_span(text) -> str:
    """``text`` as inline Markdown code on one line: delimited by more backticks than any run inside it."""
    text = " ".join(str(text).splitlines())
    ticks = _ticks(text, 1)
    pad = " " if text.startswith("`") or text.endswith("`") or (text.startswith(" ") and text.strip()) else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"

"""Error messages reduced to templates, so that one defect is one cluster.

Numbers, shapes, addresses, paths, quoted identifiers and generated names are masked;
the template keeps the words a person would search for.
"""
from __future__ import annotations

import hashlib
import re

_RULES = [
    (re.compile(r"(?:/[\w.@+-]+){2,}/?"), "<path>"),  # /tmp/torchinductor_root/ab/cab12.py
    (re.compile(r"0x[0-9a-fA-F]+"), "<addr>"),
    (re.compile(r"\b[0-9a-f]{12,}\b"), "<hash>"),
    (re.compile(r"(?:torch\.)?Size\(\[[^\]]*\]\)"), "<shape>"),
    (re.compile(r"\[\s*-?\d+(?:\s*,\s*-?\d+)*\s*,?\s*\]"), "<shape>"),
    (re.compile(r"\(\s*-?\d+(?:\s*,\s*-?\d+)+\s*,?\s*\)"), "<shape>"),
    (re.compile(r"\b\d+(?:\s*x\s*\d+)+\b"), "<shape>"),
    (re.compile(r"\b(?:buf|tmp|arg|primals|tangents|getitem|add|mul|view|permute|convolution|"
                r"linear|node|op|var|x|v|t)_?\d+(?:_\d+)*\b"), "<name>"),
    (re.compile(r"'[^'\n]{1,80}'|\"[^\"\n]{1,80}\""), "<str>"),
    (re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?"), "<num>"),
    (re.compile(r"[ \t]+"), " "),
]
_FIRST_LINES = 3


def template(message: str | None) -> str:
    """The first lines of a message with everything incidental masked."""
    if not message:
        return ""
    lines = [ln.strip() for ln in str(message).strip().splitlines() if ln.strip()]
    text = " | ".join(lines[:_FIRST_LINES])[:600]
    for pattern, repl in _RULES:
        text = pattern.sub(repl, text)
    return text.strip()


def signature(stage: str | None, error_type: str | None, message: str | None) -> str:
    return f"{stage or '-'}|{error_type or '-'}|{template(message)}"


def signature_id(*parts: str | None) -> str:
    """A stable short id for a cluster key: same key, same id, in any campaign."""
    return hashlib.sha256("\x1f".join(p or "" for p in parts).encode()).hexdigest()[:10]

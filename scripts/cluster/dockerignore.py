"""The files ``docker build`` sends from a context folder: its ``.dockerignore`` applied as Docker applies it.

Docker's rules (moby/patternmatcher): one pattern a line, ``#`` comments, paths relative to the context
root (a leading ``/`` is dropped), ``*`` and ``?`` within one path element, ``**`` across any number of
them, ``[...]`` classes; a pattern that matches a folder excludes all under it; ``!`` re-includes; the
last pattern that matches a path decides. The Dockerfile and ``.dockerignore`` are sent regardless.
Lets a test check what an image would hold without a Docker daemon.
"""
from __future__ import annotations

import os
import posixpath
import re
from pathlib import Path


def _regex(pattern: str) -> re.Pattern:
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**", i):
            i += 2
            if pattern.startswith("/", i):  # "**/" : zero or more whole folders
                out.append("(?:.*/)?")
                i += 1
            else:
                out.append(".*")
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = pattern.find("]", i + 1)
            if end < 0:
                raise ValueError(f".dockerignore: {pattern!r}: '[' without ']'")
            body = pattern[i + 1:end]
            out.append("[" + ("^" + body[1:] if body.startswith(("!", "^")) else body) + "]")
            i = end
        elif c == "\\" and i + 1 < len(pattern):
            i += 1
            out.append(re.escape(pattern[i]))
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("".join(out) + r"\Z")


def parse(text: str) -> list[tuple[bool, re.Pattern]]:
    """(re-include?, pattern) per rule, in file order."""
    rules = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        line = posixpath.normpath(line[1:].strip() if negate else line).lstrip("/")
        rules.append((negate, _regex(line)))
    return rules


def excluded(rel: str, rules: list[tuple[bool, re.Pattern]]) -> bool:
    parts = rel.split("/")
    prefixes = ["/".join(parts[:n]) for n in range(1, len(parts) + 1)]
    verdict = False
    for negate, rx in rules:
        if any(rx.match(p) for p in prefixes):
            verdict = not negate
    return verdict


def context_files(root: Path, dockerfile: str = "Dockerfile") -> list[str]:
    """Every file (relative, '/'-separated, sorted) that a build of ``root`` with ``dockerfile`` (relative) sends."""
    ignore = root / ".dockerignore"
    rules = parse(ignore.read_text()) if ignore.exists() else []
    prune = not any(negate for negate, _ in rules)  # no re-includes: an excluded folder holds nothing sent
    keep = {".dockerignore", dockerfile}  # sent even when a rule excludes them
    out = []
    for folder, dirs, files in os.walk(root):
        base = Path(folder).relative_to(root).as_posix()
        base = "" if base == "." else base + "/"
        if prune:
            dirs[:] = [d for d in dirs if not excluded(base + d, rules)]
        out += [base + f for f in files if base + f in keep or not excluded(base + f, rules)]
    return sorted(out)

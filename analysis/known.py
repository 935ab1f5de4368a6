"""Known issues: what a cluster already is, read from a YAML file, so triage and ``gapfuzz diff`` tell a
known defect or documented behaviour from a new one.

The findings documents' annotations file is one of these, generalised. Top-level keys:

- a cluster id (``d-32c9476d07: {class, note, same_as}``): that cluster, read by hand;
- ``_known``: a list of issues matched on cluster columns, so that they hold in every campaign,
  whatever the ids: ``{name, class, note, url, reproducer, same_as, where: {column: regular
  expression}}`` (``reproducer``: the folder of a minimised reproducer beside the file); a list
  column (``backends``, ``ops``, ``output_dtypes``) matches when one of its items does, every ``where``
  entry must match (a full match, on the column's text);
- ``_by_message``: a list of ``{name, match, class, note}``, ``match`` searched in the cluster's
  one-line description;
- ``_title``, ``_summary``: text for the findings document.

Nothing in the file is executed: regular expressions are the only patterns, and a bad one, an
unknown column or class is one line naming the file and the entry. Patterns are compiled with the
``regex`` module and matched under a time limit (``MATCH_TIMEOUT_S``): one that backtracks without
end, such as ``(a|aa)+$``, is one line, not a hang.
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import regex

from gapfuzz.core.strict_yaml import YamlError, load, read_file
from gapfuzz.results.store import ResultsError

from .triage import describe

CLASSES = {"defect": "real defect", "documented": "documented behaviour", "tolerance": "artefact of tolerance",
           "reference": "reference (eager) is the less accurate side", "open": "not yet classified",
           "harness": "gapfuzz's own bug", "benign": "no defect (benign difference)",
           "explained": "explained: eager reproduces it under a hypothesis (no hand note)"}
MATCHABLE = ("cluster", "kind", "level", "explanation", "backends", "ops", "output_dtypes", "seed_ids", "families",
             "probes", "status", "stage", "error_type", "failing_op", "template", "verdict", "symptom", "symptoms",
             "first_div_op", "output_dtype", "message")
LISTS = ("backends", "ops", "output_dtypes", "seed_ids", "families", "probes", "symptoms")
_ID = re.compile(r"^[cdb]-[0-9a-f]{10}\Z")
MATCH_TIMEOUT_S = 0.5  # one pattern on one cluster's text; regex checks it coarsely (a few seconds at most)


@dataclass(frozen=True)
class KnownIssue:
    name: str
    klass: str
    note: str = ""
    url: str = ""
    where: dict = field(default_factory=dict)  # column -> compiled pattern
    message: regex.Pattern | None = None  # _by_message: searched in the one-line description
    same_as: str | None = None  # the same defect as that issue or cluster (counted once)
    reproducer: str | None = None  # a reproducer folder's name, beside the file

    @property
    def by_id(self) -> bool:
        return bool(_ID.match(self.name))

    def matches(self, row) -> bool:
        if self.message is not None:
            return bool(self.message.search(describe(row), timeout=MATCH_TIMEOUT_S))
        for column, pattern in self.where.items():
            value = getattr(row, column, None)
            items = list(value) if column in LISTS and value is not None else [value]
            if not any(pattern.fullmatch("" if v is None or v != v else str(v), timeout=MATCH_TIMEOUT_S)
                       for v in items):
                return False
        return True


def _fail(path, what: str):
    raise ResultsError(f"{path}: {what}")


def _near(word, choices) -> str:
    near = difflib.get_close_matches(str(word), list(choices), n=1)
    return f" (did you mean {near[0]!r}?)" if near else ""


def _text_field(path, name: str, entry: dict, key: str, required: bool = False) -> str | None:
    value = entry.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value:
        _fail(path, f"{name}: {key!r} must be " + ("a non-empty string" if value is not None else "given"))
    return value


def _class(path, name: str, entry: dict) -> str:
    klass = entry.get("class", "open")
    if not isinstance(klass, str) or klass not in CLASSES:
        _fail(path, f"{name}: unknown class {klass!r}{_near(klass, CLASSES)}; one of {', '.join(CLASSES)}")
    return klass


def _pattern(path, name: str, text) -> regex.Pattern:
    if not isinstance(text, str) or not text:
        _fail(path, f"{name}: a regular expression (a string) is expected, not {text!r}")
    try:
        return regex.compile(text)
    except (regex.error, re.error, ValueError, OverflowError, RecursionError) as e:
        _fail(path, f"{name}: bad regular expression {text!r}: {' '.join(str(e).split())}")


def _where(path, name: str, where) -> dict:
    if not isinstance(where, dict) or not where:
        _fail(path, f"{name}: 'where' must map cluster columns to regular expressions")
    for column in where:
        if column not in MATCHABLE:
            _fail(path, f"{name}: unknown cluster column {column!r}{_near(column, MATCHABLE)}")
    return {column: _pattern(path, f"{name}: where {column}", text) for column, text in where.items()}


def _issue(path, name: str, entry, **kw) -> KnownIssue:
    if not isinstance(entry, dict):
        _fail(path, f"{name}: a mapping (class, note, ...) is expected, not {type(entry).__name__}")
    return KnownIssue(name, _class(path, name, entry), _text_field(path, name, entry, "note") or "",
                      _text_field(path, name, entry, "url") or "", same_as=_text_field(path, name, entry, "same_as"),
                      **kw)


class KnownIssues:
    """The issues of one file, in the order they are tried: cluster ids, then ``_known``, then ``_by_message``."""

    def __init__(self, issues: list[KnownIssue] = (), text: dict | None = None, path: str = ""):
        self.issues, self.text, self.path = list(issues), dict(text or {}), path
        self.by_id = {i.name: i for i in self.issues if i.by_id}
        self.by_name = {i.name: i for i in self.issues}

    @classmethod
    def load(cls, path: str | Path | None) -> KnownIssues:
        if path is None:
            return cls()
        try:
            given = load(read_file(path, "known-issues file"), str(path)) or {}
        except YamlError as e:
            raise ResultsError(str(e)) from None
        except OSError as e:
            raise ResultsError(f"{path}: cannot read: {e.strerror or e}") from None
        if not isinstance(given, dict):
            _fail(path, "a mapping of cluster ids and _known / _by_message lists is expected")
        issues, text = [], {}
        for key, entry in given.items():
            if key in ("_title", "_summary"):
                if not isinstance(entry, str):
                    _fail(path, f"{key} must be a string")
                text[key] = entry
            elif key in ("_known", "_by_message"):
                if not isinstance(entry, list):
                    _fail(path, f"{key} must be a list of entries, each with a name")
                for i, e in enumerate(entry):
                    name = _text_field(path, f"{key}[{i}]", e if isinstance(e, dict) else {}, "name", required=True)
                    if key == "_known":
                        issues.append(_issue(path, name, e, where=_where(path, name, e.get("where")),
                                             reproducer=_text_field(path, name, e, "reproducer")))
                    else:
                        issues.append(_issue(path, name, e, message=_pattern(path, f"{name}: match", e.get("match"))))
            elif _ID.match(str(key)):
                reproducer = _text_field(path, key, entry, "reproducer") if isinstance(entry, dict) else None
                issues.append(_issue(path, str(key), entry, reproducer=reproducer or str(key)))
            else:
                _fail(path, f"unknown key {key!r}: a cluster id (c-, d- or b- and ten hex digits), _known, "
                            f"_by_message, _title or _summary"
                            f"{_near(key, ['_known', '_by_message', '_title', '_summary'])}")
        names = [i.name for i in issues]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            _fail(path, f"{twice[0]}: named twice; each known issue needs a name of its own")
        ids = [i for i in issues if i.by_id]
        return cls(ids + [i for i in issues if not i.by_id and i.message is None] +
                   [i for i in issues if i.message is not None], text, str(path))

    def match(self, clusters: pd.DataFrame) -> pd.Series:
        """Each cluster's known issue (its name), None where none matches."""
        out = []
        for row in clusters.itertuples(index=False):
            merged = getattr(row, "merged", None)
            merged = merged if isinstance(merged, list) else []
            hit = next((self.by_id[c] for c in [row.cluster, *merged] if c in self.by_id), None) or next(
                (i for i in self.issues if not i.by_id and self._matches(i, row)), None)
            out.append(hit.name if hit else None)
        return pd.Series(out, index=clusters.index, dtype=object)

    def _matches(self, issue: KnownIssue, row) -> bool:
        try:
            return issue.matches(row)
        except TimeoutError:
            _fail(self.path, f"{issue.name}: a regular expression took more than {MATCH_TIMEOUT_S:g} s on cluster "
                             f"{row.cluster} (it backtracks without end); write it without nested repeats")

    def __getitem__(self, name: str) -> KnownIssue:
        return self.by_name[name]

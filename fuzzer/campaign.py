"""Campaign files: load, validate before any work starts, fill defaults, resolve names.

Every problem is one line naming the file and the key or value, e.g.
``campaigns/x.yaml: unknown key 'sedes' at the top level (did you mean 'seeds'?)``.
"""
from __future__ import annotations

import copy
import difflib
import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import jsonschema
import yaml

from workers.registry import BackendError, BackendSpec, parse_backend

from .campaign_schema import DEFAULTS, POOL_DEFAULTS, SCHEMA, SELECTION_DEFAULTS


class CampaignError(ValueError):
    """A campaign file that cannot be run; the message is one line."""


def default_campaign_path() -> Path:
    return Path(str(resources.files("fuzzer") / "campaigns" / "default.yaml"))


def _where(path) -> str:
    parts = [f"[{p}]" if isinstance(p, int) else f".{p}" for p in path]
    return "".join(parts).lstrip(".") or "the top level"


def _schema_error(source: str, err: jsonschema.ValidationError) -> str:
    where = _where(err.absolute_path)
    if err.validator == "additionalProperties":
        allowed = sorted(err.schema.get("properties", {}))
        extra = sorted(set(err.instance) - set(allowed))
        key = extra[0] if extra else "?"
        hint = difflib.get_close_matches(key, allowed, n=1)
        did = f" (did you mean '{hint[0]}'?)" if hint else f" (known: {', '.join(allowed)})"
        return f"{source}: unknown key '{key}' at {where}{did}"
    if err.validator == "required":
        return f"{source}: {where}: {err.message}"
    if err.validator in ("type", "oneOf") and err.context:
        types = sorted({c.schema.get("type") if isinstance(c.schema.get("type"), str) else "value"
                        for c in err.context})
        return f"{source}: {where}: expected {' or '.join(types)}, got {err.instance!r}"
    return f"{source}: {where}: {err.message}"


def _merge(defaults: dict, given: dict) -> dict:
    out = copy.deepcopy(defaults)
    for k, v in given.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) and k != "options" else v
    return out


def first_difference(a, b, where: str = "") -> str | None:
    """The first dotted key at which two resolved configs differ, None when they are the same."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in [*a, *(k for k in b if k not in a)]:
            found = first_difference(a.get(k), b.get(k), f"{where}.{k}" if where else str(k))
            if found:
                return found
        return None
    return None if a == b else (where or "(the whole file)")


def _as_list(v) -> list:
    return [v] if isinstance(v, str) else list(v or [])


def backend_spec(entry, source: str, where: str) -> BackendSpec:
    try:
        if isinstance(entry, str):
            return parse_backend(entry)
        if "class" in entry:
            device = entry.get("device", "cpu")
            return parse_backend(f"x@{device}", entry.get("options"), entry.get("label"), entry["class"],
                                 entry.get("timeout_s"))
        if "backend" not in entry:
            raise BackendError("a backend entry needs 'backend: stack@device' or 'class: module:Class'")
        return parse_backend(entry["backend"], entry.get("options"), entry.get("label"), None, entry.get("timeout_s"))
    except BackendError as e:
        raise CampaignError(f"{source}: {where}: {e}") from None


@dataclass
class Campaign:
    """A validated campaign with every default filled in (``config``) and resolved backends."""

    config: dict
    source: str

    @property
    def name(self) -> str:
        return self.config["name"]

    @property
    def reference(self) -> BackendSpec:
        return backend_spec(self.config["backends"]["reference"], self.source, "backends.reference")

    @property
    def oracle(self) -> BackendSpec | None:
        o = self.config["backends"]["oracle"]
        return None if o is None else backend_spec(o, self.source, "backends.oracle")

    @property
    def targets(self) -> list[BackendSpec]:
        return [backend_spec(t, self.source, f"backends.targets[{i}]")
                for i, t in enumerate(self.config["backends"]["targets"])]

    def backends(self) -> list[BackendSpec]:
        """Reference first, then the oracle, then the targets; duplicates dropped."""
        out, seen = [], set()
        for spec in [self.reference, self.oracle, *self.targets]:
            if spec is not None and spec.name not in seen:
                seen.add(spec.name)
                out.append(spec)
        return out

    def pool(self, device: str) -> dict:
        given = self.config["pools"].get(device, {})
        base = dict(POOL_DEFAULTS, workers=max(1, os.cpu_count() or 1) if device == "cpu" else 1)
        return {**base, **given}

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.config, sort_keys=False)


def load_campaign(path: str | Path | None = None, overrides: dict | None = None) -> Campaign:
    """Read and check a campaign file (the embedded default when ``path`` is None)."""
    p = Path(path) if path is not None else default_campaign_path()
    source = str(path) if path is not None else "default campaign"
    try:
        text = p.read_text()
    except OSError as e:
        raise CampaignError(f"{p}: cannot read campaign file: {e.strerror}") from None
    try:
        given = yaml.safe_load(text) or {}
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark else ""
        raise CampaignError(f"{source}: not valid YAML{at}: {getattr(e, 'problem', e)}") from None
    if not isinstance(given, dict):
        raise CampaignError(f"{source}: a campaign file is a mapping of keys, got {type(given).__name__}")
    return from_dict(_merge(given, overrides or {}), source, p.stem)


def from_dict(given: dict, source: str = "campaign", default_name: str = "campaign") -> Campaign:
    errors = sorted(jsonschema.Draft202012Validator(SCHEMA).iter_errors(given), key=lambda e: e.path)
    if errors:
        raise CampaignError(_schema_error(source, jsonschema.exceptions.best_match(errors)))
    config = _merge(dict(DEFAULTS, name=default_name), given)
    config["seeds"] = [dict(SELECTION_DEFAULTS, **s) for s in config.get("seeds") or []]
    if not config["seeds"]:
        raise CampaignError(f"{source}: seeds: at least one seed selection is needed")
    for key in ("mutators", "exclude_mutators"):
        config["variants"][key] = _as_list(config["variants"][key])
    for s in config["seeds"]:
        s["include"], s["exclude"] = _as_list(s["include"]), _as_list(s["exclude"])
    campaign = Campaign(config, source)
    _check_names(campaign)
    return campaign


def _check_names(c: Campaign) -> None:
    from seeds import source_names

    known = source_names()
    for i, s in enumerate(c.config["seeds"]):
        if s["source"] not in known:
            hint = difflib.get_close_matches(s["source"], known, n=1)
            did = f" (did you mean '{hint[0]}'?)" if hint else f" (known: {', '.join(known)})"
            raise CampaignError(f"{c.source}: seeds[{i}].source: unknown seed source '{s['source']}'{did}")
    c.backends()  # parses every entry: one line for the first bad name
    if not c.targets:
        raise CampaignError(f"{c.source}: backends.targets: name at least one target backend")
    if c.oracle is not None and c.oracle.device != c.reference.device:
        raise CampaignError(f"{c.source}: backends.oracle: the oracle must run on the reference's device "
                            f"({c.reference.device})")
    labels = [s.name for s in [c.reference, c.oracle, *c.targets] if s is not None]
    dup = {n for n in labels if labels.count(n) > 1 and n not in (c.reference.name, getattr(c.oracle, "name", None))}
    if dup:
        raise CampaignError(f"{c.source}: backends: {sorted(dup)[0]} is named twice; give one a 'label'")
    from .mutators import MutatorError, resolve_mutators

    try:
        resolve_mutators(c.config["variants"]["mutators"], c.config["variants"]["exclude_mutators"])
    except MutatorError as e:
        raise CampaignError(f"{c.source}: variants.mutators: {e}") from None

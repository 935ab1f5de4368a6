"""The campaign file's JSON Schema and its defaults, derived from its one definition
(``fuzzer.config.settings.CampaignFile``); ``gapfuzz schema`` prints the schema for editors."""
from __future__ import annotations

import json

from gapfuzz.core.setting import bounded, defaults_of, schema_of
from gapfuzz.fuzzer.config.settings import NAME_MAX, NAME_PATTERN, NAME_RULE, CampaignFile, PoolSection, SeedSelection

__all__ = ["DEFAULTS", "NAME_MAX", "NAME_PATTERN", "NAME_RULE", "OPERATIONAL_KEYS", "POOL_DEFAULTS", "SCHEMA",
           "SELECTION_DEFAULTS", "json_schema"]

SCHEMA = bounded(schema_of(CampaignFile))  # every number with a maximum (core.setting)
DEFAULTS = defaults_of(CampaignFile)
POOL_DEFAULTS = defaults_of(PoolSection)
SELECTION_DEFAULTS = defaults_of(SeedSelection)

# Keys that say how a campaign runs, not what it finds: a resume may change them (a bigger cluster,
# another address, another flush size) and keep the records it continues.
OPERATIONAL_KEYS = ("description", "output", "pools", "ray", "run.flush_every", "run.budget_s")


def json_schema() -> dict:
    """The schema as a document an editor reads (a YAML language server's ``# yaml-language-server:
    $schema=...``): the draft it follows, a title, each key's description and default, and patterns in
    the ECMA-262 syntax JSON Schema uses (``$`` for Python's ``\\Z``: a JavaScript ``$`` ends the text)."""
    text = json.dumps(bounded(schema_of(CampaignFile, documented=True))).replace('\\\\Z"', '$"')
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "gapfuzz campaign",
            "description": "A gapfuzz campaign file (gapfuzz run FILE --check validates one)", **json.loads(text)}

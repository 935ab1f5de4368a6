"""Each campaign setting is defined once (``fuzzer.config.settings``, ``workers.run.messages``): the schema, the
defaults and the workers' settings follow from that definition."""
from __future__ import annotations

import dataclasses

import pytest

from gapfuzz.core.setting import NO_DEFAULT, build, defaults_of, schema_of, setting
from gapfuzz.fuzzer.config.campaign import from_dict
from gapfuzz.fuzzer.config.schema import DEFAULTS, SCHEMA
from gapfuzz.fuzzer.config.settings import CompareSettings, RunSettings
from gapfuzz.workers.run.messages import JudgeCompare, JudgeRun, JudgeSettings
from tests.helpers.judging import judge_settings

BASE = {"seeds": [{"source": "timm", "include": ["test_resnet"]}], "backends": {"targets": ["inductor@cpu"]}}


def test_every_key_has_one_default_and_one_schema():
    for section, props in SCHEMA["properties"].items():
        assert section in DEFAULTS or section == "seeds"
        if props.get("type") == "object" and section != "pools":
            assert set(props["properties"]) == set(DEFAULTS[section]), section
    assert DEFAULTS["compare"]["bisect_budget_s"] == 900 and DEFAULTS["run"]["timeout_s"] == 300


def test_a_key_added_to_the_definition_reaches_schema_defaults_and_the_built_section():
    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Run(RunSettings):
        foo_s: float = setting(5, "a new key", exclusiveMinimum=0)

    assert schema_of(Run)["properties"]["foo_s"] == {"type": "number", "exclusiveMinimum": 0}
    assert defaults_of(Run)["foo_s"] == 5
    assert build(Run, {**defaults_of(Run), "foo_s": 7}).foo_s == 7


def test_the_workers_settings_have_no_defaults():
    assert all(f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
               for f in dataclasses.fields(JudgeSettings))
    with pytest.raises(TypeError):
        JudgeSettings(reference="eager@cpu")  # a field left out is an error, not a default
    with pytest.raises(dataclasses.FrozenInstanceError):
        judge_settings("eager@cpu").bisect = False
    for f in (*dataclasses.fields(JudgeRun), *dataclasses.fields(JudgeCompare)):
        assert f.metadata["default"] is not NO_DEFAULT  # the file's default, held once in the definition


def test_the_workers_settings_are_the_campaigns_keys():
    c = from_dict({**BASE, "run": {"timeout_s": 7, "repeats": 2}, "compare": {"bisect_budget_s": 5, "explain": False,
                                                                              "multiplier": 4.0}})
    s = c.judge_settings("eager@cpu", None, ledger=None, device_references={})
    assert (s.timeout_s, s.repeats, s.retry_faults) == (7, 2, True)
    assert (s.bisect_budget_s, s.explain, s.bisect, s.align) == (5, False, True, True)
    assert s.compare.multiplier == 4.0 and s.probes == c.probes
    for f in (*dataclasses.fields(JudgeRun), *dataclasses.fields(JudgeCompare)):
        section = c.run if f.name in RunSettings.__dataclass_fields__ else c.compare
        assert getattr(s, f.name) == getattr(section, f.name), f.name
    assert isinstance(c.compare, CompareSettings) and c.judge_settings(
        "eager@cpu", None, ledger=None, device_references={}, bisect=False).bisect is False

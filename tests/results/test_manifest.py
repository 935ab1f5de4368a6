"""run.json: the driver's resolved backend names and tolerances, which analysis reads; a folder
written before it still reads through its campaign.yaml."""
from __future__ import annotations

import json

import pytest

from gapfuzz.analysis.api import load_run
from gapfuzz.core.bugs import DEFAULT_ORACLE, DEFAULT_REFERENCE, Status, Verdict
from gapfuzz.fuzzer.config.campaign import from_dict, manifest_of
from gapfuzz.fuzzer.config.pools import Pools
from gapfuzz.results.folder import Folder, ResultsError
from gapfuzz.results.manifest import RunManifest
from gapfuzz.results.schema import SCHEMA_VERSION, RunRecord
from gapfuzz.results.store import RecordStore

CAMPAIGN = {"name": "m", "seeds": [{"source": "timm", "include": ["test_resnet"]}],
            "backends": {"reference": {"backend": "eager@cpu", "label": "ref"}, "oracle": "eager-fp64@cpu",
                         "targets": ["inductor@cpu"]},
            "compare": {"tolerances": {"float32": [1e-4, 1e-5]}}}


def _records(folder, reference: str, oracle: str | None = None) -> None:
    """A run's records without a run: the reference's, the oracle's and one target's, of one variant."""
    rows = [RunRecord(campaign="m", variant_id="timm/x#0", seed_id="timm/x", backend=reference, stack="plug",
                      status=Status.OK),
            RunRecord(campaign="m", variant_id="timm/x#0", seed_id="timm/x", backend="inductor@cpu", stack="inductor",
                      status=Status.OK, verdict=Verdict.AGREE)]
    if oracle:
        rows.append(RunRecord(campaign="m", variant_id="timm/x#0", seed_id="timm/x", backend=oracle,
                              stack="eager-fp64", status=Status.OK, verdict=Verdict.ORACLE))
    RecordStore(folder).write(rows)


def test_a_manifest_holds_the_resolved_names_and_tolerances_and_round_trips(tmp_path):
    c = from_dict(CAMPAIGN, "m.yaml")
    m = manifest_of(c)
    assert (m.campaign, m.reference, m.oracle, m.targets) == ("m", "ref@cpu", "eager-fp64@cpu", ["inductor@cpu"])
    assert m.backends["ref@cpu"] == {"stack": "eager", "device": "cpu", "options": {}, "option_space": {},
                                     "modes": ["inference"], "class": None}
    assert m.compare["tolerances"]["float32"] == [1e-4, 1e-5] and m.compare["sweep"] == list(c.compare.sweep)
    assert m.compare["multiplier"] == c.compare.settings.multiplier and m.modes == ["inference"]
    assert m.schema_version == SCHEMA_VERSION and Pools(c).manifest() == m
    m.write(Folder(tmp_path))
    assert m.written and RunManifest.read(Folder(tmp_path)) == m
    assert set(json.loads((tmp_path / "run.json").read_text())) == {
        "campaign", "reference", "oracle", "targets", "backends", "compare", "modes", "schema_version", "version",
        "written"}


def test_a_folder_without_a_manifest_has_none(tmp_path):
    assert RunManifest.read(Folder(tmp_path)) is None


GOOD = json.loads(manifest_of(from_dict(CAMPAIGN, "m.yaml")).to_json())


MALFORMED = [
    ("[1, 2]", "a JSON object is expected"), ("{", "not JSON"), ("[" * 100_000, "nested too deep"),
    ('{"campaign": 1}', "missing 'reference'"),
    (json.dumps({**GOOD, "campaign": 1}), "campaign has the wrong type"),
    (json.dumps({**GOOD, "exec": "x"}), "unknown key 'exec'"),
    (json.dumps({k: v for k, v in GOOD.items() if k != "reference"}), "missing 'reference'"),
    (json.dumps({**GOOD, "version": True}), "version has the wrong type"),
    (json.dumps({**GOOD, "version": 99}), "version 99 is newer"),
    (json.dumps({**GOOD, "targets": [1]}), "targets: a list of names"),
    (json.dumps({**GOOD, "oracle": "nowhere@cpu"}), "nowhere@cpu is not one of its backends"),
    (json.dumps({**GOOD, "backends": {**GOOD["backends"], "ref@cpu": "eager"}}), r"backends\.ref@cpu: \{stack"),
    (json.dumps({**GOOD, "backends": {**GOOD["backends"], "ref@cpu": {"stack": "eager", "device": "cpu",
                                                                        "options": {}, "class": 3}}}), "ref@cpu: {"),
    (json.dumps(GOOD).replace('"far": 1000.0', '"far": NaN'), "NaN is not a JSON number"),
    ('{"campaign": "' + "x" * (2 << 20) + '"}', "more than"),
]


@pytest.mark.parametrize("text, problem", MALFORMED, ids=[problem for _, problem in MALFORMED])
def test_a_malformed_manifest_is_one_line_naming_the_file(tmp_path, text, problem):
    (tmp_path / "run.json").write_text(text)
    with pytest.raises(ResultsError, match=problem) as e:
        RunManifest.read(Folder(tmp_path))
    assert "run.json" in str(e.value) and "\n" not in str(e.value)


def test_analysis_takes_the_reference_and_oracle_from_the_manifest(tmp_path):
    _records(tmp_path, "ref@cpu", "eager-fp64@cpu")
    m = manifest_of(from_dict(CAMPAIGN, "m.yaml"))
    m.write(Folder(tmp_path))
    (tmp_path / "campaign.yaml").write_text("backends: {reference: other@cpu, oracle: null}\n")  # run.json wins
    run = load_run(str(tmp_path))
    assert (run.name, run.reference, run.oracle, run.manifest) == ("m", "ref@cpu", "eager-fp64@cpu", m)
    no_oracle = from_dict({**CAMPAIGN, "backends": {**CAMPAIGN["backends"], "oracle": None}}, "m.yaml")
    manifest_of(no_oracle).write(Folder(tmp_path))
    assert load_run(str(tmp_path)).oracle is None


@pytest.mark.parametrize("backends, reference, oracle", [
    ("{reference: {backend: eager@cpu, label: ref}}", "ref@cpu", DEFAULT_ORACLE),
    ("{reference: ref@cpu, oracle: null}", "ref@cpu", None),
    ("{reference: {class: 'my.mod:Plug'}, oracle: {class: 'my.mod:Oracle'}}", "plug@cpu", "fp64plug@cpu"),
])
def test_an_old_folder_without_a_manifest_reads_its_campaign_file(tmp_path, backends, reference, oracle):
    """An unlabelled plug-in class is named by its records (importing it would tell, but a folder is data)."""
    _records(tmp_path, reference, oracle)
    (tmp_path / "campaign.yaml").write_text(f"name: old\nbackends: {backends}\n")
    run = load_run(str(tmp_path))
    assert (run.name, run.reference, run.oracle, run.manifest) == ("old", reference, oracle, None)


def test_an_old_folder_with_no_campaign_file_takes_the_defaults(tmp_path):
    _records(tmp_path, DEFAULT_REFERENCE, DEFAULT_ORACLE)
    run = load_run(str(tmp_path))
    assert (run.name, run.reference, run.oracle) == (tmp_path.name, DEFAULT_REFERENCE, DEFAULT_ORACLE)


def test_gapfuzz_run_writes_the_manifest_beside_the_campaign(tmp_path, monkeypatch):
    import yaml

    from gapfuzz.fuzzer.cli import main as cli
    from gapfuzz.fuzzer.driver import Driver

    def interrupted(self, seed_ids=None, sized=False):
        raise KeyboardInterrupt

    monkeypatch.setenv("GAPFUZZ_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(Driver, "run", interrupted)
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(CAMPAIGN))
    assert cli.main(["run", str(tmp_path / "c.yaml"), "--out", str(tmp_path / "run"), "--quiet"]) == 130
    m = RunManifest.read(Folder(tmp_path / "run"))
    assert (m.campaign, m.reference, m.oracle, m.targets) == ("m", "ref@cpu", "eager-fp64@cpu", ["inductor@cpu"])

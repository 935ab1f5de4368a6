"""run.json: the driver's resolved backend names and tolerances, which analysis reads."""
from __future__ import annotations

import json

import pytest

from analysis.api import load_run
from fuzzer.campaign import from_dict
from fuzzer.pools import Pools
from results.folder import Folder, ResultsError
from results.manifest import RunManifest
from results.schema import RunRecord
from results.store import RecordStore

CAMPAIGN = {"name": "m", "seeds": [{"source": "timm", "include": ["test_resnet"]}],
            "backends": {"reference": {"backend": "eager@cpu", "label": "ref"}, "oracle": "eager-fp64@cpu",
                         "targets": ["inductor@cpu"]},
            "compare": {"tolerances": {"float32": [1e-4, 1e-5]}}}


def _records(folder, reference: str) -> None:
    RecordStore(folder).write([RunRecord(campaign="m", variant_id="timm/x#0", seed_id="timm/x", backend=b, stack=b[:-4])
                               for b in (reference, "inductor@cpu")])


def test_a_manifest_holds_the_resolved_names_and_tolerances_and_reads_back(tmp_path):
    m = Pools(from_dict(CAMPAIGN, "m.yaml")).manifest()
    assert (m.reference, m.oracle, m.targets) == ("ref@cpu", "eager-fp64@cpu", ["inductor@cpu"])
    assert m.backends["ref@cpu"]["stack"] == "eager" and m.compare["tolerances"]["float32"] == (1e-4, 1e-5)
    m.write(Folder(tmp_path))
    back = RunManifest.read(Folder(tmp_path))
    assert back.reference == "ref@cpu" and back.compare["tolerances"]["float32"] == [1e-4, 1e-5]


def test_analysis_takes_the_reference_from_the_manifest_and_an_old_folder_from_its_campaign(tmp_path):
    new, old = tmp_path / "new", tmp_path / "old"
    for folder in (new, old):
        _records(folder, "ref@cpu")
    Pools(from_dict(CAMPAIGN, "m.yaml")).manifest().write(Folder(new))
    assert load_run(str(new)).reference == "ref@cpu"
    (old / "campaign.yaml").write_text("backends: {reference: {backend: eager@cpu, label: ref}}\n")
    assert load_run(str(old)).reference == "ref@cpu"


@pytest.mark.parametrize("text, problem", [("[1, 2]", "a JSON object"), ("{", "not JSON"),
                                           ('{"campaign": 1}', "campaign has the wrong type"),
                                           ('{"campaign": "m", "exec": "x"}', "unknown key 'exec'")])
def test_a_malformed_manifest_is_one_line_naming_the_file(tmp_path, text, problem):
    (tmp_path / "run.json").write_text(text)
    with pytest.raises(ResultsError, match=problem) as e:
        RunManifest.read(Folder(tmp_path))
    assert "run.json" in str(e.value) and "\n" not in str(e.value)


def test_a_manifest_is_data(tmp_path):
    m = Pools(from_dict(CAMPAIGN, "m.yaml")).manifest()
    m.write(Folder(tmp_path))
    assert set(json.loads((tmp_path / "run.json").read_text())) == {
        "campaign", "reference", "oracle", "targets", "backends", "compare", "modes", "version", "written"}

"""Campaign files are checked before any work starts; each problem is one line naming it."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gapfuzz.fuzzer.config.campaign import CampaignError, first_difference, from_dict, load_campaign
from gapfuzz.fuzzer.config.plan import select_seeds
from tests.conftest import gapfuzz

BASE = {"seeds": [{"source": "timm", "include": ["test_resnet"]}], "backends": {"targets": ["inductor@cpu"]}}


def test_default_campaign_resolves_with_defaults():
    c = load_campaign()
    assert c.name == "default"
    assert c.reference.name == "eager@cpu" and c.oracle.name == "eager-fp64@cpu"
    assert [t.name for t in c.backends.targets] == ["inductor@cpu", "onnxruntime@cpu", "openvino@cpu"]
    assert c.capture.max_params == 100_000_000 and c.variants.per_seed == 5 and "inject_op" in c.variants.mutators
    assert len(select_seeds(c)) == 4


@pytest.mark.parametrize("patch, needle", [
    ({"sedes": []}, "unknown key 'sedes' at the top level (did you mean 'seeds'?)"),
    ({"variants": {"per_sed": 2}}, "unknown key 'per_sed' at variants"),
    ({"variants": {"per_seed": "three"}}, "variants.per_seed"),
    ({"seeds": [{"source": "timmm"}]}, "unknown seed source 'timmm'"),
    ({"backends": {"targets": ["inductr@cpu"]}}, "unknown backend stack 'inductr'"),
    ({"backends": {"targets": ["inductor@gpu"]}}, "unknown device 'gpu'"),
    ({"backends": {"targets": ["inductor"]}}, "not of the form stack@device"),
    ({"backends": {"targets": [{"class": "no.such.module:Backend"}]}}, "cannot be loaded"),
    ({"variants": {"mutators": ["no_such_mutator"]}}, "no mutator matches 'no_such_mutator'"),
    ({"pools": {"cuda": {"gpus_per_worker": 2}}}, "pools.cuda.gpus_per_worker"),
])
def test_bad_campaign_is_one_line_naming_the_problem(patch, needle):
    with pytest.raises(CampaignError) as e:
        from_dict({**BASE, **patch}, "c.yaml")
    msg = str(e.value)
    assert needle in msg and "\n" not in msg and msg.startswith("c.yaml")


def test_cuda_workers_share_a_gpu_by_fraction():
    from gapfuzz.workers.run.pool import PoolSettings

    c = from_dict({**BASE, "pools": {"cuda": {"workers": 3, "gpus_per_worker": 0.33}}}, "c.yaml")
    assert c.pool("cuda").gpus_per_worker == 0.33 and c.pool("cpu").gpus_per_worker == 1
    assert PoolSettings(device="cuda", gpus_per_worker=0.33).actor_options()["num_gpus"] == 0.33
    assert "num_gpus" not in PoolSettings(device="cpu", gpus_per_worker=0.33).actor_options()


def test_cli_rejects_misspelled_key_and_writes_nothing(tmp_path, write_campaign):
    path = write_campaign("name: x\nsedes:\n  - source: timm\nbackends:\n  targets: [inductor@cpu]\n")
    proc = gapfuzz("run", path, cwd=tmp_path)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "'sedes'" in lines[0]
    assert not (tmp_path / "runs").exists()


def test_cli_rejects_selection_matching_nothing_and_writes_nothing(tmp_path, write_campaign):
    path = write_campaign("name: x\nseeds:\n  - {source: timm, include: 'nothing*'}\n"
                          "backends:\n  targets: [inductor@cpu]\n")
    proc = gapfuzz("run", path, cwd=tmp_path)
    assert proc.returncode == 2 and "no timm seed matches" in proc.stderr
    assert not (tmp_path / "runs").exists()


def test_selection_by_source_glob_include_exclude_sample_and_limit():
    sel = {"seeds": [{"source": "timm", "include": ["test_*"], "exclude": ["*vit*"]},
                     {"source": "torchvision", "include": "resnet*", "sample": 2},
                     {"source": "timm", "include": "resnet*", "limit": 3}],
           "backends": {"targets": ["inductor@cpu"]}}
    ids = select_seeds(from_dict(sel))
    timm_test = [i for i in ids if i.startswith("timm/test_")]
    assert timm_test and not any("vit" in i for i in timm_test)
    assert len([i for i in ids if i.startswith("tv/")]) == 2
    assert len([i for i in ids if i.startswith("timm/resnet")]) == 3
    assert ids == select_seeds(from_dict(sel))  # the sample is fixed by the campaign seed


def test_unavailable_targets_are_an_error_unless_skipped(tmp_path):
    import torch

    from gapfuzz.fuzzer.driver import Driver

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: nothing is unavailable to show")
    given = {**BASE, "backends": {"targets": ["eager@cuda", "inductor@cpu"]}}
    with pytest.raises(CampaignError, match="eager@cuda is not available here: no CUDA"):
        Driver(from_dict(given, "c.yaml"), tmp_path).check_available()
    given["backends"]["skip_unavailable"] = True
    d = Driver(from_dict(given, "c.yaml"), tmp_path)
    d.check_available()
    assert "eager@cuda" not in d.pools.specs and "inductor@cpu" in d.pools.specs and d.pools.names == ["cpu"]
    only_cuda = {**BASE, "backends": {"targets": ["eager@cuda"], "skip_unavailable": True}}
    with pytest.raises(CampaignError, match="no target backend is available"):
        Driver(from_dict(only_cuda, "c.yaml"), tmp_path).check_available()


def test_resume_accepts_keys_added_since_and_names_a_changed_one(tmp_path, write_campaign):
    text = ("name: r\nseeds: [{source: timm, include: [test_resnet]}]\nvariants: {per_seed: 2}\n"
            "backends: {targets: [eager@cpu]}\n")
    older = yaml.safe_load(load_campaign(write_campaign(text)).to_yaml())
    del older["compare"]["align_scope"]  # written before that key existed
    assert first_difference(from_dict(older).config, load_campaign(write_campaign(text)).config) is None
    run = tmp_path / "runs" / "r"
    run.mkdir(parents=True)
    (run / "campaign.yaml").write_text(yaml.safe_dump(older, sort_keys=False))
    changed = write_campaign(text.replace("per_seed: 2", "per_seed: 3"))
    proc = gapfuzz("run", changed, "--out", run, "--resume", cwd=tmp_path)
    assert proc.returncode == 2 and "variants.per_seed differs from the campaign in" in proc.stderr
    assert sorted(p.name for p in run.iterdir()) == ["campaign.yaml"]


def test_a_selection_can_keep_only_the_seeds_that_ran_in_a_catalog(tmp_path):
    from gapfuzz.results.catalog import Catalog, CatalogRow

    Catalog(tmp_path / "scan").write([CatalogRow(seed_id="timm/test_resnet", source="timm"),
                                      CatalogRow(seed_id="timm/test_vit", source="timm", status="error",
                                                 stage="capture")])
    sel = {"source": "timm", "include": ["test_resnet", "test_vit", "test_convnext"], "catalog": str(tmp_path / "scan")}
    assert select_seeds(from_dict({**BASE, "seeds": [sel]})) == ["timm/test_resnet"]
    with pytest.raises(CampaignError, match=r"seeds\[0\].catalog: .*empty holds no seed catalog"):
        select_seeds(from_dict({**BASE, "seeds": [{**sel, "catalog": str(tmp_path / "empty")}]}))
    with pytest.raises(CampaignError, match="none of the 1 timm seeds selected ran in the catalog"):
        select_seeds(from_dict({**BASE, "seeds": [{**sel, "include": ["test_vit"]}]}))


def test_run_check_prints_the_plan_and_writes_nothing(tmp_path, write_campaign):
    """``run FILE --check`` validates the file and prints what it would run: seeds, variants, and the pairs
    and runs per backend and mode; no run folder, no Ray. With no file: the default campaign."""
    repo = Path(__file__).resolve().parents[2]
    for args in ([repo / "campaigns" / "default.yaml"], []):
        proc = gapfuzz("run", *args, "--check", cwd=tmp_path, check=True)
        out = proc.stdout.splitlines()
        assert "valid" in out[0] and out[1].startswith("seeds: 4 (4 selected"), proc.stdout
        assert any(line.startswith("variants in inference: 20") for line in out), proc.stdout
        rows = {line.split()[0]: line.split()[1:] for line in out if "@cpu" in line}
        assert set(rows) == {"eager@cpu", "eager-fp64@cpu", "inductor@cpu", "onnxruntime@cpu", "openvino@cpu"}
        assert rows["inductor@cpu"] == ["inference", "20", "160"]  # 20 variants, 8 probes each
        assert next(line for line in out if line.startswith("total")).split()[1:] == ["100", "800"]
        assert out[-1].startswith("estimated wall time: about ") and "of 100 pairs timed" in out[-1], proc.stdout
    assert list(tmp_path.iterdir()) == []  # no run folder, no Ray session folder
    bad = write_campaign("name: x\nsedes:\n  - source: timm\nbackends:\n  targets: [inductor@cpu]\n")
    proc = gapfuzz("run", bad, "--check", cwd=tmp_path)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1 and "'sedes'" in proc.stderr
    assert not (tmp_path / "runs").exists()


def test_schema_command_prints_a_json_schema_every_shipped_campaign_meets(tmp_path):
    import json

    import jsonschema

    schema = json.loads(gapfuzz("schema", cwd=tmp_path, check=True).stdout)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["properties"]["compare"]["properties"]["bisect_budget_s"]["default"] == 900
    repo = Path(__file__).resolve().parents[2]
    for path in sorted((repo / "campaigns").glob("*.yaml")):
        assert not list(jsonschema.Draft202012Validator(schema).iter_errors(yaml.safe_load(path.read_text()))), path
    assert list(jsonschema.Draft202012Validator(schema).iter_errors({"sedes": []}))

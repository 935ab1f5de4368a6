"""The cluster launch files are valid and give every pool the Ray resources it asks for.

The cluster-launcher YAML is checked by Ray's own validator (its ``ray-schema.json``), the RayJob
manifest by a JSON Schema of the KubeRay ``ray.io/v1`` fields it uses (``rayjob_schema``), and both
against ``PoolSettings.resources_needed``, the one place a pool's resource names are defined.
"""
from __future__ import annotations

import copy
import json
import shlex
from pathlib import Path

import jsonschema
import pytest
import yaml

from gapfuzz.fuzzer.config.campaign import load_campaign
from gapfuzz.workers.run.pool import PoolSettings

from .rayjob_schema import RAYJOB

ROOT = Path(__file__).resolve().parent.parent
LAUNCHER = ROOT / "scripts" / "cluster" / "ray-cluster-aws.yaml"
RAYJOB_FILE = ROOT / "scripts" / "cluster" / "rayjob.yaml"


def _needed(device: str) -> set[str]:
    return {k for k, v in PoolSettings(device=device).resources_needed().items() if v}


def _launcher_config() -> dict:
    from ray.autoscaler._private.util import prepare_config

    return prepare_config(yaml.safe_load(LAUNCHER.read_text()))


def test_launcher_yaml_passes_rays_validator():
    from ray.autoscaler._private.util import validate_config

    config = _launcher_config()
    validate_config(config)
    broken = copy.deepcopy(config)
    broken["available_node_types"]["cuda"]["resource"] = {"GPU": 1}  # a typo Ray must refuse
    with pytest.raises(jsonschema.ValidationError):
        validate_config(broken)


def test_launcher_node_types_carry_the_pools_resources():
    types = _launcher_config()["available_node_types"]
    for device in ("cpu", "cuda"):
        assert any(_needed(device) <= set(t["resources"]) for name, t in types.items() if name != "head"), device
    assert types["cuda"]["resources"]["GPU"] >= 1


def _group_resources(group: dict) -> set[str]:
    """The Ray resources a KubeRay group's nodes advertise, from its rayStartParams and container limits."""
    params = group.get("rayStartParams", {})
    out = {"CPU"} if params.get("num-cpus", "1") != "0" else set()
    if int(params.get("num-gpus", "0")) > 0:
        out.add("GPU")
    if "resources" in params:  # KubeRay's form: a JSON object inside a quoted string
        out |= set(json.loads(json.loads(params["resources"])))
    return out


def _rayjob() -> dict:
    return yaml.safe_load(RAYJOB_FILE.read_text())


def test_rayjob_manifest_is_schema_valid():
    job = _rayjob()
    jsonschema.validate(job, RAYJOB)
    broken = copy.deepcopy(job)
    broken["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["replica"] = 2
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, RAYJOB)


def test_rayjob_groups_carry_every_pools_resources():
    groups = {g["groupName"]: g for g in _rayjob()["spec"]["rayClusterSpec"]["workerGroupSpecs"]}
    for device in ("cpu", "cuda", "xpu", "npu"):
        assert any(_needed(device) <= _group_resources(g) for g in groups.values()), device
    assert "nvidia.com/gpu" in groups["cuda"]["template"]["spec"]["containers"][0]["resources"]["limits"]


def test_rayjob_runs_the_cluster_campaign():
    words = shlex.split(_rayjob()["spec"]["entrypoint"])
    assert words[:2] == ["gapfuzz", "run"] and "--address" in words
    campaign = load_campaign(ROOT / words[2])
    devices = {spec.device for spec in campaign.backends.all()}
    groups = _rayjob()["spec"]["rayClusterSpec"]["workerGroupSpecs"]
    for device in devices:
        pool = campaign.pool(device)
        assert pool.workers == "auto", device  # each pool grows with the nodes of its group
        assert any({k for k, v in pool.resources_needed().items() if v} <= _group_resources(g) for g in groups), device

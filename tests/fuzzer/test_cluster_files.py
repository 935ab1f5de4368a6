"""The cluster launch files are valid and give every pool the Ray resources it asks for.

The cluster-launcher YAML is checked by Ray's own validator (its ``ray-schema.json``), the RayJob
manifest by KubeRay's published CRD schema (``rayjob_schema``), and both against
``PoolSettings.resources_needed``, the one place a pool's resource names are defined. The images: what
``docker build`` would send (``.dockerignore`` applied, no daemon needed), one Dockerfile per device
kind with the driver's Ray and Python, and every image named under the one registry prefix.
"""
from __future__ import annotations

import copy
import json
import re
import shlex
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

from gapfuzz.fuzzer.config.campaign import load_campaign
from gapfuzz.workers.run.pool import PoolSettings
from scripts.cluster import dockerignore, images
from tests.helpers.rayjob_schema import errors as rayjob_errors

ROOT = Path(__file__).resolve().parents[2]
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


def test_launcher_runs_the_projects_images_on_a_current_base_and_syncs_no_runs():
    raw = yaml.safe_load(LAUNCHER.read_text())
    assert raw["docker"]["image"] == images.image("cpu")
    assert raw["available_node_types"]["cuda"]["docker"]["worker_image"] == images.image("cuda")
    for name, node in raw["available_node_types"].items():
        ami = node["node_config"]["ImageId"]
        assert ami.startswith("resolve:ssm:/aws/service/deeplearning/") and "ubuntu-24.04" in ami, (name, ami)
    assert not raw.get("setup_commands")  # the images hold gapfuzz and the driver's Ray: nothing to install
    assert set(raw["file_mounts"].values()) == {"./campaigns"}  # campaign files, never the checkout
    assert {"**/runs", "**/.git"} <= set(raw["rsync_exclude"])


def _group_resources(group: dict) -> set[str]:
    """The Ray resources a KubeRay group's nodes advertise, from its rayStartParams and container limits."""
    params = group.get("rayStartParams", {})
    out = {"CPU"} if params.get("num-cpus", "1") != "0" else set()
    if int(params.get("num-gpus", "0")) > 0:
        out.add("GPU")
    if "resources" in params:  # KubeRay's form: a JSON object inside a quoted string
        out |= set(json.loads(json.loads(params["resources"])))
    return out


def _documents() -> list[dict]:
    return list(yaml.safe_load_all(RAYJOB_FILE.read_text()))


def _rayjob() -> dict:
    return next(d for d in _documents() if d["kind"] == "RayJob")


def test_rayjob_manifest_validates_against_kuberays_crd():
    job = _rayjob()
    assert (job["apiVersion"], job["kind"]) == ("ray.io/v1", "RayJob")
    assert rayjob_errors(job) == []


@pytest.mark.parametrize("path, key, value, message", [
    (["spec", "rayClusterSpec", "workerGroupSpecs", 0], "replica", 2, "'replica' was unexpected"),
    (["spec", "rayClusterSpec", "headGroupSpec", "template", "spec", "containers", 0], "imagePullPolicie", "Always",
     "'imagePullPolicie' was unexpected"),
    (["spec", "rayClusterSpec", "workerGroupSpecs", 1, "template", "spec", "containers", 0, "resources", "limits"],
     "memory", "lots", "does not match"),
    (["spec", "rayClusterSpec", "workerGroupSpecs", 0], "minReplicas", None, "'minReplicas' is a required property"),
    (["spec"], "ttlSecondsAfterFinished", "1h", "is not of type 'integer'"),
])
def test_the_crd_refuses_what_kubectl_would(path, key, value, message):
    broken = _rayjob()
    node = broken
    for step in path:
        node = node[step]
    if value is None:
        del node[key]
    else:
        node[key] = value
    found = rayjob_errors(broken)
    assert len(found) == 1 and message in found[0], found


def test_rayjob_pins_the_drivers_ray_and_names_images_under_the_registry():
    import ray

    assert images.manifest_ray_versions() == {"rayjob.yaml": ray.__version__}
    containers = [c for g in [_rayjob()["spec"]["rayClusterSpec"]["headGroupSpec"],
                              *_rayjob()["spec"]["rayClusterSpec"]["workerGroupSpecs"]]
                  for c in g["template"]["spec"]["containers"]]
    kinds = set()
    for c in containers:
        prefix, _, kind = c["image"].rpartition("/gapfuzz:")
        assert prefix == images.registry(), c["image"]
        kinds.add(kind)
    assert set(images.KINDS) <= kinds <= set(images.KINDS) | set(images.VENDOR_KINDS)


def test_set_registry_rewrites_every_image(tmp_path, monkeypatch):
    manifest, launcher = tmp_path / "rayjob.yaml", tmp_path / "ray-cluster-aws.yaml"
    manifest.write_text(RAYJOB_FILE.read_text())
    launcher.write_text(LAUNCHER.read_text())
    monkeypatch.setattr(images, "REGISTRY_FILE", tmp_path / "registry")
    monkeypatch.setattr(images, "MANIFESTS", [manifest, launcher])
    assert images.set_registry("ghcr.io/someone/tools") == [manifest, launcher]
    assert images.registry() == "ghcr.io/someone/tools"
    for path in (manifest, launcher):
        names = re.findall(r"image:\s*(\S+)", path.read_text())
        assert names and all(n.startswith("ghcr.io/someone/tools/gapfuzz:") for n in names), path.name
    with pytest.raises(ValueError, match="registry 'Ghcr.io/x y'"):
        images.set_registry("Ghcr.io/x y")


def _instructions(dockerfile: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) per instruction, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", "\n".join(line for line in dockerfile.read_text().splitlines()
                                          if not line.lstrip().startswith("#")))
    return [(w[0].upper(), w[1] if len(w) > 1 else "") for w in (line.split(None, 1) for line in text.splitlines() if
                                                               line.strip())]


@pytest.mark.parametrize("kind", sorted(images.KINDS))
def test_each_device_kind_has_a_dockerfile_with_the_drivers_ray(kind):
    steps = _instructions(images.KINDS[kind])
    known = {"FROM", "ARG", "ENV", "RUN", "COPY", "WORKDIR", "USER", "LABEL", "EXPOSE", "ENTRYPOINT", "CMD"}
    assert {name for name, _ in steps} <= known, steps
    assert all(name == "ARG" for name, _ in steps[:[n for n, _ in steps].index("FROM")])  # only ARGs before FROM
    args = dict(a.split("=", 1) for name, a in steps if name == "ARG" and "=" in a)
    assert args["RAY_VERSION"] == images.driver_versions()["RAY_VERSION"]
    assert args["PYTHON_VERSION"] == "%d.%d" % sys.version_info[:2]
    runs = " ".join(a for name, a in steps if name == "RUN")
    assert '"ray[default]==${RAY_VERSION}"' in runs and "wget" in runs  # KubeRay's probes run wget
    assert re.search(r"apt-get install [^&]*\bg\+\+", runs)  # Inductor's C++ compiler, with libgomp
    assert "cpp_toolchain_problem" in runs  # the build stops where Inductor could not compile (no headers)
    extras = re.search(r'-e "\.\[([a-z,]+)\]"', runs)[1].split(",")
    assert ("cuda" in extras) == (kind == "cuda") and ("onnxruntime" in extras) == (kind != "cuda")
    base = [a for name, a in steps if name == "FROM"][-1]
    if kind == "cuda":
        assert args["CUDA_IMAGE"].startswith("nvidia/cuda:") and base == "${CUDA_IMAGE}"
        assert "/whl/cu" in args["TORCH_INDEX"]
    else:
        assert args["TORCH_INDEX"].endswith("/whl/cpu")
    assert ("COPY", "--chown=1000:100 . .") in steps
    command = images.build_command(kind)
    assert command[-3:] == ["-t", images.image(kind), "."]
    assert f"--build-arg=RAY_VERSION={args['RAY_VERSION']}" in command


def test_the_image_context_holds_the_package_and_no_runs_or_caches(tmp_path):
    files = dockerignore.context_files(ROOT, "scripts/cluster/Dockerfile.cpu")
    assert {"pyproject.toml", "README.md", "core/__init__.py", "fuzzer/cli/main.py",
            "campaigns/cluster.yaml", "scripts/cluster/Dockerfile.cpu"} <= set(files)
    tops = {f.split("/")[0] for f in files}
    assert not tops & {".git", "runs", "cache", ".pytest_cache", ".ruff_cache", "build", "dist"}, tops
    assert not [f for f in files if "__pycache__" in f or f.endswith((".onnx", ".pt2", ".pyc", ".safetensors"))]
    assert not [f for f in files if f.startswith(("docs/findings/", "runs-")) or ".egg-info/" in f]
    # the rules as Docker reads them, on a tree that has what a checkout collects
    for rel in ["runs/default/run.json", "runs-old/x", "core/__pycache__/a.pyc", "a/b/model.onnx", "cache/x",
                ".git/HEAD", "docs/findings/t.md", "gapfuzz.egg-info/PKG-INFO", "core/ir.py", "docs/cluster.md"]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x")
    (tmp_path / ".dockerignore").write_text((ROOT / ".dockerignore").read_text() + "\n!runs/default/run.json\n")
    assert dockerignore.context_files(tmp_path) == [".dockerignore", "core/ir.py", "docs/cluster.md",
                                                    "runs/default/run.json"]


def test_dockerignore_rules_follow_dockers_matching():
    rules = dockerignore.parse("# c\n/top\n*.md\n!KEEP.md\nsrc/**/gen\n**/*.tmp\nd?r\n[ab]x\n")
    cases = {"top": True, "top/a/b": True, "sub/top": False, "x.md": True, "KEEP.md": False, "sub/x.md": False,
             "src/gen/f": True, "src/a/b/gen": True, "gen": False, "a/b.tmp": True, "b.tmp": True, "dir": True,
             "dr": False, "ax": True, "cx": False}
    assert {p: dockerignore.excluded(p, rules) for p in cases} == cases


def test_rayjob_groups_carry_every_pools_resources():
    groups = {g["groupName"]: g for g in _rayjob()["spec"]["rayClusterSpec"]["workerGroupSpecs"]}
    assert _needed("npu") == {"CPU", "NPU"} and _needed("xpu") == {"CPU", "GPU", "accelerator_type:Intel-GPU-Max-1550"}
    for device in ("cpu", "cuda", "xpu", "npu"):
        assert any(_needed(device) <= _group_resources(g) for g in groups.values()), device
    assert "nvidia.com/gpu" in groups["cuda"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    # Ray's own names, never the lowercase custom ones no node Ray set up has
    assert not {"xpu", "npu"} & set().union(*map(_group_resources, groups.values()))


def _entrypoint_campaign():
    """The RayJob's campaign as its entrypoint loads it (the file, then its KEY=VALUE settings)."""
    from gapfuzz.fuzzer.cli.parser import overrides, setting

    words = shlex.split(_rayjob()["spec"]["entrypoint"])
    assert words[:2] == ["gapfuzz", "run"], words
    settings = [setting(w) for w in words[3:] if "=" in w and not w.startswith("-")]
    return words, load_campaign(ROOT / Path(words[2]).relative_to(IMAGE_CHECKOUT), overrides(settings))


IMAGE_CHECKOUT = Path("/home/ray/gapfuzz")  # the images' WORKDIR, where they hold this checkout


def test_rayjob_runs_the_cluster_campaign_from_the_image_with_its_seeds(tmp_path, monkeypatch):
    from gapfuzz.fuzzer.config.plan import select_seeds

    for kind, dockerfile in images.KINDS.items():
        assert ("WORKDIR", str(IMAGE_CHECKOUT)) in _instructions(dockerfile), kind
    monkeypatch.chdir(tmp_path)  # nothing may depend on the job's working directory
    words, campaign = _entrypoint_campaign()
    assert Path(words[2]).is_absolute() and words[2].removeprefix(f"{IMAGE_CHECKOUT}/") in \
        dockerignore.context_files(ROOT, "scripts/cluster/Dockerfile.cpu")  # the image holds the file
    out = words[words.index("--out") + 1]
    assert out.split("://")[0] in ("s3", "gs"), out  # an object store the driver writes with its service account
    assert all(sel.catalog is None or "://" in sel.catalog for sel in campaign.seeds)
    seeds = select_seeds(campaign)  # selected here as on the head: no local folder needed
    sources = {s.split("/")[0] for s in seeds}
    assert len(seeds) > 4000 and {"timm", "tv", "hf", "ops"} <= sources, sources  # tv: torchvision, hf: transformers
    groups = {g["groupName"]: g for g in _rayjob()["spec"]["rayClusterSpec"]["workerGroupSpecs"]}
    for device in {spec.device for spec in campaign.backends.all()}:
        pool = campaign.pool(device)
        assert pool.workers == "auto", device  # each pool grows with the nodes of its group
        need = {k for k, v in pool.resources_needed().items() if v}
        fits = [name for name, g in groups.items() if need <= _group_resources(g)]
        assert fits == ([device] if device != "cpu" else ["cpu", "cuda", "xpu", "npu"]), (device, fits)


def test_only_the_head_writes_the_store_and_it_runs_as_the_service_account():
    accounts = [d for d in _documents() if d["kind"] == "ServiceAccount"]
    assert len(accounts) == 1 and accounts[0]["apiVersion"] == "v1"
    name, notes = accounts[0]["metadata"]["name"], accounts[0]["metadata"].get("annotations", {})
    assert any(k in notes for k in ("eks.amazonaws.com/role-arn", "iam.gke.io/gcp-service-account")), notes
    spec = _rayjob()["spec"]["rayClusterSpec"]
    assert spec["headGroupSpec"]["template"]["spec"]["serviceAccountName"] == name
    assert not [g["groupName"] for g in spec["workerGroupSpecs"] if "serviceAccountName" in g["template"]["spec"]]

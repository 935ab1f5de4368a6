"""Releases as backends: a campaign's ``versions:`` and ``torch:`` expanded, each release's environment made
once and cached, pip's failures said in one line, and a test stack whose release 2.0 breaks one operator:
one cluster, marked a regression at 2.0, whose reproducer is checked on both releases."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from gapfuzz.core.strict_yaml import load
from gapfuzz.fuzzer.config.campaign import CampaignError, from_dict, manifest_of
from gapfuzz.fuzzer.repro.across import ABSENT, SHOWS, AgainstError, in_words, parse_against
from gapfuzz.workers.run.releases import Release, ReleaseError, environment, matches, why_not
from tests.conftest import gapfuzz
from tests.stacks.release_backend import write_wheels

STACK = "tests.stacks.release_backend:Released"
CAMPAIGN = """
name: rel
seed: 3
seeds:
  - {source: ops, include: ["ops/tanh/float32/*", "ops/relu/float32/*"]}
variants: {per_seed: 1}
sizes: {per_seed: 0}
probes: {per_variant: 2}
backends:
  targets:
    - {class: "%s", versions: %s}
pools:
  cpu: {workers: 1}
run: {repeats: 1}
"""


@pytest.fixture
def wheels(tmp_path, monkeypatch):
    """relstack's releases in a folder pip finds them in, and nowhere else; environments under tmp_path."""
    folder = write_wheels(tmp_path / "wheels")
    monkeypatch.setenv("PIP_FIND_LINKS", str(folder))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("GAPFUZZ_CACHE_DIR", str(tmp_path / "cache"))
    return folder


def campaign(text: str):
    return from_dict(load(text, "t"), "t")


def test_versions_and_torch_expand_into_one_backend_per_release():
    c = campaign("""
name: r
seeds: [{source: ops, include: ["ops/tanh/float32/*"]}]
backends:
  targets:
    - {backend: onnxruntime@cpu, versions: ["1.31.1", "1.32.0"]}
    - {backend: inductor@cpu, torch: "2.13.0"}
    - inductor@cpu
""")
    names = [t.name for t in c.backends.targets]
    assert names == ["onnxruntime-1.31.1@cpu", "onnxruntime-1.32.0@cpu", "inductor-torch2.13.0@cpu", "inductor@cpu"]
    lines = {t.name: t.line for t in c.backends.targets}
    assert set(lines.values()) == {"onnxruntime@cpu", "inductor@cpu"}
    old = c.backends.targets[2]
    assert old.release == Release.of({"torch": "2.13.0"}) and old.pool == "cpu~torch==2.13.0"
    backends = manifest_of(c).backends
    assert backends["inductor-torch2.13.0@cpu"]["release"] == {"torch": "2.13.0"}
    assert backends["inductor@cpu"]["line"] == "inductor@cpu" and "torch" in backends["inductor@cpu"]["release"]
    assert backends["onnxruntime-1.31.1@cpu"]["release"] == {"onnxruntime": "1.31.1"}


@pytest.mark.parametrize("entry, phrase", [
    ('{class: "tests.stacks.planted_backend:PlantedFaults", versions: ["1.0"]}', "has no releases to choose"),
    ('{backend: inductor@cpu, versions: ["2.13.0"], torch: "2.13.0"}', "not both"),
    ('{backend: onnxruntime@cpu, versions: ["1.31.1"], images: {"1.30": "x"}}', "is not one of its versions"),
    ('{backend: onnxruntime@cpu, versions: ["latest"]}', "versions"),
])
def test_a_release_that_cannot_be_named_is_one_line(entry, phrase):
    with pytest.raises(CampaignError, match=phrase):
        campaign(f"name: r\nseeds: [{{source: ops, include: [\"ops/tanh/float32/*\"]}}]\n"
                 f"backends:\n  targets:\n    - {entry}\n")


def test_the_reference_runs_one_release_and_the_oracle_runs_beside_it():
    with pytest.raises(CampaignError, match="runs in one release"):
        campaign("name: r\nseeds: [{source: ops}]\nbackends:\n  reference: {backend: eager@cpu, versions: [\"2.13.0\"]}"
                 "\n  targets: [inductor@cpu]\n")
    c = campaign("name: r\nseeds: [{source: ops}]\nbackends:\n  reference: {backend: eager@cpu, torch: \"2.13.0\"}\n"
                 "  targets: [inductor@cpu]\n")
    assert c.oracle.release == c.reference.release == Release.of({"torch": "2.13.0"})


def test_pins_match_as_pip_matches_them():
    assert matches("2.13.0+cpu", "2.13.0") and not matches("2.13.1", "2.13.0") and not matches(None, "1.0")


def test_pip_failures_in_one_phrase():
    r = Release.of({"onnxruntime": "1.31.9"})
    missing = ("ERROR: Could not find a version that satisfies the requirement onnxruntime==1.31.9 (from versions: "
               "1.30.0, 1.31.0, 1.31.1, 1.32.0)\nERROR: No matching distribution found for onnxruntime==1.31.9\n")
    assert why_not(missing, r) == ("the package index has no onnxruntime 1.31.9 (did you mean '1.31.1'?) "
                                   "(it has 1.30.0, 1.31.0, 1.31.1, 1.32.0)")
    conflict = ("ERROR: Cannot install torch==1.0 because these package versions have conflicting dependencies.\n\n"
                "The conflict is caused by:\n    The user requested torch==1.0\n"
                "    The user requested (constraint) torch<=2.14.1\n\nTo fix this you could try to:\n")
    assert "torch==1.0; The user requested (constraint) torch<=2.14.1" in why_not(conflict, r)


def test_against_names_a_release_of_the_targets_stack():
    c = campaign("name: r\nseeds: [{source: ops}]\nbackends:\n  targets: [{backend: onnxruntime@cpu, "
                 "versions: [\"1.31.1\"]}]\n")
    target = c.backends.targets[0]
    assert parse_against(target, "onnxruntime==1.33.0") == Release.of({"onnxruntime": "1.33.0"})
    assert parse_against(target, "torch==2.13.0") == Release.of({"onnxruntime": "1.31.1", "torch": "2.13.0"})
    for bad in ("openvino==2026.4.1", "onnxruntime", "onnxruntime==latest"):
        with pytest.raises(AgainstError):
            parse_against(target, bad)


def test_release_words():
    assert in_words({"x 1.0": ABSENT, "x 2.0": SHOWS}) == "a regression: worked in x 1.0, wrong in x 2.0"
    assert in_words({"x 1.0": SHOWS, "x 2.0": ABSENT}).startswith("fixed in x 2.0, the newest")
    assert in_words({"x 1.0": SHOWS, "x 2.0": SHOWS}).startswith("shows in every release")
    assert in_words({"x 2.0": SHOWS}) == ""


def test_an_environment_is_made_once_and_holds_its_release(wheels):
    import subprocess

    release = Release.of({"relstack": "1.0"})
    made = environment(release)
    assert made.made_s is not None
    out = subprocess.run([made.python, "-c", "import relstack, gapfuzz.core.bugs; print(relstack.__version__)"],
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == "1.0"
    again = environment(release)
    assert again.made_s is None and again.python == made.python  # cached: a later campaign reuses it
    with pytest.raises(ReleaseError, match=r"no relstack 3.0 \(did you mean '2.0'\?\)"):
        environment(Release.of({"relstack": "3.0"}))
    with pytest.raises(ReleaseError, match="requires a different Python"):
        environment(Release.of({"relstack": "0.9"}))  # a wheel that fits no Python 3
    assert not Release.of({"relstack": "0.9"}).folder.exists()  # nothing half-made is left to be used


@pytest.mark.parametrize("versions, phrase", [
    ('["3.0"]', "no relstack 3.0"),
    ('["0.9"]', "requires a different Python"),
])
def test_a_release_that_cannot_be_had_stops_the_campaign_before_anything_is_written(tmp_path, wheels, versions,
                                                                                   phrase):
    path = tmp_path / "c.yaml"
    path.write_text(CAMPAIGN % (STACK, versions))
    proc = gapfuzz("run", path, "--out", tmp_path / "out", cwd=tmp_path, timeout=300)
    lines = [line for line in proc.stderr.splitlines() if line.startswith("gapfuzz:")]
    assert proc.returncode == 2 and len(lines) == 1 and phrase in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "out").exists()


@pytest.mark.slow  # 40-110 s; a faster test of the default set guards its main behaviour
@pytest.mark.ray
def test_a_regression_in_release_two_is_one_cluster_marked_at_two_and_its_reproducer_says_so(tmp_path, wheels):
    from gapfuzz.analysis.api import load_run

    path = tmp_path / "c.yaml"
    path.write_text(CAMPAIGN % (STACK, '["1.0", "2.0"]'))
    gapfuzz("run", path, "--out", tmp_path / "out", cwd=tmp_path, timeout=600, check=True)
    run = load_run(tmp_path / "out")
    records = run.records(["backend", "backend_version"])
    assert dict(records.groupby("backend")["backend_version"].first()) == {
        "eager@cpu": records.loc[records["backend"] == "eager@cpu", "backend_version"].iloc[0],
        "eager-fp64@cpu": records.loc[records["backend"] == "eager-fp64@cpu", "backend_version"].iloc[0],
        "relstack-1.0@cpu": "1.0", "relstack-2.0@cpu": "2.0"}
    found = run.clusters()
    assert len(found) == 1, found
    row = found.iloc[0]
    assert row["first_div_op"] == "aten.tanh.default" and row["release_mark"] == "regression", row
    assert row["first_release"] == "relstack 2.0", row
    proc = gapfuzz("repro", tmp_path / "out", row["cluster"], "--allow-plugins", "--tries", "1",
                   "--against", "relstack==1.0", cwd=tmp_path, timeout=600)
    assert "under relstack 1.0: does not show it" in proc.stdout and "under relstack 2.0: shows it" in proc.stdout, \
        proc.stdout + proc.stderr
    report = (tmp_path / "out" / "repros" / row["cluster"] / "report.md").read_text()
    assert "a regression: worked in relstack 1.0, wrong in relstack 2.0" in report


def test_an_operator_this_torch_lacks_is_unsupported_not_a_defect():
    from gapfuzz.core.bugs import Stage, Status
    from gapfuzz.core.failures import Failure, describe
    from gapfuzz.core.ir import MissingOperator, resolve_target

    with pytest.raises(MissingOperator, match="not supported by torch"):
        resolve_target("aten.linalg_polar_of_a_later_release.default")
    try:
        resolve_target("aten.linalg_polar_of_a_later_release.default")
    except MissingOperator as e:
        assert Failure.from_error(describe(e), Stage.RUN).status == Status.UNSUPPORTED
    assert Failure.from_error({"error_type": "KeyError", "message": "x"}, Stage.RUN).status == Status.ERROR


def test_a_release_pool_runs_in_its_own_ray_runtime_environment(monkeypatch):
    from gapfuzz.workers.run.releases import runtime_env

    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)  # pip configured with no index of its own
    monkeypatch.delenv("PIP_INDEX_URL", raising=False)
    monkeypatch.delenv("PIP_EXTRA_INDEX_URL", raising=False)
    r = Release.of({"onnxruntime": "1.31.1"})
    assert runtime_env(r, "/envs/x/bin/python") == {"py_executable": "/envs/x/bin/python"}  # this machine's
    assert runtime_env(r, None) == {"pip": {"packages": ["onnxruntime==1.31.1"]}}  # a cluster's nodes make it
    assert runtime_env(r, None, "registry.example.com/ort:1.31.1") == {"image_uri": "registry.example.com/ort:1.31.1"}


def test_a_cluster_node_makes_a_release_from_the_indexes_it_comes_from(monkeypatch):
    """Ray's pip runtime environment (KubeRay pods have pip, not podman) with this machine's indexes a node can
    reach, and PyTorch's CPU index for a torch release of a CPU pool; Ray accepts it as written."""
    from ray.runtime_env import RuntimeEnv

    from gapfuzz.workers.run.pip_runs import TORCH_CPU_INDEX
    from gapfuzz.workers.run.releases import runtime_env

    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_INDEX_URL", "https://mirror.example.com/simple")
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", "file:///opt/only-here/simple https://more.example.com/simple")
    torch_cpu = runtime_env(Release.of({"torch": "2.13.0"}), None, device="cpu")
    options = torch_cpu["pip"]["pip_install_options"]
    assert "--index-url=https://mirror.example.com/simple" in options and not [o for o in options if "file:" in o]
    assert f"--extra-index-url={TORCH_CPU_INDEX}" in options and "--extra-index-url=https://more.example.com/simple" \
        in options
    torch_cuda = runtime_env(Release.of({"torch": "2.13.0"}), None, device="cuda")  # PyPI's torch: CUDA's build
    assert f"--extra-index-url={TORCH_CPU_INDEX}" not in torch_cuda["pip"]["pip_install_options"]
    assert RuntimeEnv(**torch_cpu)["pip"]["packages"] == ["torch==2.13.0"]  # Ray's own validation


def test_making_an_environment_says_which_release_and_pips_stage(wheels):
    said = []
    environment(Release.of({"relstack": "1.0"}), said.append)
    pip = [s for s in said if ": pip " in s]
    assert pip and all(s.startswith("environment for relstack 1.0: pip ") for s in pip), said
    assert any(" pip collecting relstack" in s for s in pip) and any(" pip installed relstack-1.0" in s
                                                                   for s in pip), pip


def test_pips_stages_are_said_when_they_change_and_now_and_then_within_one():
    from gapfuzz.workers.run.pip_runs import Stages

    now, said = [0.0], []
    stages = Stages(said.append, "environment for torch 2.13.0", every_s=10, clock=lambda: now[0])
    for t, line in [(1, "Collecting torch==2.13.0"), (2, "  Downloading torch-2.13.0-cp311.whl (180.2 MB)"),
                    (3, "Downloading sympy-1.14.whl (6 MB)"), (14, "Downloading numpy-2.4.whl (16 MB)"),
                    (15, "  Using cached filelock-3.whl"), (40, "Installing collected packages: sympy, torch")]:
        now[0] = t
        stages.feed(line)
    assert said == ["environment for torch 2.13.0: pip collecting torch==2.13.0 (1 s)",
                    "environment for torch 2.13.0: pip downloading torch-2.13.0-cp311.whl (180.2 MB) (2 s)",
                    "environment for torch 2.13.0: pip downloading numpy-2.4.whl (16 MB) (14 s)",
                    "environment for torch 2.13.0: pip installing sympy, torch (40 s)"]


def test_the_plan_says_which_environments_a_run_would_make(wheels):
    from gapfuzz.fuzzer.config.plan import plan_lines

    c = campaign(CAMPAIGN % (STACK, '["1.0"]'))
    release = Release.of({"relstack": "1.0"})
    assert f"release relstack 1.0: its environment will be made in {release.folder}" in \
        plan_lines(c, ["ops/tanh/float32/0"])
    environment(release)
    assert f"release relstack 1.0: its environment is cached in {release.folder}" in \
        plan_lines(c, ["ops/tanh/float32/0"])


def test_a_release_in_a_pool_of_its_own_joins_the_consensus_of_the_targets_beside_the_reference():
    """The home pool hands its divergent targets' outputs on: a release run later, in its own pool, that gives
    what they give is reference-suspect as they are (not a target-divergent cluster of its own, which across
    releases would read as a fix or a regression that is not one)."""
    from types import SimpleNamespace as NS

    import torch

    from gapfuzz.core.bugs import Verdict
    from gapfuzz.core.tolerances import Tolerances
    from gapfuzz.results.schema import RunRecord
    from gapfuzz.workers.judge.chain import consensus

    out = [torch.tensor([1.0, float("inf"), 2.0])]

    def judging(witnesses):
        here = RunRecord(campaign="", variant_id="v", seed_id="s", backend="inductor-torch2.13.0@cpu", stack="inductor",
                         probe="p", verdict=Verdict.TARGET_DIVERGENT, judged_against="eager@cpu", worker_s=0.0)
        c = NS(judges=NS(made={("eager@cpu", False): NS(tol=Tolerances())}), outputs=lambda o: out,
               specs={here.backend: NS(stack="inductor")}, settings=NS(reference="eager@cpu"), probe=NS(name="p"),
               known={("onnxruntime@cpu", "p"): out}, witnesses=witnesses, job=NS(numpy_answer=lambda p: None))
        consensus(c, [here])
        return here

    assert judging({}).verdict == Verdict.TARGET_DIVERGENT  # alone in its pool: nobody to agree with
    joined = judging({("onnxruntime@cpu", "p"): "onnxruntime"})
    assert joined.verdict == Verdict.REFERENCE_SUSPECT and joined.consensus == "inductor,onnxruntime"


def test_a_release_where_the_reproducer_itself_fails_is_not_counted_as_absent(wheels):
    from gapfuzz.fuzzer.repro.across import check_releases

    failed = ("Traceback (most recent call last):\n  File \"repro.py\", line 9\nRuntimeError: Exception from "
              "core.cpp:114:\nCheck 'repacking_expr' failed\nBrgemmCopyB expression is not found\n\n[exit status 4]")
    answers = iter([(0, failed), (1, "[exit status 1]")])  # oldest first: 1.0 fails to compile, 2.0 shows it
    checked = check_releases([Release.of({"relstack": "2.0"}), Release.of({"relstack": "1.0"})],
                             lambda python: next(answers), lambda line: None)
    assert checked == {"relstack 1.0": "repro.py fails there before it can tell: RuntimeError: Exception from "
                                       "core.cpp:114: ... BrgemmCopyB expression is not found",
                       "relstack 2.0": SHOWS}
    assert in_words(checked) == ""  # only one release could tell: no regression is claimed


def test_repro_says_why_a_finding_across_torch_releases_may_not_show_in_one_interpreter():
    from gapfuzz.fuzzer.repro.minimise import torch_apart

    c = campaign("name: r\nseeds: [{source: ops}]\nbackends:\n  targets: [{backend: inductor@cpu, torch: \"2.13.0\"}, "
                 "{backend: onnxruntime@cpu, versions: [\"1.31.1\"]}]\n")
    old, ort = c.backends.targets
    assert "ran under torch 2.13.0" in torch_apart(old, c.reference)[0]
    assert torch_apart(ort, c.reference) == []


def _made_by_hand(release: Release, installed: Path, behind: Path) -> Path:
    """``release``'s environment as an earlier campaign leaves it (its marker written), made without pip: the
    wheel ``installed`` unpacked into its site-packages, the wheel ``behind`` into a folder behind it (as this
    interpreter's site-packages are). Its site-packages."""
    import json
    import subprocess
    import sys
    import zipfile

    folder = release.folder
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    purelib = Path(subprocess.run([str(folder / "bin" / "python"), "-c", "import sysconfig; "
                                   "print(sysconfig.get_paths()['purelib'])"], capture_output=True, text=True,
                                  check=True).stdout.strip())
    zipfile.ZipFile(installed).extractall(purelib)
    zipfile.ZipFile(behind).extractall(behind.parent / "behind")
    (purelib / "_gapfuzz_parent.pth").write_text(f"import site; site.addsitedir({str(behind.parent / 'behind')!r})\n")
    (folder / "ready.json").write_text(json.dumps({"pins": dict(release.pins)}))
    return purelib


def test_an_environment_that_lost_its_pin_is_broken_in_the_plan_and_made_again_at_its_next_use(wheels):
    """A cached environment whose pinned package is gone (its marker kept) would import the release behind it:
    relstack 2.0 run and recorded under relstack-1.0. It is checked at each use, said broken by ``--check``, and
    made again; one that kept the package's metadata but lost its module is broken too."""
    import shutil
    import subprocess

    from gapfuzz.fuzzer.config.plan import plan_lines
    from gapfuzz.workers.run.releases import lacks, state

    release = Release.of({"relstack": "1.0"})
    site = _made_by_hand(release, wheels / "relstack-1.0-py3-none-any.whl", wheels / "relstack-2.0-py3-none-any.whl")
    python = release.folder / "bin" / "python"
    assert lacks(release, python) is None and state(release) == ("cached", None)
    shutil.rmtree(site / "relstack")  # the module gone, its metadata kept: the one behind is imported
    assert f"relstack 1.0 whose module is imported from {wheels / 'behind'}" in lacks(release, python)
    shutil.rmtree(site / "relstack-1.0.dist-info")  # both gone: the release behind it answers for it
    assert state(release) == ("broken", "relstack 2.0")
    c = campaign(CAMPAIGN % (STACK, '["1.0"]'))
    assert f"release relstack 1.0: its environment is broken (it holds relstack 2.0), will be made again in " \
           f"{release.folder}" in plan_lines(c, ["ops/tanh/float32/0"])
    said = []
    made = environment(release, said.append)
    assert made.made_s is not None and any("holds relstack 2.0 instead of its pins; making it again" in s for s in said)
    out = subprocess.run([made.python, "-c", "import relstack; print(relstack.__version__)"], capture_output=True,
                         text=True, check=True).stdout
    assert out.strip() == "1.0" and state(release) == ("cached", None)
    assert environment(release).made_s is None  # sound again: used as it is


def test_a_release_pool_interpreter_reaches_rays_shell_line_as_one_word(tmp_path):
    """Ray runs ``py_executable`` through ``bash -c`` (``RuntimeEnvContext.exec_worker``): a cache folder with a
    space kept every worker from starting, and one holding ``$(...)`` ran it."""
    import os
    import shlex
    import subprocess
    import sys

    from gapfuzz.workers.run.releases import runtime_env

    marker = tmp_path / "RAN"
    folder = tmp_path / f"ca che $(touch {marker})" / "bin"
    folder.mkdir(parents=True)
    python = folder / "python"
    os.symlink(sys.executable, python)
    given = runtime_env(Release.of({"relstack": "1.0"}), str(python))["py_executable"]
    assert shlex.split(given) == [str(python)]
    done = subprocess.run(["bash", "-c", " ".join(["exec", given, "-c", shlex.quote("print('worker')")])],
                          capture_output=True, text=True, timeout=60)  # as Ray's exec_worker builds its line
    assert done.stdout.strip() == "worker" and not marker.exists(), done.stderr


@pytest.mark.parametrize("entry, phrase", [
    ('{backend: onnxruntime@cpu, versions: ["latest"]}',
     "backends.targets[0].versions[0]: 'latest' is not a release as a package index spells one; give a version"),
    ('{backend: inductor@cpu, torch: "2.13.0; rm -rf /"}', "backends.targets[0].torch: '2.13.0; rm -rf /' is not a "
                                                           "release"),
    ('{backend: onnxruntime@cpu, versions: ["1.31.1"], images: {"1.31.1": "ort $(touch RAN)"}}',
     "backends.targets[0].images.1.31.1: 'ort $(touch RAN)' is not a container image reference; give "
     "[registry/]name[:tag][@digest]"),
    ('{backend: onnxruntime@cpu, versions: ["1.31.1"], images: {"1.31.1": "ort:1.31.1 --privileged"}}',
     "is not a container image reference"),
])
def test_a_release_or_image_refusal_names_what_is_wrong_with_it(entry, phrase):
    with pytest.raises(CampaignError, match="^[^\n]*$") as e:
        campaign(f"name: r\nseeds: [{{source: ops, include: [\"ops/tanh/float32/*\"]}}]\n"
                 f"backends:\n  targets:\n    - {entry}\n")
    assert phrase in str(e.value) and "cannot name a folder" not in str(e.value), str(e.value)


def test_image_references_as_a_registry_spells_them():
    import re

    from gapfuzz.workers.run.releases import IMAGE_PATTERN, ReleaseError, runtime_env

    for good in ("ort", "ubuntu:22.04", "registry.example.com/gapfuzz-openvino:2026.3.1", "localhost:5000/a/b_c:x",
                 "ghcr.io/me/gapfuzz@sha256:" + "0" * 64):
        assert re.match(IMAGE_PATTERN, good), good
    for bad in ("", "ort;ls", "ort $(id)", "Ort", "ort:1.0\n", "-v/:/h ort", "ort:", "a//b", "ort:1 --privileged"):
        assert not re.match(IMAGE_PATTERN, bad), bad
        with pytest.raises(ReleaseError, match="is not an image reference"):
            runtime_env(Release.of({"onnxruntime": "1.31.1"}), None, bad or " ")


def test_images_on_a_machine_without_podman_are_one_line_before_any_work(monkeypatch):
    """Ray starts an ``image_uri`` pool's workers in podman: without it each worker is lost and started again,
    thousands of times, and the campaign waits. On the embedded Ray that is one line; on a cluster, the nodes'."""
    import shutil

    from gapfuzz.fuzzer.config.pools import Pools

    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None)
    c = campaign("name: r\nseeds: [{source: ops}]\nbackends:\n  targets: [{backend: onnxruntime@cpu, versions: "
                 "[\"1.31.1\"], images: {\"1.31.1\": \"registry.example.com/ort:1.31.1\"}}]\n")
    with pytest.raises(CampaignError, match="^[^\n]*$") as e:
        Pools(c).releases(here=True)
    assert "backend onnxruntime-1.31.1@cpu: its release runs in the image 'registry.example.com/ort:1.31.1', and " \
           "this machine has no podman" in str(e.value)
    pools = Pools(c)
    pools.releases(here=False)  # a cluster's nodes run it
    assert pools.settings["cpu~onnxruntime==1.31.1"].runtime_env == {"image_uri": "registry.example.com/ort:1.31.1"}


def test_a_cache_where_no_environment_can_be_made_is_said_of_the_cache_not_the_run_folder(tmp_path, monkeypatch):
    from tests.fuzzer.test_hostile_inputs import in_process

    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "envs").write_text("a file where the environments' folder goes")
    monkeypatch.setenv("GAPFUZZ_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(ReleaseError, match="^[^\n]*$") as e:
        environment(Release.of({"relstack": "1.0"}))
    assert str(e.value).startswith(f"environment cache {tmp_path / 'cache' / 'envs'}: cannot make the environment "
                                   f"of relstack 1.0 there ("), str(e.value)
    path = tmp_path / "c.yaml"
    path.write_text(CAMPAIGN % (STACK, '["1.0"]'))
    code, err = in_process(["run", str(path), "--out", str(tmp_path / "run")])
    lines = [line for line in err.splitlines() if line.startswith("gapfuzz:")]  # torch's own warnings aside
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert f"backend relstack-1.0@cpu: environment cache {tmp_path / 'cache' / 'envs'}: cannot make" in lines[0]
    assert "cannot write:" not in lines[0] and not (tmp_path / "run").exists()


@pytest.mark.ray
@pytest.mark.slow  # about 45 s; the quoting itself: test_a_release_pool_interpreter_reaches_rays_shell_line_as_one_word
def test_a_campaign_whose_cache_folder_holds_a_space_and_shell_runs_its_release_and_nothing_else(tmp_path, wheels,
                                                                                                  monkeypatch):
    from gapfuzz.analysis.api import load_run

    marker = tmp_path / "RAN"
    monkeypatch.setenv("GAPFUZZ_CACHE_DIR", str(tmp_path / f"ca che $(touch {marker})"))
    path = tmp_path / "c.yaml"
    path.write_text(CAMPAIGN % (STACK, '["1.0"]'))
    proc = gapfuzz("run", path, "--out", tmp_path / "out", cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = load_run(tmp_path / "out").records(["backend", "backend_version"])
    assert set(records.loc[records["backend"] == "relstack-1.0@cpu", "backend_version"]) == {"1.0"}
    assert not marker.exists()

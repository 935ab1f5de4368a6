"""Releases as backends: a campaign's ``versions:`` and ``torch:`` expanded, each release's environment made
once and cached, pip's failures said in one line, and a test stack whose release 2.0 breaks one operator:
one cluster, marked a regression at 2.0, whose reproducer is checked on both releases."""
from __future__ import annotations

import pytest

from gapfuzz.core.strict_yaml import load
from gapfuzz.fuzzer.config.campaign import CampaignError, from_dict, manifest_of
from gapfuzz.fuzzer.repro.across import ABSENT, SHOWS, AgainstError, in_words, parse_against
from gapfuzz.workers.run.releases import Release, ReleaseError, environment, matches, why_not

from .conftest import gapfuzz
from .release_backend import write_wheels

STACK = "tests.release_backend:Released"
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
    ('{class: "tests.planted_backend:PlantedFaults", versions: ["1.0"]}', "has no releases to choose"),
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


def test_a_release_pool_runs_in_its_own_ray_runtime_environment():
    from gapfuzz.workers.run.releases import runtime_env

    r = Release.of({"onnxruntime": "1.31.1"})
    assert runtime_env(r, "/envs/x/bin/python") == {"py_executable": "/envs/x/bin/python"}  # this machine's
    assert runtime_env(r, None) == {"pip": {"packages": ["onnxruntime==1.31.1"]}}  # a cluster's nodes make it
    assert runtime_env(r, None, "registry.example.com/ort:1.31.1") == {"image_uri": "registry.example.com/ort:1.31.1"}


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
    from gapfuzz.results.schema import RunRecord
    from gapfuzz.workers.judge.chain import consensus
    from gapfuzz.workers.judge.compare import Tolerances

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

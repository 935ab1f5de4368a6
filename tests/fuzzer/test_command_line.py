"""The command line as CI scripts and clusters use it: --version, KEY=VALUE settings, exit statuses that
gate on findings, a Ray cluster found through RAY_ADDRESS, an Inductor that says it has no compiler."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from gapfuzz.fuzzer.cli.launch import resume_command
from gapfuzz.fuzzer.cli.main import COMMANDS
from gapfuzz.fuzzer.cli.parser import EXAMPLES, UserError, build_parser, overrides, setting
from tests.conftest import REPO, gapfuzz


def test_version_and_every_command_s_help_shows_an_example_and_its_defaults(capsys):
    parser = build_parser(COMMANDS)
    with pytest.raises(SystemExit) as e:
        parser.parse_args(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.startswith("gapfuzz 0.1.0 (torch ")
    for command in EXAMPLES:
        with pytest.raises(SystemExit):
            parser.parse_args([*command.split(), "--help"])
        text = capsys.readouterr().out
        assert f"example: {EXAMPLES[command].split()[0]}" in text, command
    with pytest.raises(SystemExit):
        parser.parse_args(["run", "--help"])
    assert "(default: never)" in capsys.readouterr().out


def test_settings_are_dotted_keys_with_yaml_values_and_nest_for_the_campaign():
    parsed = [setting("run.budget_s=600"), setting("backends.targets=[inductor@cpu]"), setting("run.repeats=2")]
    assert overrides(parsed) == {"run": {"budget_s": 600, "repeats": 2}, "backends": {"targets": ["inductor@cpu"]}}
    for bad in ("run.budget_s", "=3", "run..x=1", "run.x=[1, 2", "a b=1"):
        with pytest.raises(Exception, match="KEY=VALUE|the value of"):
            setting(bad)
    with pytest.raises(UserError, match="an earlier KEY=VALUE"):
        overrides([setting("run=3"), setting("run.repeats=2")])
    assert resume_command("c.yaml", "runs/x", None, ("run.repeats=2",)) == \
        "gapfuzz run c.yaml run.repeats=2 --resume --out runs/x"


def test_a_setting_is_checked_as_the_file_is_one_line_each(tmp_path):
    ok = gapfuzz("run", "variants.per_seed=2", "backends.targets=[inductor@cpu]", "--check", cwd=tmp_path)
    assert ok.returncode == 0 and "variants in inference: 8 (up to 2 a seed" in ok.stdout, ok.stderr
    assert {line.split()[0] for line in ok.stdout.splitlines() if "@cpu " in line} == {
        "eager@cpu", "eager-fp64@cpu", "inductor@cpu"}
    for args, says in ((["run.budgt_s=600"], "unknown key 'budgt_s' at run (did you mean 'budget_s'?)"),
                       (["run.budget_s=abc"], "run.budget_s: 'abc' is not of type"),
                       (["x.y=[1"], "x.y=[1")):
        bad = gapfuzz("run", *args, "--check", cwd=tmp_path)
        assert bad.returncode == 2 and says in bad.stderr and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
    assert list(tmp_path.iterdir()) == []


def test_inductor_without_a_cpp_compiler_is_unavailable_with_what_to_install(monkeypatch):
    from gapfuzz.workers.backends.inductor import Inductor, cpp_toolchain_problem

    monkeypatch.setenv("CXX", "no-such-compiler++")
    cpp_toolchain_problem.cache_clear()
    try:
        assert "no C++ compiler (no-such-compiler++ is not on PATH: install g++" in Inductor.unavailable_reason("cpu")
    finally:
        monkeypatch.undo()
        cpp_toolchain_problem.cache_clear()
    assert Inductor.unavailable_reason("cpu") is None or shutil.which("g++") is None


def test_run_check_says_which_target_this_machine_cannot_run(tmp_path, monkeypatch):
    monkeypatch.setenv("CXX", "no-such-compiler++")
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    (tmp_path / "c.yaml").write_text("name: c\nseeds: [{source: ops, include: ['ops/abs/float32/0']}]\n"
                                     "backends: {targets: [inductor@cpu]}\n")
    done = gapfuzz("run", tmp_path / "c.yaml", "--check", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "inductor@cpu: not available here: no C++ compiler (no-such-compiler++ is not on PATH" in done.stdout \
        and "(the run would stop)" in done.stdout, done.stdout


GELU = """
name: gelu
seeds: [{source: ops, include: ["ops/nn.functional.gelu/float32/0"]}]
variants: {per_seed: 1}
sizes: {per_seed: 0, widths: 0}
probes: {per_variant: 1}
backends: {targets: [{class: "tests.stacks.numeric_backends:MiscomputeOp", device: cpu}]}
pools: {cpu: {workers: 1}}
run: {repeats: 1}
"""


@pytest.mark.ray
def test_inside_a_ray_cluster_run_joins_it_and_fail_on_and_diff_exit_code_gate_on_findings(tmp_path, local_ray):
    import ray

    campaign = tmp_path / "gelu.yaml"
    campaign.write_text(GELU)
    env = {**os.environ, "RAY_ADDRESS": ray.get_runtime_context().gcs_address}  # as inside a Ray job
    jobs = len(ray._private.state.jobs())
    run = subprocess.run([sys.executable, "-m", "gapfuzz.fuzzer.cli", "run", str(campaign), "--out",
                          str(tmp_path / "run"), "--quiet", "--fail-on", "findings"], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 1 and "--fail-on findings: 1 vendor finding(s): d-" in run.stdout, run.stderr
    assert len(ray._private.state.jobs()) == jobs + 1  # it joined this cluster: no Ray of its own
    # the earlier run without the target's records has none of its clusters: the later one's are new
    before = tmp_path / "before"
    shutil.copytree(tmp_path / "run", before)
    for part in (before / "records").iterdir():
        if part.name.startswith("miscompute"):
            shutil.rmtree(part) if part.is_dir() else part.unlink()
    assert gapfuzz("diff", tmp_path / "run", tmp_path / "run", "--exit-code").returncode == 0
    new = gapfuzz("diff", before, tmp_path / "run", "--exit-code")
    assert new.returncode == 1 and " new, 0 gone, 0 still there" in new.stdout, new.stdout + new.stderr

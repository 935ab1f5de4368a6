"""No program runs from a campaign's data: an option naming one (Inductor's ``cpp.cxx``) is refused at load,
in ``run --check``, a plain ``run`` and ``repro`` of a record naming it, unless ``--allow-exec-options``;
option values are checked against their types; an option space is bounded before its values are read."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from gapfuzz.fuzzer.config.campaign import CampaignError, from_dict
from gapfuzz.workers.run.registry import backend_class

CAMPAIGN = """name: exec
seeds:
  - {{source: ops, include: ["ops/add/float32/0"]}}
backends:
  targets:
    - {{backend: inductor@cpu, {options}}}
"""
REFUSED = "would name a program, a library, a path or compiler flags (inductor option); gapfuzz passes such an " \
          "option to a stack only with --allow-exec-options"


@pytest.fixture
def compiler(tmp_path):
    """A 'compiler' that leaves a marker file when anything runs it; (its path, the marker's)."""
    marker, script = tmp_path / "MARKER", tmp_path / "cc.sh"
    script.write_text(f"#!/bin/sh\ntouch {marker}\nexec g++ \"$@\"\n")
    script.chmod(0o755)
    return script, marker


def gapfuzz(*args, cwd=None) -> tuple[int, list[str], float]:
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "gapfuzz.fuzzer.cli", *map(str, args)], capture_output=True, text=True,
                       timeout=120, cwd=cwd, env={**os.environ, "RAY_ADDRESS": ""})
    return p.returncode, (p.stderr + p.stdout).strip().splitlines(), time.monotonic() - t0


@pytest.mark.parametrize("options", ["options: {{cpp.cxx: [{script}]}}",
                                     "option_space: {{cpp.cxx: [null, [{script}]]}}"])
def test_an_option_naming_a_program_is_refused_by_run_and_run_check_and_never_runs(tmp_path, compiler, options):
    script, marker = compiler
    path, out = tmp_path / "c.yaml", tmp_path / "run"
    path.write_text(CAMPAIGN.format(options=options.format(script=f'"{script}"')))
    for args in (["--check"], ["--out", out]):
        rc, lines, seconds = gapfuzz("run", path, *args)
        assert rc == 2 and len(lines) == 1, lines
        assert "backends.targets[0].option" in lines[0] and "cpp.cxx" in lines[0] and REFUSED in lines[0]
        assert not marker.exists() and not out.exists() and seconds < 30
    assert not (tmp_path / "runs").exists()


def test_repro_never_replays_a_record_option_naming_a_program(tmp_path, compiler):
    from gapfuzz.analysis.api import load_run
    from gapfuzz.results.schema import RunRecord
    from gapfuzz.results.store import RecordStore

    script, marker = compiler
    run = tmp_path / "run"
    run.mkdir()
    (run / "campaign.yaml").write_text(CAMPAIGN.format(options="label: inductor"))
    records = [RunRecord(campaign="exec", variant_id="ops/add/float32/0#0", seed_id="ops/add/float32/0", backend=b,
                         stack=b[:-4], device="cpu", status="ok", ops=["aten.add.Tensor"], node_count=3)
               for b in ("eager@cpu", "inductor@cpu")]
    failed = records[1]
    failed.status, failed.stage, failed.error_type, failed.message = "error", "compile", "RuntimeError", "no compiler"
    failed.backend_options = {"cpp.cxx": [str(script)]}
    RecordStore(run).write(records)
    cluster = load_run(run).clusters()["cluster"].iloc[0]
    before = sorted(p.relative_to(run) for p in run.rglob("*"))
    rc, lines, seconds = gapfuzz("repro", run, cluster)
    assert rc == 2 and len(lines) == 1, lines
    assert "its record's backend_options: cpp.cxx:" in lines[0] and REFUSED in lines[0] and seconds < 30
    assert not marker.exists() and not (run / "repros").exists()
    assert sorted(p.relative_to(run) for p in run.rglob("*")) == before
    (run / "campaign.yaml").write_text(CAMPAIGN.format(options=f'options: {{cpp.cxx: ["{script}"]}}'))
    rc, lines, _ = gapfuzz("repro", run, cluster)  # the run folder's campaign naming it: refused as it loads
    assert rc == 2 and len(lines) == 1 and "campaign.yaml: backends.targets[0].options: cpp.cxx:" in lines[0], lines
    assert not marker.exists() and not (run / "repros").exists()


def load(target: dict):
    return from_dict({"seeds": [{"source": "ops"}], "backends": {"targets": [target]}}, "c.yaml")


@pytest.mark.parametrize("target, message", [
    ({"backend": "inductor@cpu", "options": {"freezing": "banana"}},
     "c.yaml: backends.targets[0].options: freezing: 'banana' is not a boolean (inductor option, default False)"),
    ({"backend": "inductor@cpu", "options": {"dynamic": "maybe"}},
     "options: dynamic: 'maybe' is not a boolean (inductor option, default False)"),
    ({"backend": "inductor@cpu", "options": {"cpp.simdlen": 1.5}}, "cpp.simdlen: 1.5 is not a 64-bit integer or null"),
    ({"backend": "inductor@cpu", "options": {"mode": "fastest"}}, "mode: 'fastest' is not one of 'default'"),
    ({"backend": "inductor@cpu", "option_space": {"memory_pool": ["none", "some"]}},
     "option_space.memory_pool: 'some' is not one of 'none', 'intermediates'"),
    ({"backend": "inductor@cpu", "options": {"post_grad_custom_post_pass": "os.system"}}, REFUSED),
    ({"backend": "aot-eager@cpu", "options": {"dynamic": 1}}, "dynamic: 1 is not a boolean (aot-eager option"),
    ({"backend": "onnxruntime@cpu", "options": {"threads": 0}}, "threads: 0 is not an integer from 1 to 4096"),
    ({"backend": "tensorrt@cuda", "options": {"precision": "fp8"}}, "precision: 'fp8' is not one of 'float32'"),
    ({"backend": "eager@cpu", "label": "e", "options": {"tf32": "maybe"}}, "tf32: expected true or false"),
    ({"class": "tests.stacks.option_backends:OptionTanh", "options": {"a": 1, "library": "/x.so"}},
     "option-tanh has no"),
    ({"backend": "openvino@cpu", "options": {"INFERENCE_PRECISION_HINT": 5}},
     "INFERENCE_PRECISION_HINT: '5' is refused by OpenVINO's CPU plugin: Wrong value 5"),
    ({"backend": "openvino@cpu", "option_space": {"PERFORMANCE_HINT": ["LATENCY", "banana"]}},
     "'banana' is refused by OpenVINO's CPU plugin"),
    ({"backend": "inductor@cpu", "mode": "traning"}, "mode: 'traning' is not one of inference, training (did you mean"),
])
def test_a_wrong_value_is_one_line_naming_the_key_the_value_and_what_is_allowed(target, message):
    with pytest.raises(CampaignError, match="^[^\n]*$") as e:
        load(target)
    assert message in str(e.value)


def test_an_option_named_like_a_program_is_refused_unless_allowed():
    from gapfuzz.fuzzer.config.backends import exec_options_allowed

    untyped = backend_class("eager")  # a stack that declares no types (as a plug-in): checked by the name
    for key, value in (("compiler_path", "/bin/sh"), ("CACHE_DIR", "/tmp"), ("custom_ops_library", ["a.so"])):
        assert "--allow-exec-options" in untyped.value_problem(key, value)
        assert untyped.value_problem(key, value, allow_exec=True) is None
    assert untyped.value_problem("compiler_path", True) is None  # a boolean names nothing
    assert "--allow-exec-options" in backend_class("openvino").value_problem("WEIGHTS_PATH", "/w.bin")
    with exec_options_allowed(True):
        c = load({"backend": "inductor@cpu", "options": {"cpp.cxx": ["g++"]}})
    assert c.backends.targets[0].options == {"cpp.cxx": ["g++"]}
    with pytest.raises(CampaignError, match="--allow-exec-options"):
        load({"backend": "inductor@cpu", "options": {"cpp.cxx": ["g++"]}})


def test_an_option_space_too_large_is_refused_from_its_sizes_in_well_under_30_s():
    t0 = time.monotonic()
    with pytest.raises(CampaignError, match=r"option_space\.cpp\.simdlen: 190000 values, more than 32 for one option"):
        load({"backend": "inductor@cpu", "option_space": {"cpp.simdlen": list(range(190_000))}})
    with pytest.raises(CampaignError, match=r"option_space: its pairs need at least 3072 option sets, more than 2048"):
        load({"backend": "inductor@cpu", "option_cover": {"all": ["cpp.simdlen", "cpp.threads"]}, "option_space": {
            "cpp.simdlen": list(range(32)), "cpp.threads": list(range(32)), "cpp.min_chunk_size": [1, 2, 3]}})
    with pytest.raises(CampaignError, match=r"option_space: 300 options make 179400 pairs of values"):
        load({"class": "tests.stacks.option_backends:OptionTanh",
              "option_space": {f"o{i}": [0, 1] for i in range(300)}})
    assert time.monotonic() - t0 < 10


@pytest.mark.parametrize("env, message", [
    ({"PYTHONPATH": "/tmp/evil"}, "pools.cpu.env.PYTHONPATH: a pool's env reaches every sandbox process"),
    ({"PYTHONSTARTUP": "/tmp/evil.py"}, "pools.cpu.env.PYTHONSTARTUP:"),
    ({"LD_PRELOAD": "/tmp/evil.so"}, "pools.cpu.env.LD_PRELOAD:"),
    ({"PYTHONHOME": "/tmp"}, "pools.cpu.env.PYTHONHOME:"),
    ({"TORCHINDUCTOR_CACHE_DIR": "/tmp/compiled"}, "pools.cpu.env.TORCHINDUCTOR_CACHE_DIR:"),
    ({"OMP_NUM_THREADS": "4; touch x"}, "pools.cpu.env.OMP_NUM_THREADS: '4; touch x' is not a number of threads"),
    ({"OMP_NUM_THREADS": "0"}, "is not a number of threads (a whole number, 1 to 4096)"),
])
def test_a_pool_env_that_could_load_code_is_refused_unless_allowed(env, message):
    """``pools.<device>.env`` reaches every sandbox process: a sitecustomize.py on a PYTHONPATH from a campaign
    file would run there. Thread counts alone are set without --allow-exec-options."""
    from gapfuzz.fuzzer.config.backends import exec_options_allowed

    given = {"seeds": [{"source": "ops"}], "backends": {"targets": ["inductor@cpu"]}, "pools": {"cpu": {"env": env}}}
    with pytest.raises(CampaignError, match="^[^\n]*$") as e:
        from_dict(given, "c.yaml")
    assert str(e.value).startswith("c.yaml: ") and message in str(e.value), str(e.value)
    if "number of threads" not in message:
        assert "--allow-exec-options" in str(e.value)
        with exec_options_allowed(True):
            assert from_dict(given, "c.yaml").pool("cpu").env == env  # the user said so


def test_a_pool_env_of_thread_counts_is_kept_and_a_name_no_environment_takes_is_refused_even_when_allowed():
    from gapfuzz.fuzzer.config.backends import exec_options_allowed

    threads = {"OMP_NUM_THREADS": "2", "TORCHINDUCTOR_COMPILE_THREADS": "8"}
    given = {"seeds": [{"source": "ops"}], "backends": {"targets": ["inductor@cpu"]}}
    assert from_dict({**given, "pools": {"cuda": {"env": threads}}}, "c.yaml").pool("cuda").env == threads
    for env, message in (({"A=B": "1"}, "pools.cpu.env: 'A=B' is not a variable name"),
                         ({"X": "a\0b"}, "pools.cpu.env.X: its value holds a NUL character")):
        with exec_options_allowed(True), pytest.raises(CampaignError, match="^[^\n]*$") as e:
            from_dict({**given, "pools": {"cpu": {"env": env}}}, "c.yaml")
        assert message in str(e.value), str(e.value)


def test_run_and_run_check_refuse_a_pool_env_and_nothing_runs(tmp_path):
    """As a user sees it: a sitecustomize.py in the folder a campaign's PYTHONPATH names never runs."""
    evil = tmp_path / "evil"
    evil.mkdir()
    marker = tmp_path / "MARKER"
    (evil / "sitecustomize.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    path, out = tmp_path / "c.yaml", tmp_path / "run"
    path.write_text(CAMPAIGN.format(options="label: i") + f"pools: {{cpu: {{env: {{PYTHONPATH: '{evil}'}}}}}}\n")
    for args in (["--check"], ["--out", out]):
        rc, lines, seconds = gapfuzz("run", path, *args, cwd=tmp_path)
        assert rc == 2 and len(lines) == 1, lines
        assert "c.yaml: pools.cpu.env.PYTHONPATH:" in lines[0] and "--allow-exec-options" in lines[0], lines
        assert not marker.exists() and not out.exists() and seconds < 30
    assert not (tmp_path / "runs").exists()

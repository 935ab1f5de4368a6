"""Bounds on products, not only on numbers: a campaign whose counts are each within their bound but multiply into
billions of runs is one line before its plan is built (or its seeds sized), ``run --check`` says how far it is
while it sizes, every numeric option of the command line has the bound of the campaign key it stands for, and
``repro --all --against`` checks its releases before any work and hands each cluster those of its stack."""
from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from gapfuzz.core.setting import (
    MAX_COUNT,
    MAX_MEMORY_GB,
    MAX_PARAMS,
    MAX_PER_SEED,
    MAX_SECONDS,
    MAX_SEED,
    MAX_WORKERS,
    field_schema,
)
from gapfuzz.fuzzer.cli.main import COMMANDS, main
from gapfuzz.fuzzer.cli.parser import build_parser

ALL_OPS = ("name: all-ops\nseeds: [{source: ops}]\nvariants: {per_seed: 10000}\nprobes: {per_variant: 10000}\n"
           "backends: {targets: [inductor@cpu]}\n")
# one seed: within the bound until its sizes (a hundred of them, 10,000 variants each) are added
ONE_SEED = ("name: one-seed\nseeds: [{source: ops, include: [ops/sum/float32/0]}]\nvariants: {per_seed: 10000}\n"
            "probes: {per_variant: 1000}\nsizes: {per_seed: 100, variants: 10000, widths: 100}\n"
            "backends: {targets: [inductor@cpu]}\n")


def _cli(argv, capsys) -> tuple[int, str, str]:
    rc = main([str(a) for a in argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


def _never(name):
    def fail(*a, **k):
        raise AssertionError(f"{name} was called for a plan past its bound")
    return fail


# -- a plan's size


def test_every_operator_seed_at_ten_thousand_variants_is_refused_before_sizing(tmp_path, capsys, monkeypatch):
    from gapfuzz.fuzzer.config import plan

    monkeypatch.setattr(plan, "with_sizes", _never("with_sizes"))
    monkeypatch.setattr(plan, "plan", _never("plan"))
    (tmp_path / "c.yaml").write_text(ALL_OPS)
    for argv in (["run", tmp_path / "c.yaml", "--check"], ["run", tmp_path / "c.yaml", "--out", tmp_path / "run"]):
        t0 = time.monotonic()
        rc, out, err = _cli(argv, capsys)
        assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err and not out, err
        assert "plans at least" in err and "a campaign may plan at most 100,000,000 runs" in err, err
        assert time.monotonic() - t0 < 60
    assert not (tmp_path / "run").exists()


def test_one_seed_whose_sizes_multiply_past_the_bound_is_refused_before_its_plan_is_built(tmp_path, capsys,
                                                                                          monkeypatch):
    from gapfuzz.fuzzer.config import plan

    monkeypatch.setattr(plan, "plan", _never("plan"))
    (tmp_path / "c.yaml").write_text(ONE_SEED)
    rc, out, err = _cli(["run", tmp_path / "c.yaml", "--out", tmp_path / "run"], capsys)
    said = [line for line in err.splitlines() if "note:" not in line]  # the sizes a seed cannot take, as warnings
    assert rc == 2 and len(said) == 1 and "Traceback" not in err, err
    assert "c.yaml: plans " in said[0] and "at least" not in said[0] and "from 1 seed" not in said[0]
    assert not (tmp_path / "run").exists()


def test_check_counts_the_pairs_the_plan_enumerates(tmp_path):
    """``--check`` counts from the settings; ``plan`` enumerates: the same pairs per backend and mode."""
    from gapfuzz.fuzzer.config.campaign import load_campaign
    from gapfuzz.fuzzer.config.plan import check_size, pair_counts, plan, select_seeds, with_sizes

    (tmp_path / "c.yaml").write_text(
        "name: c\nmode: [inference, training]\nseeds: [{source: ops, include: ['ops/nn.functional.relu/float32/*', "
        "ops/sum/float32/0]}]\nvariants: {per_seed: 3}\nsizes: {per_seed: 1, variants: 2}\n"
        "backends: {targets: [inductor@cpu, {backend: onnxruntime@cpu, mode: inference}]}\n")
    c = load_campaign(tmp_path / "c.yaml")
    ids = with_sizes(c, select_seeds(c))
    enumerated: dict = {}
    for w in plan(c, ids, set()):
        for backends in w.missing.values():
            for b in backends:
                enumerated[(b, str(w.mode))] = enumerated.get((b, str(w.mode)), 0) + 1
    assert pair_counts(c, ids) == enumerated and ("onnxruntime@cpu", "training") not in enumerated
    check_size(c, ids)  # far within the bound


def test_check_says_how_far_it_is_while_it_sizes_seeds(tmp_path, capsys):
    from gapfuzz.fuzzer.cli.main import _planning_ticker
    from gapfuzz.fuzzer.config.campaign import load_campaign
    from gapfuzz.fuzzer.config.plan import select_seeds, with_sizes

    (tmp_path / "c.yaml").write_text("name: c\nseeds: [{source: ops, include: ['ops/sum/float32/*']}]\n"
                                     "backends: {targets: [inductor@cpu]}\n")
    c = load_campaign(tmp_path / "c.yaml")
    heard = []
    seeds = select_seeds(c)
    with_sizes(c, seeds, lambda done, total: heard.append((done, total)))
    assert heard == [(k, len(seeds)) for k in range(len(seeds))]
    tick = _planning_ticker(every_s=0.0)
    tick(5, 20)
    assert capsys.readouterr().err.startswith("planning: sizes of 5 of 20 seeds chosen (")


# -- numbers on the command line


def _bound(cls, name: str) -> float:
    import dataclasses
    import typing

    f = next(f for f in dataclasses.fields(cls) if f.name == name)
    schema = field_schema(f, typing.get_type_hints(cls)[name])
    return next((s for s in schema.get("oneOf", [schema]) if "maximum" in s), schema)["maximum"]


def test_each_numeric_option_has_the_bound_of_its_campaign_key():
    from gapfuzz.fuzzer.config.settings import CampaignFile, CaptureSettings, PoolSection, SeedSelection

    assert _bound(PoolSection, "memory_gb") == MAX_MEMORY_GB and _bound(PoolSection, "workers") == MAX_WORKERS
    assert _bound(CaptureSettings, "timeout_s") == MAX_SECONDS and _bound(CaptureSettings, "max_params") == MAX_PARAMS
    assert _bound(CampaignFile, "seed") == MAX_SEED and _bound(SeedSelection, "sample") == MAX_COUNT
    parser = build_parser(COMMANDS)
    at = parser.parse_args(["seeds", "scan", "--memory-gb", str(MAX_MEMORY_GB), "--workers", str(MAX_WORKERS),
                            "--timeout", str(MAX_SECONDS), "--max-params", str(MAX_PARAMS), "--seed", str(MAX_SEED),
                            "--sample", str(MAX_COUNT)])
    assert (at.memory_gb, at.workers, at.timeout, at.max_params, at.seed, at.sample) == \
        (MAX_MEMORY_GB, MAX_WORKERS, MAX_SECONDS, MAX_PARAMS, MAX_SEED, MAX_COUNT)


@pytest.mark.parametrize("argv, needle", [
    (["seeds", "scan", "--memory-gb", "1e300"], "--memory-gb: '1e300': a finite number above 0 and at most 1,048,576"),
    (["seeds", "scan", "--memory-gb", str(MAX_MEMORY_GB + 1)], "--memory-gb"),
    (["seeds", "scan", "--timeout", "1e12"], "--timeout: '1e12'"),
    (["seeds", "scan", "--max-params", str(MAX_PARAMS + 1)], "--max-params"),
    (["seeds", "scan", "--seed", str(MAX_SEED + 1)], "--seed"),
    (["seeds", "scan", "--sample", str(MAX_COUNT + 1)], "--sample"),
    (["seeds", "scan", "--workers", str(MAX_WORKERS + 1)], "--workers"),
    (["seeds", "scan", "--sample", "1e3"], "--sample: '1e3' is not a whole number"),
    (["repro", "run", "c-", "--budget-s", str(MAX_SECONDS + 1)], "--budget-s"),
    (["repro", "run", "c-", "--tries", str(MAX_PER_SEED + 1)], "--tries"),
    (["repro", "run", "c-", "--max-calls", str(MAX_COUNT + 1)], "--max-calls"),
    (["triage", "run", "--limit", "9" * 30], "--limit"),
    (["run", "c.yaml", "--time-budget", "0"], "--time-budget: '0': a duration above 0"),
    (["run", "c.yaml", "--time-budget", "ten minutes"], "--time-budget: 'ten minutes' is not a duration"),
    (["run", "c.yaml", "--time-budget", "1e9h"], "--time-budget: '1e9h'"),
], ids=lambda v: "-".join(v) if isinstance(v, list) else None)
def test_a_number_past_its_campaign_keys_bound_is_one_line_exit_2(argv, needle, tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1 and needle in err, err


# -- repro --all --against


def _run_folder(d, stack: str = "onnxruntime"):
    """A run folder with one vendor cluster: a compile error of ``stack``@cpu."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from gapfuzz.fuzzer.config.campaign import from_dict
    from gapfuzz.results.schema import RunRecord, arrow_schema

    (d / "records" / "x").mkdir(parents=True)
    c = from_dict({"name": "h", "seeds": [{"source": "ops", "include": ["ops/sum/float32/0"]}],
                   "backends": {"targets": [f"{stack}@cpu"]}}, "t")
    (d / "campaign.yaml").write_text(c.to_yaml())
    rec = RunRecord(campaign="h", variant_id="ops/sum/float32/0#0", seed_id="ops/sum/float32/0",
                    backend=f"{stack}@cpu", stack=stack, device="cpu", status="error", stage="compile",
                    error_type="RuntimeError", message="no kernel",
                    recipe='{"mutations":[],"rng":0,"seed":"ops/sum/float32/0"}')
    pq.write_table(pa.Table.from_pylist([rec.to_row()], schema=arrow_schema()), d / "records/x/part-1.parquet")
    return d


@pytest.mark.parametrize("given", ["onnxruntime==1.0; touch RAN", "onnxruntime", "==1.0", "onnxruntime==latest",
                                   "onnxruntime==--index-url=http://x"])
def test_repro_all_checks_its_releases_before_any_work(given, tmp_path, capsys, monkeypatch):
    from gapfuzz.fuzzer.repro import minimise

    monkeypatch.setattr(minimise, "reproduce_cluster", _never("reproduce_cluster"))
    run = _run_folder(tmp_path / "run")
    for argv in (["repro", run, "--all", "--against", given], ["repro", tmp_path / "nope", "--all", "--against", given],
                 ["repro", run, "c-", "--against", given]):
        rc, out, err = _cli(argv, capsys)
        assert rc == 2 and err.count("\n") == 1 and f"--against {given!r}: STACK==RELEASE is expected" in err, err
    assert not (run / "repros").exists() and not (tmp_path / "RAN").exists()


def test_repro_all_hands_each_cluster_the_releases_of_its_stack(tmp_path, capsys, monkeypatch):
    from gapfuzz.fuzzer.repro import minimise

    heard = []

    def fake(run_dir, cluster, out_dir=None, **kwargs):
        heard.append(kwargs.get("against"))
        return SimpleNamespace(status="reproducible", form="native", lines=9, seconds=1.0)

    monkeypatch.setattr(minimise, "reproduce_cluster", fake)
    run = _run_folder(tmp_path / "run")
    rc, out, err = _cli(["repro", run, "--all", "--against", "onnxruntime==1.33.0", "--against", "torch==2.9.0",
                         "--against", "openvino==2025.1.0"], capsys)
    assert rc == 0 and heard == [("onnxruntime==1.33.0", "torch==2.9.0")], (out, err)
    assert "note: --against 'openvino==2025.1.0': no cluster minimised here is on that stack" in out

"""Option spaces covered, not drawn: a pairwise covering array over a target's options, every value in
every mode for a seed of a few variants, counted from the records; ``draw`` as before."""
from __future__ import annotations

import json
import random
from itertools import combinations, product

import pandas as pd
import pytest

from gapfuzz.core.covering import block_length, covering_array
from gapfuzz.fuzzer.config.campaign import CampaignError, from_dict
from gapfuzz.fuzzer.recipe import variant_id
from tests.stacks.option_backends import SPACE

SEED = "ops/tanh/float32/0"
CAMPAIGN_SEED = 5  # one draw per variant gives this seed b: 2 in inference only, never in training
TARGET = {"class": "tests.stacks.option_backends:OptionTanh", "device": "cpu", "option_space": SPACE}


def _campaign(**target):
    return from_dict({"seed": CAMPAIGN_SEED, "mode": ["inference", "training"],
                      "seeds": [{"source": "ops", "include": [SEED]}],
                      "backends": {"targets": [{**TARGET, **target}]}}, "c.yaml")


def _sets(spec, seed_id: str, mode: str, n: int) -> list[dict]:
    return [spec.for_variant(variant_id(seed_id, i, mode), CAMPAIGN_SEED, seed_id, i, mode).options for i in range(n)]


def _pairs(rows, together=()) -> bool:
    n, levels = len(rows[0]), [max(r[i] for r in rows) + 1 for i in range(len(rows[0]))]
    return all(any(r[i] == a and r[j] == b for r in rows) for i, j in combinations(range(n), 2)
               for a in range(levels[i]) for b in range(levels[j]))


# levels -> most rows: the least any array has is the two largest level counts multiplied (6, 6, 20, 9; 12
# binary options: 7); blocks that each hold every value cost a few more
@pytest.mark.parametrize("levels, most", [((2, 3, 2, 2), 9), ((2, 2, 2, 2, 2, 3, 2), 9), ((4, 3, 2, 5), 20),
                                          ((3, 3, 3, 3), 15), ((2,) * 12, 12)])
def test_the_array_covers_every_pair_of_mixed_levels_each_block_every_value_and_is_deterministic(levels, most):
    rows = covering_array.__wrapped__(levels, (), "0|stack")
    assert rows == covering_array.__wrapped__(levels, (), "0|stack")  # not the cache's doing
    assert _pairs(rows) and all(0 <= v < n for r in rows for v, n in zip(r, levels))
    block = block_length(levels)
    assert len(rows) % block == 0
    for start in range(0, len(rows), block):
        assert all({r[i] for r in rows[start:start + block]} == set(range(n)) for i, n in enumerate(levels))
    assert len(rows) <= most  # (2, 2, 2, 2, 2, 3, 2): campaigns/inductor.yaml's space, three blocks


def test_all_covers_every_combination_of_the_chosen_options_or_of_every_option():
    levels = (2, 2, 3, 2)
    rows = covering_array(levels, (0, 3), "s")
    assert _pairs(rows)
    for other in (1, 2):  # freezing x dynamic, say, in every combination with every value of each other option
        assert {(r[0], r[3], r[other]) for r in rows} == set(product(range(2), range(2), range(levels[other])))
    every = covering_array(levels, (0, 1, 2, 3), "s")
    assert set(every) == set(product(*(range(n) for n in levels)))


def test_a_seed_of_three_variants_runs_every_value_in_each_mode_and_a_seed_of_enough_every_pair():
    spec = _campaign().backends.targets[0]
    assert spec.option_cover == "pairs"
    values = {(k, json.dumps(v)) for k, vs in SPACE.items() for v in vs}
    for seed_id in (SEED, "ops/sin/float32/0", "timm/test_vit"):
        modes = {m: _sets(spec, seed_id, m, 3) for m in ("inference", "training")}
        for sets in modes.values():
            assert {(k, json.dumps(s.get(k))) for s in sets for k in SPACE} == values
        assert modes["inference"] != modes["training"]  # another block: more pairs for the seed
        assert modes == {m: _sets(spec, seed_id, m, 3) for m in modes}  # as a resumed campaign gets them
    rows = len(covering_array(tuple(len(SPACE[k]) for k in sorted(SPACE)), (), f"{CAMPAIGN_SEED}|{spec.name}"))
    for mode in ("inference", "training"):
        sets = _sets(spec, SEED, mode, rows)
        assert _pairs([tuple(list(SPACE[k]).index(s[k]) for k in sorted(SPACE)) for s in sets])


def test_draw_is_one_random_draw_per_variant_as_before_and_misses_the_planted_value_here():
    spec = _campaign(option_cover="draw").backends.targets[0]
    for mode in ("inference", "training"):
        for i in range(3):
            vid = variant_id(SEED, i, mode)
            rng = random.Random(f"{CAMPAIGN_SEED}|{spec.name}|{vid}")
            assert spec.for_variant(vid, CAMPAIGN_SEED, SEED, i, mode).options == {
                k: rng.choice(list(v)) for k, v in sorted(SPACE.items())}
    assert 2 in {s["b"] for s in _sets(spec, SEED, "inference", 3)}
    assert 2 not in {s["b"] for s in _sets(spec, SEED, "training", 3)}  # what the campaign test relies on


@pytest.mark.parametrize("cover, message", [
    ("pair", r"targets\[0\].option_cover: unknown cover 'pair' \(did you mean 'pairs'\?\)"),
    ({"al": ["a"]}, r"option_cover: unknown key 'al' \(did you mean 'all'\?\)"),
    ({"all": ["bb"]}, r"option_cover.all: 'bb' is not in the option_space \(did you mean 'b'\?\)"),
    ({"all": []}, r"option_cover.all: a list of option names"),
])
def test_a_bad_option_cover_is_one_line_naming_the_key(cover, message):
    with pytest.raises(CampaignError, match=message):
        _campaign(option_cover=cover)


def test_option_cover_needs_a_space_and_all_a_space_it_can_run():
    with pytest.raises(CampaignError, match="no option_space to cover"):
        from_dict({"seeds": [{"source": "ops"}], "backends": {"targets": [
            {"class": TARGET["class"], "device": "cpu", "option_cover": "all"}]}}, "c.yaml")
    assert _campaign(option_cover={"all": ["d", "a"]}).backends.targets[0].option_cover == {"all": ["a", "d"]}
    wide = {f"o{i}": [0, 1, 2] for i in range(7)}  # 3^7 = 2187 combinations
    with pytest.raises(CampaignError, match="option_cover: all of o0, .* is 2187 combinations, more than 1024"):
        from_dict({"seeds": [{"source": "ops"}], "backends": {"targets": [
            {"class": "tests.stacks.planted_backward:WrongTanhBackward", "device": "cpu", "option_space": wide,
             "option_cover": "all"}]}}, "c.yaml")


def test_coverage_counts_the_pairs_the_records_ran():
    from gapfuzz.analysis.option_cover import pair_coverage, values_run

    space = {"a": [0, 1], "b": [None, 1]}

    def rec(mode, options, version="1.0", backend="s@cpu"):
        return {"backend": backend, "seed_id": "x", "mode": mode, "backend_options": json.dumps(options),
                "backend_version": version}
    df = pd.DataFrame([rec("inference", {"a": 0}), rec("inference", {"a": 1, "b": 1}),
                       rec("inference", {"a": 1, "b": 1}),
                       rec("inference", {"a": 1}, version=""),  # never ran on a worker: no option set
                       rec("training", {"a": 0, "b": 1}), rec("inference", {"a": 1}, backend="other@cpu")])
    got = pair_coverage(df, {"s@cpu": space}).set_index("mode")
    assert got.loc["inference", ["sets", "pairs", "of", "values", "of_values"]].tolist() == [2, 2, 4, 4, 4]
    assert got.loc["training", ["sets", "pairs", "of", "values"]].tolist() == [1, 1, 4, 2]
    assert pair_coverage(df, {"s@cpu": space}, ()).iloc[0][["pairs", "of"]].tolist() == [3, 4]
    values = values_run(df, {"s@cpu": space}).set_index(["mode", "option"])
    assert values.loc[("training", "b"), "missing"] == ["null"] and values.loc[("inference", "b"), "missing"] == []


CAMPAIGN = f"""
name: option-cover
seed: {CAMPAIGN_SEED}
mode: [inference, training]
seeds:
  - {{source: ops, include: ["{SEED}"]}}
variants: {{per_seed: 3, mutations: 1, mutators: [semantic]}}
sizes: {{per_seed: 0, widths: 0}}
probes: {{per_variant: 2}}
backends:
  targets:
    - class: "tests.stacks.option_backends:OptionTanh"
      device: cpu
      option_space: {{a: [0, 1], b: [0, 1, 2], c: [false, true], d: [x, y]}}
pools: {{cpu: {{workers: 2}}}}
run: {{repeats: 1}}
"""


@pytest.mark.ray
def test_a_fault_behind_one_value_in_training_is_found_by_one_seed_as_one_cluster(tmp_path, local_ray):
    from gapfuzz.analysis.report_tables import option_runs
    from tests.conftest import run_campaign

    run = run_campaign(CAMPAIGN, tmp_path / "run")
    records = run.records(["backend", "mode", "status", "backend_options"])
    mine = records[records["backend"] == "option-tanh@cpu"]
    wrong = mine[mine["status"] == "mismatch"]
    assert len(wrong) and (wrong["mode"] == "training").all()
    assert all(o["b"] == 2 for o in wrong["backend_options"])  # a mapping: the nested column's value
    found = run.clusters()
    assert len(found) == 1, found[["cluster", "symptom", "first_div_op", "modes"]]
    assert found.iloc[0]["modes"] == ["training"] and "b=2" in found.iloc[0]["shared_options"]
    cover = run.option_coverage()
    assert (cover["values"] == cover["of_values"]).all() and set(cover["mode"]) == {"inference", "training"}
    shown = option_runs(run)["option-tanh@cpu"]
    assert "b: 0, 1, 2" in shown["values run"] and "training: " in shown["pairs run"]

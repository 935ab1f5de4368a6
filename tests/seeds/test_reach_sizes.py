"""Sizes along the dimension an operator works along, and widths that reach a matrix product's contraction."""
from __future__ import annotations

import pytest
import torch

from gapfuzz.core.ids import SeedId
from gapfuzz.seeds import create_seed

LONG = """
name: long
seed: 0
seeds:
  - {source: ops, include: ["ops/softmax/float32/*", "ops/softmax.with_dtype/float32/1"]}
variants: {per_seed: 1}
probes: {per_variant: 2}
backends:
  targets: [{class: "tests.stacks.size_backends:LongReduction", device: cpu}]
pools: {cpu: {workers: 2}}
run: {repeats: 1}
"""


def test_a_softmax_and_a_cumsum_along_dim_0_are_rebuilt_with_that_dim_at_n():
    soft = create_seed("ops/softmax/float32/1@d4097")  # a 5x5 sample: 4097x4097 would pass the cap
    assert [tuple(t.shape) for t in soft.args] == [(4097, 5)] and soft.info.extra["along"] == 4097
    assert soft.info.extra["along_dims"] == [[0, 0]]
    assert torch.allclose(soft.model(*soft.args).sum(0), torch.ones(5), atol=1e-5)  # normalised along dim 0
    scan = create_seed("ops/cumsum/float32/1@d2049")  # dim=1 of a 5x5x5 sample
    assert [tuple(t.shape) for t in scan.args] == [(5, 2049, 5)]
    assert create_seed("ops/cumsum/float32/0@d1025").args[0].shape == (1025, 5, 5)


def test_a_matrix_product_width_resizes_its_contraction():
    mm = create_seed("ops/mm/float32/0@w4098")
    (a, b), out = mm.args, mm.model(*mm.args)
    assert a.shape[1] == b.shape[0] == 4098 and out.shape == (a.shape[0], b.shape[1])
    assert a.numel() <= 2**20 and a.shape[0] > 100  # the rows shrunk to fit, not to the sample's 5
    addmm = create_seed("ops/addmm/float32/1@w2050")  # bias first: the contraction is the 2nd and 3rd tensor's
    assert addmm.args[1].shape[1] == addmm.args[2].shape[0] == 2050
    linear = create_seed("ops/nn.functional.linear/float32/0@w2050")  # the weight contracts its last dim
    assert linear.args[0].shape[-1] == linear.args[1].shape[-1] == 2050


def test_a_campaign_draws_the_operators_own_dimension_past_every_block_length():
    from gapfuzz.fuzzer.config.campaign import from_dict
    from gapfuzz.fuzzer.config.plan import select_seeds, with_sizes

    c = from_dict({"seeds": [{"source": "ops", "include": ["ops/softmax/float32/*", "ops/sum/float32/1"]}],
                   "backends": {"targets": ["inductor@cpu"]}, "sizes": {"per_seed": 1}})
    along = [SeedId.parse(i) for i in with_sizes(c, select_seeds(c)) if SeedId.parse(i).along is not None]
    assert [(a.base, a.along) for a in along] == [("ops/softmax/float32/1", 4097)]  # 0: 1-D; sum/1: a scalar


@pytest.mark.slow  # 40-110 s; a faster test of the default set guards its main behaviour
@pytest.mark.ray
def test_a_softmax_that_reads_one_block_along_its_dim_is_found_only_along_that_dim(tmp_path, local_ray):
    from tests.conftest import run_campaign

    run = run_campaign(LONG, tmp_path / "long")
    runs = run.records()
    mine = runs[runs["backend"] == "long-reduction@cpu"]
    wrong = set(mine[mine["status"] == "mismatch"]["seed_id"])
    assert wrong and all(SeedId.parse(s).along > 2048 for s in wrong), sorted(set(mine["seed_id"]))
    assert {SeedId.parse(s).base for s in wrong} == {"ops/softmax/float32/1", "ops/softmax.with_dtype/float32/1"}
    assert (mine[~mine["seed_id"].isin(wrong)]["status"] == "ok").all()  # main sizes and widths stay below 2048
    found = run.clusters(vendor=True)
    assert len(found) == 1 and found.iloc[0]["first_div_op"] == "aten.softmax.int", found


TAIL = """
name: tail
seed: 0
seeds:
  - {source: timm, include: [test_convnext]}
variants: {per_seed: 1}
sizes: {per_seed: 0}  # widths as by default: one per seed, handed out 2050 first
probes: {per_variant: 1}
backends:
  targets: [{class: "tests.stacks.size_backends:TailMatmul", device: cpu}]
pools: {cpu: {workers: 2}}
run: {repeats: 1}
"""


@pytest.mark.slow
@pytest.mark.ray
def test_a_matrix_product_that_drops_its_tail_past_2048_is_found_in_a_model_by_the_default_widths(tmp_path, local_ray):
    from tests.conftest import run_campaign

    run = run_campaign(TAIL, tmp_path / "tail")
    runs = run.records()
    mine = runs[runs["backend"] == "tail-matmul@cpu"]
    assert set(mine[mine["status"] == "mismatch"]["seed_id"]) == {"timm/test_convnext@w2050"}
    assert (mine[mine["seed_id"] == "timm/test_convnext"]["status"] == "ok").all()
    found = run.clusters(vendor=True)
    assert len(found[found["backends"].map(lambda b: "tail-matmul@cpu" in b)]) == 1

"""Matrix products get tails on every operand form: a size, a width or a length along the contraction
resizes it in both operands together (``bmm`` at 2049 runs), every product seed's width draw holds a
tail past 2048 that is not a multiple of 32, a batched ``matmul`` and a contracting ``einsum`` are
seeds, and a stack that drops the contraction's tail is found as one cluster with the defaults. Sized
integer seeds get a mutated variant, and an integer reduction's seed reduces 17 elements."""
from __future__ import annotations

import pytest
import torch

from gapfuzz.core.ids import SeedId
from gapfuzz.seeds import create_seed, list_seeds
from gapfuzz.seeds.sizes import tail_past_wide

PRODUCTS = ["ops/bmm/float32/*", "ops/baddbmm/float32/*", "ops/matmul/float32/*", "ops/einsum/float32/*",
            "ops/tensordot/float32/*", "ops/mm/float32/*"]


def _campaign(include: list[str], **extra):
    from gapfuzz.fuzzer.config.campaign import from_dict

    return from_dict({"seeds": [{"source": "ops", "include": include}], "backends": {"targets": ["inductor@cpu"]},
                      **extra})


@pytest.mark.parametrize("seed_id, shapes", [
    ("ops/bmm/float32/0@2049", [(10, 5, 2049), (10, 2049, 5)]),  # before: one operand alone, refused
    ("ops/baddbmm/float32/0@2049", [(5, 5, 2049), (5, 5, 5), (5, 5, 2049)]),  # the bias's columns and b's
    ("ops/baddbmm/float32/0@d4097", [(5, 5, 10), (5, 5, 4097), (5, 4097, 10)]),
    ("ops/matmul/float32/11@2049", [(5, 5, 10, 2049), (5, 5, 2049, 5)]),
    ("ops/einsum/float32/5@2049", [(1, 2, 2049), (1, 2049, 4)]),  # aij,ajk->aik: j in both
    ("ops/tensordot/float32/0@2049", [(2, 2, 2049), (2, 2049, 2)]),  # dims=2: the innermost pair
    ("ops/tensordot/float32/1@d2049", [(2, 2049, 1), (2049, 1, 2)]),  # dims=([0, 1], [2, 0])
])
def test_a_product_is_rebuilt_with_both_operands_of_its_contraction_at_the_size(seed_id, shapes):
    seed = create_seed(seed_id)
    assert [tuple(t.shape) for t in seed.args] == shapes
    out = seed.model(*seed.args)
    assert isinstance(out, torch.Tensor) and out.numel() > 0


def test_the_listing_holds_a_batched_matmul_and_contracting_einsums():
    ids = set(list_seeds("ops/matmul/float32/*") + list_seeds("ops/einsum/float32/*"))
    assert {"ops/matmul/float32/11", "ops/einsum/float32/3", "ops/einsum/float32/5"} <= ids
    assert [tuple(t.shape) for t in create_seed("ops/matmul/float32/11").args] == [(5, 5, 10, 10), (5, 5, 10, 5)]


def test_every_product_seed_takes_a_tail_past_2048_as_its_width_and_the_others_keep_their_turn():
    from gapfuzz.fuzzer.config.plan import select_seeds, with_sizes

    c = _campaign(PRODUCTS + ["ops/sum/float32/*", "ops/softmax/float32/*"])  # the default sizes and widths
    ids = [SeedId.parse(i) for i in with_sizes(c, select_seeds(c))]
    widths = {i.base: i.width for i in ids if i.width is not None}
    products = [b for b in widths if not b.startswith(("ops/sum/", "ops/softmax/"))]
    assert len(products) >= 10 and all(tail_past_wide(widths[b]) for b in products), widths
    others = [widths[b] for b in widths if b not in products]
    assert others == [2050, 2048, 4098, 4096][: len(others)], others  # the source's turn, as before


def test_a_rebuilt_integer_seed_gets_a_mutated_variant_and_a_float_one_does_not():
    from gapfuzz.fuzzer.config.plan import plan, select_seeds, with_sizes

    c = _campaign(["ops/argmax/int16/0", "ops/argmax/float32/0", "ops/logical_and/bool/0"])
    ids = with_sizes(c, select_seeds(c))
    counts = {w.seed_id: len(w.indices) for w in plan(c, ids, set())}
    sized = {i: n for i, n in counts.items() if SeedId.parse(i).rebuilt}
    assert {n for i, n in sized.items() if "/float32/" in i} == {1}
    assert {n for i, n in sized.items() if "/float32/" not in i} == {2}
    assert any(SeedId.parse(i).size >= 16 for i in sized if "/int16/" in i)  # a reduction past 16 elements
    off = _campaign(["ops/argmax/int16/0"], variants={"per_seed": 1, "mutators": []})
    assert {len(w.indices) for w in plan(off, with_sizes(off, select_seeds(off)), set())} == {1}


@pytest.mark.parametrize("seed_id, shape", [("ops/argmax/int16/0", (17,)), ("ops/argmin/int16/1", (17,)),
                                            ("ops/max.reduction_with_dim/int16/0", (5, 17, 5)),  # dim=1
                                            ("ops/argmax/float32/0", ()), ("ops/argmax/int16/0@5", (5,))])
def test_an_integer_reductions_seed_reduces_17_elements_and_its_other_seeds_are_as_drawn(seed_id, shape):
    seed = create_seed(seed_id)
    assert tuple(seed.args[0].shape) == shape


def test_inductors_int16_abs_then_argmax_defect_needs_the_lengthened_seed():
    """Inductor fails to compile argmax(abs(x)) of an int16 vector, and compiles it on a scalar."""
    def chain(x):
        return torch.argmax(torch.abs(x))

    long, short = create_seed("ops/argmax/int16/0").args[0], torch.tensor(3, dtype=torch.int16)
    torch.compile(chain, backend="inductor")(short)
    try:
        torch.compile(chain, backend="inductor")(long)
    except Exception as e:  # noqa: BLE001 - Inductor wraps the C++ compiler's error
        assert "compile" in str(e).lower(), e
    else:
        pytest.skip(f"torch {torch.__version__} compiles int16 abs then argmax: the defect is fixed")


TAIL = """
name: gemm-tail
seed: 0
seeds:
  - {source: ops, include: ["ops/bmm/float32/0", "ops/einsum/float32/5", "ops/matmul/float32/11",
                            "ops/baddbmm/float32/0", "ops/add/float32/0"]}
variants: {per_seed: 1}
probes: {per_variant: 2}
backends:
  targets: [{class: "tests.stacks.product_backends:TailGemm", device: cpu}]
pools: {cpu: {workers: 2}}
run: {repeats: 1}
"""


@pytest.mark.slow  # about a minute on two cores
@pytest.mark.ray
def test_a_stack_that_drops_the_contractions_tail_is_found_as_one_cluster_by_the_defaults(tmp_path, local_ray):
    from tests.conftest import run_campaign

    run = run_campaign(TAIL, tmp_path / "tail")
    runs = run.records()
    mine = runs[runs["backend"] == "tail-gemm@cpu"]
    wrong = set(mine[mine["status"] == "mismatch"]["seed_id"])
    assert {SeedId.parse(s).base for s in wrong} == {"ops/bmm/float32/0", "ops/einsum/float32/5",
                                                     "ops/matmul/float32/11", "ops/baddbmm/float32/0"}, wrong
    assert all(SeedId.parse(s).rebuilt for s in wrong)  # never at the samples' own sizes
    found = run.clusters()
    assert len(found[found["backends"].map(lambda b: "tail-gemm@cpu" in b)]) == 1, found

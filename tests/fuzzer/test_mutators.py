"""Mutators are pure passes: new graph, old one untouched, valid on the reference, replayable."""
from __future__ import annotations

import random
from collections import Counter

import pytest
import torch

from gapfuzz.fuzzer.builds import BuildRequest
from gapfuzz.fuzzer.config.settings import VariantSettings
from gapfuzz.fuzzer.generate import build_seed_variants, replay
from gapfuzz.fuzzer.guidance import Chooser, Feedback
from gapfuzz.fuzzer.mutators import get_mutator, list_mutators, mutator_table, resolve_mutators
from gapfuzz.fuzzer.validate import evaluate
from gapfuzz.seeds import create_seed
from gapfuzz.seeds.capture import capture
from gapfuzz.workers.backends.eager import EagerFp64

FAMILIES = {"structure", "substitution", "injection", "numeric", "precision", "semantic"}


@pytest.fixture(scope="module")
def bases():
    out = {}
    for sid in ("timm/test_vit", "timm/test_resnet", "timm/test_convnext", "ops/softmax/float32/0", "ops/amax/int16/0"):
        v = capture(create_seed(sid)).variant
        out[sid] = evaluate(v)
    return out


def test_at_least_twenty_mutators_over_six_families():
    table = mutator_table()
    assert len(table) >= 20
    assert {fam for _, fam, _, _ in table} == FAMILIES
    assert any(keep for *_, keep, _ in [(n, f, k, d) for n, f, k, d in table])


@pytest.mark.parametrize("name", list_mutators())
def test_every_mutator_applies_somewhere_and_leaves_its_input_alone(bases, name):
    mutator = get_mutator(name)
    applied = 0
    for sid, ev in bases.items():
        before = ev.variant.graph_hash, ev.variant.weight_checksum(), ev.variant.input_checksum()
        for k in range(3):
            params = mutator.propose(ev.variant, random.Random(k))
            if params is None:
                continue
            out = mutator.apply(ev.variant, params)
            assert (ev.variant.graph_hash, ev.variant.weight_checksum(), ev.variant.input_checksum()) == before
            out.gm.graph.lint()
            evaluate(out, ev)
            EagerFp64().prepare(out.gm, out.inputs, "cpu")(*out.inputs)  # the oracle runs every variant
            applied += 1
    assert applied, f"{name} found no site in any test seed"


def test_incremental_evaluation_equals_a_full_run(bases):
    ev = bases["timm/test_convnext"]
    for name in ("insert_unary", "scale_magnitude", "conv_bias_split", "remove_node"):
        m = get_mutator(name)
        v = m.apply(ev.variant, m.propose(ev.variant, random.Random(3)))
        fast = evaluate(v, ev).outputs
        meta = {n.name: n.meta.get("tensor_meta") for n in v.gm.graph.nodes}  # reused nodes keep the parent's
        full = evaluate(v).outputs
        assert meta == {n.name: n.meta.get("tensor_meta") for n in v.gm.graph.nodes}, name
        assert all(torch.equal(a, b) or (a.isnan() == b.isnan()).all() for a, b in zip(fast, full)), name
        assert all(torch.equal(a, b) for a, b in zip(full, [t for t in v.gm(*v.inputs)])), name


def _build(seed_id: str, indices: list[int], campaign_seed: int, mutators: list[str], include_seed: bool = True,
           tolerances=None):
    settings = VariantSettings(per_seed=len(indices), include_seed=include_seed, mutations=2, mutators=mutators,
                               exclude_mutators=[], guidance="uniform", max_tries=8)
    return build_seed_variants(BuildRequest(seed_id, indices, settings, campaign_seed, None, tolerances=tolerances))


def test_recipes_replay_to_the_same_graph_weights_and_inputs():
    from gapfuzz.core.ir import Variant

    result = _build("timm/test_convnext", [0, 1, 2, 3], 7, list_mutators())
    assert result.ok and [v.index for v in result.variants] == [0, 1, 2, 3]
    made = {v.variant_id: Variant.from_payload(result.payloads[v.variant_id]) for v in result.variants}
    assert len({(v.graph_hash, made[v.variant_id].weight_checksum(), made[v.variant_id].input_checksum())
                for v in result.variants}) == 4  # a mutation of weights or inputs alone keeps the graph's hash
    for v in result.variants:
        again = replay(v.recipe)
        assert again.graph_hash == v.graph_hash
        w = Variant.from_payload(result.payloads[v.variant_id])
        assert again.weight_checksum() == w.weight_checksum() and again.input_checksum() == w.input_checksum()
    again = _build("timm/test_convnext", [1], 7, list_mutators())
    assert again.variants[0].recipe == result.variants[1].recipe


def test_semantics_preserving_variants_agree_with_their_seed():
    keep = [n for n, _, k, _ in mutator_table() if k]
    result = _build("timm/test_vit", list(range(6)), 3, keep, include_seed=False)
    checked = [v for v in result.variants if v.metamorphic_ok is not None]
    assert checked and all(v.metamorphic_ok for v in checked)
    # metamorphic_err is the campaign's tolerance ratio, as the judge computes it: ten times the tolerance, a tenth
    from gapfuzz.core.tolerances import DEFAULT_TOLERANCES, Tolerances

    loose = Tolerances({k: (r * 10, a * 10) for k, (r, a) in DEFAULT_TOLERANCES.items()})
    again = _build("timm/test_vit", list(range(6)), 3, keep, include_seed=False, tolerances=loose)
    ratios = [(v.metamorphic_err, w.metamorphic_err) for v, w in zip(result.variants, again.variants)
              if v.metamorphic_err]
    assert ratios and all(w == pytest.approx(v / 10, rel=1e-6) for v, w in ratios), ratios


def test_mutator_selection_by_glob_and_family():
    assert resolve_mutators(["replace_*"]) == ["replace_activation"]
    assert set(resolve_mutators(["structure"])) >= {"replace_activation", "insert_unary"}
    assert "insert_unary" not in resolve_mutators(["*"], ["insert_*"])


def test_mcmc_and_coverage_guidance_favour_mutators_that_found_something():
    names = ["insert_unary", "replace_activation", "inject_binary", "inject_op"]
    a, d = names[0], names[-1]
    fb = Feedback(names)
    for _ in range(20):
        fb.update([[a, {}]], ["aten.sin.default"], [("x@cpu", "crash", f"k{_}")])
        fb.update([[d, {"op": "cumsum"}]], ["aten.sin.default"], [("x@cpu", "ok", None)])
    assert fb.scores()[a] > 0.9 > 0.1 > fb.scores()[d]
    for mode in ("mcmc", "coverage"):
        chooser = Chooser(names, fb.snapshot(mode))
        picks = Counter(chooser.choose(random.Random(i)) for i in range(400))
        assert picks[a] > picks[d], mode
    weights = fb.snapshot("coverage").choice_weights["inject_op"]  # the op pool: least used first
    assert weights["flip"] > weights["cumsum"] and set(weights) == set(get_mutator("inject_op").choices())
    uniform = Counter(Chooser(names, None).choose(random.Random(i)) for i in range(400))
    assert min(uniform.values()) > 60

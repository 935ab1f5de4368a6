"""Mutators are pure passes: they return a new graph, leave the old one alone, and replay."""
from __future__ import annotations

import random

import pytest

from fuzzer.generate import build_seed_variants, replay, run_reference
from fuzzer.mutators import get_mutator, list_mutators, resolve_mutators
from fuzzer.recipe import Recipe


@pytest.mark.parametrize("name", ["replace_activation", "insert_unary"])
def test_mutation_returns_new_graph_and_leaves_input_alone(captured_vit, name):
    base = captured_vit.variant
    run_reference(base)
    before = base.graph_hash
    mutator = get_mutator(name)
    params = mutator.propose(base, random.Random(1))
    assert params is not None
    out = mutator.apply(base, params)
    assert base.graph_hash == before
    assert out.graph_hash != before
    out.gm.graph.lint()
    run_reference(out)


def test_recipes_replay_to_the_same_graph():
    gen = {"include_seed": True, "mutations": 2, "max_tries": 8}
    result = build_seed_variants("timm/test_convnext", [0, 1, 2], gen, 7, list_mutators(), None)
    assert result["status"] == "ok"
    hashes = {v["graph_hash"] for v in result["variants"]}
    assert len(hashes) == 3
    for v in result["variants"]:
        assert replay(Recipe.from_json(v["recipe"])).graph_hash == v["graph_hash"]
    again = build_seed_variants("timm/test_convnext", [1], gen, 7, list_mutators(), None)
    assert again["variants"][0]["recipe"] == result["variants"][1]["recipe"]


def test_mutator_selection_by_glob_and_family():
    assert resolve_mutators(["replace_*"]) == ["replace_activation"]
    assert set(resolve_mutators(["structure"])) >= {"replace_activation", "insert_unary"}
    assert "insert_unary" not in resolve_mutators(["*"], ["insert_*"])

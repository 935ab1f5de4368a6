"""Mutation reaches integer and bool graphs: every op of ``dtype_ops`` keeps the graph valid for its
dtype, operator seeds of every dtype grow into chains, a variant no mutator can change is skipped and
counted rather than run as its seed again, and a fault only an int16 elementwise-then-reduce chain
reaches is found with the defaults."""
from __future__ import annotations

import random

import pandas as pd
import pytest
import torch

from gapfuzz.core.ir import Variant
from gapfuzz.fuzzer.builds import BuildRequest
from gapfuzz.fuzzer.config.settings import VariantSettings
from gapfuzz.fuzzer.generate import build_seed_variants
from gapfuzz.fuzzer.mutators import get_mutator, list_mutators
from gapfuzz.fuzzer.mutators.dtype_ops import OPS, kind_of, ops_for
from gapfuzz.fuzzer.validate import evaluate
from gapfuzz.seeds import create_seed
from gapfuzz.seeds.capture import capture
from tests.conftest import run_campaign
from tests.stacks.integer_backends import narrow_chains

SEEDS = {"int": "ops/amax/int16/0", "bool": "ops/logical_and/bool/0", "float": "ops/add/float32/0"}


@pytest.fixture(scope="module")
def bases():
    return {kind: evaluate(capture(create_seed(seed)).variant) for kind, seed in SEEDS.items()}


def _sites(variant: Variant, kind: str):
    inputs = [n for n in variant.gm.graph.nodes if n.op == "placeholder"]
    out = next(n for n in variant.gm.graph.nodes if n.op == "output").all_input_nodes
    return [n for n in (*inputs, *out) if kind_of(n.meta["tensor_meta"].dtype) == kind]


@pytest.mark.parametrize("kind", ["int", "bool", "float"])
def test_every_op_keeps_shape_dtype_and_a_valid_graph_at_an_input_and_an_output(bases, kind):
    base = bases[kind]
    shapes = [(tuple(o.shape), o.dtype) for o in base.outputs]
    mutator = get_mutator("grow_chain")
    for name in ops_for(kind):
        for site in _sites(base.variant, kind):
            tm = site.meta["tensor_meta"]
            extra = OPS[name].draw(tm.dtype, tuple(tm.shape), random.Random(1))
            if extra is None:
                continue
            v = mutator.apply(base.variant, {"node": site.name, "op": name, **extra})
            ev = evaluate(v, base)
            assert [(tuple(o.shape), o.dtype) for o in ev.outputs] == shapes, (name, site.name)
            back = Variant.from_payload(v.to_payload())  # what a worker receives
            assert all(torch.equal(a, b) for a, b in zip(back.gm(*back.inputs), ev.outputs)), name


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64])
def test_constants_fit_the_dtype(dtype):
    rng = random.Random(0)
    info = torch.iinfo(dtype)
    for _ in range(200):
        assert 0 <= OPS["lshift"].draw(dtype, (4,), rng)["c"] < info.bits
        assert OPS["floor_div"].draw(dtype, (4,), rng)["c"] not in (0, -1)
        assert OPS["remainder"].draw(dtype, (4,), rng)["c"] != 0
        bounds = OPS["clamp"].draw(dtype, (4,), rng)
        assert info.min <= bounds["lo"] < bounds["hi"] <= info.max
        assert info.min <= OPS["xor"].draw(dtype, (4,), rng)["c"] <= info.max
    assert OPS["amax"].draw(dtype, (), rng) is None and OPS["amax"].draw(dtype, (3, 0), rng) is None


def _build(seed_id: str, per_seed: int, mutations: int, mutators=None):
    settings = VariantSettings(per_seed, include_seed=False, mutations=mutations, mutators=mutators or list_mutators(),
                               exclude_mutators=[], guidance="uniform", max_tries=8)
    build = build_seed_variants(BuildRequest(seed_id, list(range(per_seed)), settings, 0, None, use_cache=False))
    assert build.ok, build.failure
    return build


def test_narrow_integer_reductions_are_all_mutated_and_grow_chains():
    """Before: 0 of 64 variants of int16 argmin, argmax, amin and amax seeds carried a mutation."""
    chains = 0
    for seed_id in ("ops/argmin/int16/0", "ops/argmax/int16/0", "ops/amin/int16/0", "ops/amax/int16/0"):
        build = _build(seed_id, 8, 2)
        assert all(v.recipe.mutations and not v.unmutated for v in build.variants), seed_id
        for v in build.variants:
            variant = Variant.from_payload(build.payloads[v.variant_id])
            chains += bool(narrow_chains(variant.gm, variant.inputs))
    assert chains >= 2, chains  # an elementwise op feeding the reduction, as NNSmith's defect needs


def test_a_variant_no_mutator_changes_is_marked_unmutated_and_carries_no_payload():
    build = _build("ops/add/float32/0", 2, 1, ["insert_integer"])  # a floating graph: no integer site
    assert [v.unmutated for v in build.variants] == [True, True] and not build.payloads


def test_unmutated_share_per_dtype():
    from gapfuzz.analysis.triage import render_unmutated, unmutated_by_dtype

    df = pd.DataFrame({
        "variant_id": ["ops/a/int16/0#0", "ops/a/int16/0#1", "ops/a/int16/0#1", "ops/b/bool/0#1", "timm/x#1"],
        "seed_id": ["ops/a/int16/0", "ops/a/int16/0", "ops/a/int16/0", "ops/b/bool/0", "timm/x"],
        "status": ["ok", "skipped", "skipped", "ok", "ok"], "stage": [None, "mutate", "mutate", None, None],
        "mutations": [[], [], [], ["insert_integer"], ["insert_unary"]]})
    t = unmutated_by_dtype(df)
    assert t.loc["int16", "meant"] == 1 and t.loc["int16", "none"] == 1 and t.loc["bool", "none"] == 0
    assert render_unmutated(df) == ("variants that carried no mutation (skipped), per dtype: bool 0/1, int16 1/1, "
                                    "model 0/1")


# ---------------------------------------------------------------- campaigns
CAMPAIGN = """
name: narrow
seed: 0
seeds:
  - {source: ops, include: ["ops/amax/int16/*", "ops/argmax/int16/*", "ops/amin/int8/*"]}
variants: {per_seed: 4, mutations: 1}
sizes: {per_seed: 0, widths: 0}
backends:
  targets:
    - {class: "tests.stacks.integer_backends:NarrowPromotion", device: cpu}
    - {class: "tests.stacks.integer_backends:NarrowPromotion", device: cpu, label: narrow-clean,
       options: {faults: false}}
pools: {cpu: {workers: 2}}
run: {repeats: 1}
"""


@pytest.mark.slow  # 40-110 s; a faster test of the default set guards its main behaviour
@pytest.mark.ray
def test_a_fault_an_int16_chain_reaches_is_found_with_the_defaults_and_unmutated_variants_are_skipped(tmp_path,
                                                                                                       local_ray):
    run = run_campaign(CAMPAIGN, tmp_path / "run")
    floats = CAMPAIGN.replace('"ops/amax/int16/*", "ops/argmax/int16/*", "ops/amin/int8/*"', '"ops/add/float32/0"')
    floats = run_campaign(floats.replace("mutations: 1}", "mutations: 1, mutators: [insert_integer]}"),
                          tmp_path / "floats")
    found = run.clusters()
    shown = found[["cluster", "kind", "template", "backends", "count"]]
    assert len(found) >= 1 and all(b == ["narrow-promotion@cpu"] for b in found["backends"]), shown
    assert found["template"].str.contains("invalid conversion").all(), shown
    records = run.records(["variant_id", "backend", "status", "stage"])
    clean = records[records["backend"] == "narrow-clean@cpu"]
    assert len(clean) and (clean["status"] == "ok").all()
    skipped = floats.records(["variant_id", "backend", "status", "stage", "seed_id", "mutations"])
    mutated = skipped[~skipped["variant_id"].str.endswith("#0")]
    backends = skipped.loc[skipped["variant_id"].str.endswith("#0"), "backend"].nunique()  # the seed itself ran
    assert mutated["variant_id"].nunique() == 3 and len(mutated) == 3 * backends and backends >= 3
    assert (mutated["status"] == "skipped").all() and (mutated["stage"] == "mutate").all()


VALUES = """
name: narrow-values
seed: 0
seeds:
  - {source: ops, include: ["ops/amax/int16/*", "ops/amin/int16/*", "ops/argmax/int16/*", "ops/max/int16/*"]}
variants: {per_seed: 8, mutations: 2}
sizes: {per_seed: 0, widths: 0}
backends:
  targets: [{class: "tests.stacks.integer_backends:NarrowChainValues", device: cpu}]
pools: {cpu: {workers: 2}}
run: {repeats: 1}
"""


@pytest.mark.slow  # 60-90 s on two cores; test_probe_kinds guards the roles and corners it needs
@pytest.mark.ray
def test_a_fault_only_values_past_127_in_an_int16_chain_reach_is_found_by_the_integer_probes(tmp_path, local_ray):
    """Before: an int16 input a bitwise op or a clamp read was an index, fed only its own values reordered."""
    run = run_campaign(VALUES, tmp_path / "run")
    found = run.clusters()
    shown = found[["cluster", "symptom", "first_div_op", "backends", "probes"]]
    assert len(found) == 1 and found["backends"].iloc[0] == ["narrow-chain-values@cpu"], shown
    assert all(p.startswith("integer:") for p in found["probes"].iloc[0]), shown

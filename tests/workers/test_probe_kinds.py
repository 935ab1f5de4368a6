"""Probe kinds as registered classes: recipes recorded before kinds were classes replay to the same inputs
and campaigns choose the same probes (new kinds come beside them); a kind is one class whose seeds do not
depend on the other kinds; integer inputs of mutated chains get value probes; indexing operators get
out-of-range indices, and a compiled stack that returns there is a missing check."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch

from gapfuzz.seeds import create_seed
from gapfuzz.seeds.capture import capture
from gapfuzz.workers.run.probe_check import checked_recipe, probe_problem
from gapfuzz.workers.run.probes import KINDS, PROBE_KINDS, Probe, ProbeKind, ProbeSettings, choose, make_inputs, roles
from gapfuzz.workers.run.probes.kinds.integer import powers
from gapfuzz.workers.run.resize import resize_probes
from tests.conftest import run_campaign

RECORDED = json.loads((Path(__file__).parents[1] / "data" / "probe_recipes_before_kinds.json").read_text())["seeds"]
NEW = ("bounds", "boundary", "integer:powers")  # what this revision adds beside the probes chosen before


def _digest(ts) -> str:
    h = hashlib.sha256()
    for t in ts:
        if isinstance(t, torch.Tensor):
            t = t.detach().cpu()
            h.update(str((t.dtype, tuple(t.shape), t.stride())).encode())
            h.update(t.contiguous().view(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
        else:
            h.update(repr(t).encode())
    return h.hexdigest()[:16]


@pytest.mark.parametrize("seed_id", sorted(RECORDED))
def test_recipes_recorded_before_kinds_were_classes_replay_to_the_same_inputs_and_are_chosen_again(seed_id):
    recorded, v = RECORDED[seed_id], capture(create_seed(seed_id)).variant
    if _digest(v.inputs) != recorded["inputs"]:
        pytest.skip(f"{seed_id}'s example inputs are not the ones recorded: its probes' inputs cannot be compared")
    r = roles(v.gm, v.inputs)
    for recipe, digest in recorded["fed"].items():
        assert _digest(make_inputs(v.inputs, r, checked_recipe(recipe))) == digest, recipe
    settings = ProbeSettings(per_variant=8, campaign_seed=3, resize=True)
    for strides in (True, False, None):
        now = [p.recipe() for p in choose(v.gm, v.inputs, settings, f"{seed_id}#1", strides)]
        assert [x for x in now if x in recorded[str(strides)]] == recorded[str(strides)]  # same probes, same order
        added = [Probe.from_recipe(x).name for x in now if x not in recorded[str(strides)]]
        assert all(name.startswith(NEW) for name in added), added
    assert [p.recipe() for p in resize_probes(v.gm, v.inputs, settings, f"{seed_id}#1")] == recorded["resize"]


@pytest.fixture
def toy_kind():
    """A kind added as a plug-in would add one: a class, registered; taken out again after the test."""
    class Halved(ProbeKind):
        """Every floating input halved."""

        name, order, needs, params = "halved", 75, "value", {"by": (2, 4)}

        def propose(self, graph):
            return [{"by": 2}, {"by": 4}] if "value" in graph.have else []

        def make_one(self, t, params, g):
            return t / params["by"]

    table = PROBE_KINDS._table  # the registry keeps no removal: the test restores what it added
    before = dict(table)
    PROBE_KINDS.register(Halved)
    yield Halved
    table.clear()
    table.update(before)


def test_a_new_kind_is_one_class_and_moves_no_other_probes_seed(toy_kind):
    v = capture(create_seed("ops/add/float32/0")).variant
    settings = ProbeSettings(kinds=("*",))
    with_toy = choose(v.gm, v.inputs, settings, "v#1")
    halved = [p for p in with_toy if p.kind == "halved"]
    assert [p.name for p in halved] == ["halved:2", "halved:4"] and len({p.seed for p in halved}) == 2
    fed = make_inputs(v.inputs, roles(v.gm, v.inputs), halved[1])
    assert torch.equal(fed[0], v.inputs[0] / 4)
    assert checked_recipe(halved[0].recipe()) == halved[0]  # repro checks it against the class's own table
    assert "'8' is not a halved probe's by" in probe_problem("halved", {"by": 8})
    PROBE_KINDS._table.pop("halved")
    assert [p for p in with_toy if p.kind != "halved"] == choose(v.gm, v.inputs, settings, "v#1")


def test_a_wrong_kind_says_what_was_meant():
    assert "did you mean 'special'" in probe_problem("specail", {})
    with pytest.raises(ValueError, match="did you mean 'bounds'"):
        checked_recipe('{"kind": "bound", "seed": 1}')
    assert "not a bounds probe's size" in probe_problem("bounds", {"bound": "size", "input": 1, "size": -3})


# ---------------------------------------------------------------- integers used as numbers
def _traced(fn, *inputs):
    from torch.fx.experimental.proxy_tensor import make_fx

    return make_fx(fn)(*inputs), inputs


def test_an_integer_a_mutated_chain_computes_with_is_a_number_and_gets_its_corners():
    """Before: an int16 input read by ``bitwise_xor`` then ``amax`` was an index, probed only by order."""
    chain = lambda x: torch.amax(torch.bitwise_xor(x, 3).clamp_min(-5))  # noqa: E731
    gm, inputs = _traced(chain, torch.arange(6, dtype=torch.int16))
    assert roles(gm, inputs) == ["integer"]
    names = [p.name for p in choose(gm, inputs, ProbeSettings(), "v#1")]
    assert {"integer:max", "integer:min", "integer:powers"} <= set(names) and "index:reversed" not in names
    gm, inputs = _traced(lambda x, i: x.index_select(0, i), torch.randn(4), torch.tensor([0, 2]))
    assert roles(gm, inputs) == ["value", "index"]


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64])
def test_powers_of_two_and_their_neighbours_fit_the_dtype_and_pass_each_narrower_range(dtype):
    info, values = torch.iinfo(dtype), set(powers(dtype))
    assert min(values) >= info.min and max(values) <= info.max and {0, 1, 2} <= values
    for bits in (8, 16, 32):
        if 2 ** (bits - 1) <= info.max:
            assert {2 ** (bits - 1) - 1, 2 ** (bits - 1), 2 ** (bits - 1) + 1} <= values  # 127, 128, 129
    root = int(info.max ** 0.5)
    assert any(v * v > info.max for v in values if v > 0) and root in values or root + 1 in values


# ---------------------------------------------------------------- out-of-range indices
@pytest.mark.parametrize("seed_id, size", [("ops/gather/float32/0", 10), ("ops/index_select/float32/0", 1),
                                           ("ops/nn.functional.embedding/float32/0", 10), ("ops/take/float32/0", 9),
                                           ("ops/index_put/float32/0", 5), ("ops/index_add/float32/0", 1)])
def test_an_indexing_operator_gets_indices_past_each_end_and_eager_refuses_them(seed_id, size):
    v = capture(create_seed(seed_id)).variant
    r = roles(v.gm, v.inputs)
    bounds = [p for p in choose(v.gm, v.inputs, ProbeSettings(), "v#1") if p.kind == "bounds"]
    assert [p.name for p in bounds] == ["bounds:minus-one", "bounds:below", "bounds:size", "bounds:huge"]
    assert {dict(p.params)["size"] for p in bounds} == {size}
    for p in bounds:
        fed = make_inputs(v.inputs, r, p)
        i = dict(p.params)["input"]
        changed = (fed[i] != v.inputs[i]).sum()
        assert changed <= 1 and fed[i].dtype == v.inputs[i].dtype, p.name
        if p.name != "bounds:minus-one" or seed_id not in ("ops/take/float32/0", "ops/index_put/float32/0"):
            with pytest.raises((RuntimeError, IndexError)):
                v.gm(*fed)


def test_a_graph_with_no_indexing_operator_gets_no_bounds_probe():
    v = capture(create_seed("ops/add/int32/0")).variant
    assert not [p for p in choose(v.gm, v.inputs, ProbeSettings(), "v#1") if p.kind == "bounds"]


def test_a_check_dropped_past_either_end_of_a_range_is_one_key():
    """Eager names the index it refused: -1, -11, 10 and 2**31 - 1 are one check, one cluster."""
    from gapfuzz.core.bugs import Status, bug_key
    from gapfuzz.results.schema import RunRecord
    from gapfuzz.workers.judge.verdict import RefusedProbe

    def key(message):
        r = RunRecord(backend="x@cpu", stack="x", status=Status.OK, compiler="aot_autograd", campaign="",
                      variant_id="", seed_id="", device="cpu")
        RefusedProbe("RuntimeError", message).excuse(r, "aten.gather.default")
        return bug_key(vars(r)).id

    keys = {key(f"index {i} is out of bounds for dimension 0 with size 10") for i in (-1, -11, 10, 2**31 - 1)}
    assert len(keys) == 1 and key("all elements of target should be between 0 and 1") not in keys


BOUNDS = """
name: bounds
seed: 0
seeds:
  - {source: ops, include: ["ops/gather/float32/0", "ops/index_select/float32/0", "ops/add/float32/0"]}
variants: {per_seed: 2}
sizes: {per_seed: 0, widths: 0}
backends:
  targets: [{class: "tests.stacks.bounds_backends:UncheckedGather", device: cpu}]
pools: {cpu: {workers: 2}}
run: {repeats: 1}
"""


@pytest.mark.slow  # two campaigns, 140 s on two cores; the unit tests above guard the probes, test_edges the verdict
@pytest.mark.ray
def test_a_compiled_stack_that_reads_past_an_index_is_one_missing_check_per_operator(tmp_path, local_ray):
    run = run_campaign(BOUNDS, tmp_path / "run")
    found = run.clusters()
    shown = found[["cluster", "symptom", "first_div_op", "backends", "probes"]]
    missing = found[found["symptom"].str.startswith("missing-error")]
    assert sorted(missing["first_div_op"]) == ["aten.gather.default", "aten.index_select.default"], shown
    assert all(b == ["unchecked-gather@cpu"] for b in missing["backends"]) and len(found) == len(missing), shown
    kinds = [k for k in KINDS if k != "bounds"]
    without = run_campaign(BOUNDS + f"probes: {{kinds: [{', '.join(kinds)}]}}\n", tmp_path / "without")
    assert without.clusters().empty  # only the bounds probes find it

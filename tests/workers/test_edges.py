"""Edges of what a stack owes: where eager checks an input's values and raises ("all elements of target
should be between 0 and 1"), a target that returns instead is a finding of its own (``missing-error``),
keyed by the operator and eager's message; and a graph whose result is its dtype's representation
(nextafter, a bit view) is compared bit for bit and judged without the float64 oracle."""
from __future__ import annotations

import pytest
import torch

from gapfuzz.core.bugs import Status, Symptom, Verdict, bug_key
from gapfuzz.results.schema import RunRecord
from gapfuzz.workers.judge.verdict import RefusedProbe
from tests.conftest import run_campaign

BLANK = dict(campaign="", variant_id="", seed_id="", device="cpu")
BCE = "all elements of target should be between 0 and 1"


def _ok(backend="inductor@cpu"):
    compiler = {"inductor": "inductor", "aot-eager": "aot_autograd"}.get(backend.split("@")[0])
    return RunRecord(backend=backend, stack=backend.split("@")[0], status=Status.OK, compiler=compiler, **BLANK)


@pytest.mark.parametrize("error_type, message, check", [
    ("RuntimeError", BCE, True),
    ("IndexError", "index 7 is out of bounds for dimension 0 with size 5", True),
    ("RuntimeError", "ZeroDivisionError", False),  # an integer division by zero: compiled code need not check
    ("RuntimeError", '"addmm_impl_cpu_" not implemented for \'Half\'', False),  # unsupported, not a check
    ("TypeError", "expected Tensor as element 0", False),
])
def test_which_errors_of_eager_are_checks_of_the_input(error_type, message, check):
    assert RefusedProbe(error_type, message).checks_input is check


def test_a_target_that_returns_where_eager_checked_is_a_missing_error_and_the_oracle_is_not():
    refused = RefusedProbe("RuntimeError", BCE)
    target, oracle = _ok(), _ok("eager-fp64@cpu")
    refused.excuse(target, "aten.binary_cross_entropy.default")
    refused.excuse(oracle, None, target=False)
    assert (target.status, target.verdict, target.symptom) == (Status.MISMATCH, Verdict.TARGET_DIVERGENT,
                                                               Symptom.MISSING_ERROR)
    assert target.first_div_op == "aten.binary_cross_entropy.default" and target.message == f"RuntimeError: {BCE}"
    assert oracle.status == Status.OK and oracle.verdict == Verdict.NO_REFERENCE
    raised = _ok()
    raised.status, raised.message = Status.ERROR, "Assertion failed: target in [0, 1]"
    refused.excuse(raised, "aten.binary_cross_entropy.default")
    assert raised.status == Status.SKIPPED  # it raises too: it agrees


def test_the_key_is_the_operator_and_eagers_message_template():
    def record(message, op="aten.binary_cross_entropy.default", stack="inductor"):
        r = _ok(f"{stack}@cpu")
        RefusedProbe("RuntimeError", message).excuse(r, op)
        return vars(r)

    a, b = bug_key(record(BCE)), bug_key(record(BCE))
    assert a == b and a.id.startswith("d-")
    assert a["symptom"] == "missing-error: RuntimeError: all elements of target should be between <num> and <num>"
    assert bug_key(record("all elements of input should be between 0 and 1")) != a  # another check
    assert bug_key(record(BCE, "aten.nll_loss_forward.default")) != a  # another operator
    assert bug_key(record(BCE, stack="aot-eager")) != a
    ort = _ok("onnxruntime@cpu")
    RefusedProbe("RuntimeError", BCE).excuse(ort, "aten.binary_cross_entropy.default")
    assert ort.status == Status.OK and ort.verdict == Verdict.NO_REFERENCE  # not asked to repeat eager's checks
    index = bug_key(record("index 7 is out of bounds for dimension 0 with size 5", "aten.index.Tensor"))
    assert index == bug_key(record("index 9 is out of bounds for dimension 0 with size 8", "aten.index.Tensor"))


def test_the_operator_that_raised_is_found_by_running_eager_node_by_node():
    from gapfuzz.seeds import create_seed
    from gapfuzz.seeds.capture import capture
    from gapfuzz.workers.judge.interpret import raising_node

    v = capture(create_seed("ops/nn.functional.binary_cross_entropy/float32/0")).variant
    assert raising_node(v.gm, v.inputs) is None
    bad = [t.clone() for t in v.inputs]
    bad[1].view(-1)[0] = float("nan")  # the target
    node = raising_node(v.gm, bad)
    assert node is not None and "binary_cross_entropy" in str(node.target)


CAMPAIGN = """
name: missing-error
seed: 0
seeds:
  - {source: ops, include: ["ops/nn.functional.binary_cross_entropy/float32/0"]}
variants: {per_seed: 1}
sizes: {per_seed: 0, widths: 0}
backends:
  targets: [inductor@cpu]
pools: {cpu: {workers: 1}}
run: {repeats: 1}
"""


@pytest.mark.ray
def test_inductor_returns_where_eager_checks_the_target_and_triage_says_so(tmp_path, local_ray):
    """Real: Inductor's binary_cross_entropy returns NaN for a NaN target; eager raises."""
    from gapfuzz.analysis.triage import describe

    run = run_campaign(CAMPAIGN, tmp_path / "run", campaign_file=True)
    found = run.clusters()
    missing = found[found["symptom"].str.startswith("missing-error")]
    assert len(missing) >= 1, found[["cluster", "symptom", "first_div_op", "backends"]]
    row = next(missing.itertuples())
    assert row.first_div_op == "aten.binary_cross_entropy.default" and row.backends == ["inductor@cpu"]
    assert row.level == "wrong answer" and row.vendor
    assert describe(row).startswith("missing check at aten.binary_cross_entropy.default: eager raises RuntimeError: "
                                    "all elements of"), describe(row)
    assert torch.isnan(torch.compile(torch.nn.functional.binary_cross_entropy)(
        torch.rand(3), torch.tensor([0.5, float("nan"), 0.5]))).item()  # the stack's own behaviour, outside gapfuzz
    from gapfuzz.fuzzer.repro.minimise import reproduce_cluster

    result = reproduce_cluster(tmp_path / "run", row.cluster, tmp_path / "repro", tries=2)
    code = (tmp_path / "repro" / "repro.py").read_text()
    assert result.status == "reproducible" and result.form == "torch.compile", result
    assert "eager raises" in code and "torch.compile(f" in code and len(code.splitlines()) < 40, code


# ---------------------------------------------------------------- no oracle where the dtype is the meaning
def test_a_graph_of_a_representation_operator_is_dtype_bound_and_a_campaign_can_add_one():
    from gapfuzz.fuzzer.config.campaign import from_dict
    from gapfuzz.workers.judge.consensus import dtype_bound

    assert dtype_bound(["aten.nextafter.default"]) and dtype_bound(["aten.add.Tensor", "aten.view.dtype"])
    assert not dtype_bound(["aten.view.default", "aten.add.Tensor"])  # a view of the same dtype: values, not bits
    assert dtype_bound(["aten.spacing.default"], ("aten.spacing",))
    c = from_dict({"name": "t", "seeds": [{"source": "ops", "include": ["ops/nextafter/float32/0"]}],
                   "backends": {"targets": ["aot-eager@cpu"]}, "compare": {"dtype_bound_ops": ["aten.spacing"]}}, "t")
    assert c.compare.settings.dtype_bound_ops == ("aten.spacing",)


WIDE = """
name: dtype-bound
seed: 0
seeds:
  - {source: ops, include: ["ops/nextafter/float32/0"]}
variants: {per_seed: 1}
sizes: {per_seed: 0, widths: 0}
backends:
  targets: [{class: "tests.stacks.edge_backends:WideNextafter", device: cpu}]
pools: {cpu: {workers: 1}}
run: {repeats: 1}
"""


@pytest.mark.ray
def test_a_stack_wrong_at_the_dtype_is_blamed_not_eager_whom_float64_would_blame(tmp_path, local_ray):
    runs = run_campaign(WIDE, tmp_path / "run").records(["backend", "probe", "status", "verdict"])
    target = runs[runs["backend"] == "wide-nextafter@cpu"]
    assert (target["status"] == "mismatch").any() and set(target["verdict"].dropna()) <= {"target-divergent", "agree",
                                                                                         "no-reference"}, target


STRICT = """
name: strict
seed: 0
seeds:
  - {source: ops, include: ["ops/flip/float32/0", "ops/exp/float32/0"]}
variants: {per_seed: 1}
sizes: {per_seed: 0, widths: 0}
backends:
  targets: [{class: "tests.stacks.edge_backends:CanonicalBits", device: cpu}]
pools: {cpu: {workers: 1}}
run: {repeats: 1}
"""


@pytest.mark.ray
def test_bits_exact_by_contract_that_differ_within_tolerance_are_strict_and_ranked_below(tmp_path, local_ray):
    from gapfuzz.analysis.triage import describe

    run = run_campaign(STRICT, tmp_path / "run", campaign_file=True)
    found = run.clusters()
    shown = found[["cluster", "symptom", "level", "severity", "seed_ids", "probes"]]
    assert list(found["symptom"]) == ["strict"] and list(found["level"]) == ["strict"], shown
    row = next(found.itertuples())
    assert row.severity == 1 and row.vendor and list(row.seed_ids) == ["ops/flip/float32/0"], shown  # exp: no contract
    assert describe(row).startswith("strict at aten.flip.default: within tolerance"), describe(row)
    records = run.records(["seed_id", "backend", "probe", "verdict"])
    exp = records[(records["seed_id"] == "ops/exp/float32/0") & (records["backend"] == "canonical-bits@cpu")]
    assert len(exp) and not (exp["verdict"] == "target-divergent").any()


def test_a_nan_or_inf_divergence_at_the_overflow_edge_is_keyed_as_the_numeric_one_it_is():
    """One defect, one cluster: an error near the largest finite value crosses into inf."""
    def record(symptom, probe):
        return dict(backend="inductor@cpu", stack="inductor", device="cpu", status="mismatch", stage="compare",
                    verdict="target-divergent", symptom=symptom, probe=probe, output_dtype="float32")

    numeric = bug_key(record("numeric", "example"))
    assert bug_key(record("nonfinite", "edge:max")) == numeric == bug_key(record("nonfinite", "edge:log-max"))
    assert bug_key(record("nonfinite", "special:nan:single")) != numeric  # a NaN fed in: its own pattern
    assert bug_key(record("nonfinite", "edge:nan-sign")) != numeric


def test_a_shrink_candidate_is_keyed_as_the_probe_its_inputs_came_from():
    """A candidate runs the probe's inputs as its example: keyed as the example, an overflow-edge cluster
    (nonfinite there, keyed numeric) would never show again, and repro would give up at once."""
    from gapfuzz.fuzzer.repro.shrink.predicate import SameBug
    from gapfuzz.results.schema import RunRecord
    from gapfuzz.workers.run.registry import parse_backend

    def run(backend, **columns):
        return RunRecord(campaign="", variant_id="v", seed_id="s", backend=backend, stack=backend.split("@")[0],
                         device="cpu", probe="example", worker_s=0.0, **columns)

    outcomes = [run("eager@cpu", status="ok"),
                run("inductor@cpu", status="mismatch", stage="compare", verdict="target-divergent",
                    symptom="nonfinite", output_dtype="float32")]
    key = bug_key(dict(backend="inductor@cpu", stack="inductor", device="cpu", status="mismatch", stage="compare",
                       verdict="target-divergent", symptom="nonfinite", probe="edge:log-max", output_dtype="float32"))
    for probe, shown in (("edge:log-max", True), (None, False)):
        same = SameBug(parse_backend("inductor@cpu"), parse_backend("eager@cpu"), None, key, None, "s", probe=probe)
        same._run = lambda v, settings: outcomes
        assert same(type("V", (), {"ops": ()})()) is shown
        same.close()


# ---------------------------------------------------------------- an operator's own overflow boundary
def test_an_operators_overflow_boundary_is_found_by_bisection_on_eager_in_float64():
    from gapfuzz.seeds import create_seed
    from gapfuzz.seeds.capture import capture
    from gapfuzz.workers.run.probes.kinds.boundary import boundaries

    entr = capture(create_seed("ops/special.entr/bfloat16/0")).variant
    (cross, at), *_ = boundaries(entr.gm, entr.inputs, torch.bfloat16)
    assert cross == "max" and 4.0e36 < at < 4.06e36  # where entr's result crosses bfloat16's largest finite value
    exp2 = capture(create_seed("ops/exp2/float32/0")).variant
    assert boundaries(exp2.gm, exp2.inputs, torch.float32) == [("max", 128.0), ("tiny", -126.0)]


ENTR = """
name: boundary
seed: 0
seeds:
  - {source: ops, include: ["ops/special.entr/float32/0"]}
variants: {per_seed: 1}
sizes: {per_seed: 0, widths: 0}
backends:
  targets: [{class: "tests.stacks.edge_backends:EarlyOverflowEntr", device: cpu}]
pools: {cpu: {workers: 1}}
run: {repeats: 1}
"""


@pytest.mark.slow  # two campaigns, about 80 s on two cores; the bisection's test above guards the probes
@pytest.mark.ray
def test_an_intermediate_that_overflows_early_is_found_at_the_operators_boundary_only(tmp_path, local_ray):
    from gapfuzz.workers.run.probes import KINDS

    found = run_campaign(ENTR, tmp_path / "run").clusters()
    shown = found[["cluster", "symptom", "first_div_op", "backends", "probes"]]
    assert len(found) == 1 and found["backends"].iloc[0] == ["early-overflow-entr@cpu"], shown
    assert all(p.startswith("boundary:max") for p in found["probes"].iloc[0]), shown
    kinds = [k for k in KINDS if k != "boundary"]
    assert run_campaign(ENTR + f"probes: {{kinds: [{', '.join(kinds)}]}}\n", tmp_path / "without").clusters().empty

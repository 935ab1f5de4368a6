"""One wall budget per (variant, backend) pair (``workers.run.budget``): a pair over it is recorded at its
stage and the next pair runs; the progress line names the oldest pair in flight."""
from __future__ import annotations

import io
import time
from dataclasses import dataclass, field

import pytest
import torch

from gapfuzz.core.modes import Mode
from gapfuzz.fuzzer.progress import Progress, oldest
from gapfuzz.results.schema import RunRecord
from gapfuzz.workers.judge.passes import Pass, PassManager
from gapfuzz.workers.run.budget import ALIGNING, BISECTING, RUNNING, PairClock, pair_budget_s
from gapfuzz.workers.run.messages import RunRequest
from gapfuzz.workers.run.registry import parse_backend
from gapfuzz.workers.run.runner import run_variant
from gapfuzz.workers.run.sandbox import Sandbox
from tests.helpers.judging import judge_settings

# ------------------------------------------------------------------ the progress line


def test_the_progress_line_names_the_oldest_running_pair_its_stage_and_age():
    running = [{"variant": "timm/test_vit#1", "backend": "onnxruntime@cpu", "stage": RUNNING, "age_s": 12.0},
               {"variant": "timm/test_vit#3", "backend": "inductor@cpu", "stage": BISECTING, "age_s": 412.4},
               {"variant": "ops/add#0", "backend": None, "stage": "judging", "age_s": 3.0}]
    assert oldest(running) == "oldest: timm/test_vit#3 on inductor@cpu, bisecting, 412 s"
    assert oldest(running[2:]) == "oldest: ops/add#0, judging, 3 s"  # judging every pair of the variant
    assert oldest([]) == ""
    out = io.StringIO()
    p = Progress(10, unit="pairs", stream=out, every_s=0)
    p.running = running
    p.update()
    assert out.getvalue().rstrip().endswith("oldest: timm/test_vit#3 on inductor@cpu, bisecting, 412 s")
    p.running = []
    p.update()
    assert "oldest" not in out.getvalue().splitlines()[-1]


# ------------------------------------------------------------------ the clock and the passes


def test_a_pair_s_clock_charges_its_calls_and_says_where_it_ran_over():
    clock = PairClock("v#0", {"a@cpu": 0.05, "b@cpu": 10.0})
    with clock.spend("a@cpu", RUNNING) as left:
        assert left == 0.05
        assert clock.now()["backend"] == "a@cpu" and clock.now()["stage"] == RUNNING
        time.sleep(0.06)
    assert clock.over("a@cpu") and not clock.over("b@cpu")
    assert clock.why("a@cpu") == "over the pair's budget (0.05 s) while running"
    assert clock.cause("a@cpu") == "limit:timeout 0.05s, the pair's budget"
    assert clock.now()["backend"] is None  # between calls: judging
    clock.exhaust("b@cpu", ALIGNING)
    assert clock.why("b@cpu") == "over the pair's budget (10 s) while aligning"
    s = judge_settings("eager@cpu")
    assert pair_budget_s(s) == s.timeout_s + s.bisect_budget_s == 1200  # the default: a run and a bisection
    assert pair_budget_s(judge_settings("eager@cpu", pair_budget_s=30), 5) == 30


@dataclass
class Context:
    budget: PairClock
    settings: object = None
    mode: str = Mode.INFERENCE
    ran: list = field(default_factory=list)


def test_a_pass_with_a_stage_leaves_out_the_runs_of_a_pair_over_its_budget_and_notes_why():
    def locate(c, runs):
        c.ran += [o.backend for o in runs]
        for o in runs:
            o.align_error = "located"

    manager = PassManager([Pass("cheap", lambda c, runs: c.ran.extend(o.backend for o in runs)),
                           Pass("location", locate, owns=("align_error",), stage=ALIGNING, note="align_error")])
    clock = PairClock("v#0", {"slow@cpu": 1.0, "fast@cpu": 1.0})
    clock.exhaust("slow@cpu", BISECTING)
    runs = [RunRecord("c", "v#0", "s", "slow@cpu"), RunRecord("c", "v#0", "s", "fast@cpu")]
    c = Context(clock)
    manager.run(c, runs)
    assert c.ran == ["slow@cpu", "fast@cpu", "fast@cpu"]  # the cheap pass costs no budget: both
    assert runs[0].align_error == "over the pair's budget (1 s) while bisecting" and runs[1].align_error == "located"
    with pytest.raises(ValueError, match="notes in column 'bisect_error', which it neither owns nor revises"):
        Pass("x", locate, owns=("align_error",), note="bisect_error")


# ------------------------------------------------------------------ in a sandbox


class Small(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.a, self.b = torch.nn.Linear(16, 16), torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.b(torch.tanh(self.a(x)))


@pytest.fixture(scope="module")
def small():
    from gapfuzz.seeds.capture import capture
    from gapfuzz.seeds.spec import BuiltSeed, SeedInfo

    return capture(BuiltSeed(SeedInfo(id="test/small", source="test"), Small(), (torch.randn(4, 16),))).variant


@pytest.fixture(scope="module")
def sandbox():
    sb = Sandbox()
    yield sb
    sb.close()


def _plugin(cls: str, label: str, **options):
    return parse_backend("x@cpu", options, label=label, cls_path=f"tests.stacks.{cls}")


def _run(sandbox, variant, targets, budget_s):
    specs = [parse_backend("eager@cpu"), parse_backend("eager-fp64@cpu"), *targets]
    judge = judge_settings("eager@cpu", "eager-fp64@cpu", repeats=1, pair_budget_s=budget_s)
    request = RunRequest("test/small#0", "test/small", variant.to_payload(), specs, judge, "tensor",
                         list(variant.output_names))
    t0 = time.monotonic()
    outcomes, _ = run_variant(sandbox, request)
    return {o.backend: o for o in outcomes}, time.monotonic() - t0


def test_a_pair_whose_prepare_runs_past_its_budget_is_a_timeout_at_run_and_the_next_pair_runs(sandbox, small):
    slow = _plugin("slow_backends:SlowToPrepare", "slow")
    after = parse_backend("eager@cpu", label="eager-after")
    got, took = _run(sandbox, small, [slow, after], budget_s=4)
    out = got["slow@cpu"]
    assert (out.status, out.stage, out.error_type) == ("timeout", "run", "timeout"), out
    assert out.cause == "limit:timeout 4s, the pair's budget"
    assert got["eager-after@cpu"].status == "ok" and got["eager@cpu"].status == "ok"
    assert took < 60  # not the hour it sleeps


def test_a_pair_whose_alignment_runs_past_its_budget_keeps_its_verdict_and_the_next_pair_is_located(sandbox, small):
    slow = _plugin("slow_backends:SlowToLocate", "slow-locate", token=f"t{time.time()}")
    tanh = next(n.name for n in small.gm.graph.nodes if n.name.startswith("tanh"))
    rounded = _plugin("numeric_backends:RoundNodeToBf16", "round", node=tanh)
    got, took = _run(sandbox, small, [slow, rounded], budget_s=6)
    out = got["slow-locate@cpu"]
    assert (out.status, out.verdict) == ("mismatch", "target-divergent"), out  # what was judged stays
    assert out.align_error == "over the pair's budget (6 s) while aligning"
    assert out.bisect_error == "over the pair's budget (6 s) while aligning" and out.culprit is None
    assert got["round@cpu"].first_div_node == tanh  # the next pair was aligned, in a fresh process
    assert took < 60


# ------------------------------------------------------------------ in a campaign

CAMPAIGN = """
name: budget
seeds: [{source: ops, include: ["ops/nn.functional.relu/float32/0"]}]
variants: {per_seed: 2, mutations: 1, mutators: [insert_unary]}
sizes: {per_seed: 0, widths: 0}
probes: {per_variant: 1}
backends:
  targets:
    - {class: "tests.stacks.slow_backends:SlowToPrepare", device: cpu, label: slow}
    - {backend: eager@cpu, label: eager-copy}
pools: {cpu: {workers: 1}}
run: {repeats: 1, pair_budget_s: 5}
compare: {align: false, bisect: false}
"""


@pytest.mark.slow
@pytest.mark.ray
def test_a_campaign_records_each_pair_over_its_budget_and_moves_on(tmp_path, local_ray):
    from tests.conftest import run_campaign

    df = run_campaign(CAMPAIGN, tmp_path / "run").records()
    slow, copy = df[df["backend"] == "slow@cpu"], df[df["backend"] == "eager-copy@cpu"]
    assert slow["variant_id"].nunique() == 2 and (slow["status"] == "timeout").all() and (slow["stage"] == "run").all()
    assert slow["cause"].eq("limit:timeout 5s, the pair's budget").all()
    assert set(copy["variant_id"]) == set(slow["variant_id"]) and (copy["status"] == "ok").all()

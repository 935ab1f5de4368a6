"""The pass manager of the judging chain: order, preconditions, and the columns each pass writes."""
from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from gapfuzz.core.bugs import Verdict
from gapfuzz.core.modes import Mode
from gapfuzz.results.schema import RunRecord
from gapfuzz.workers.judge.chain import PROBE_CHAIN, VARIANT_CHAIN
from gapfuzz.workers.judge.passes import Pass, PassManager


@dataclass
class Settings:
    explain: bool = True


@dataclass
class Context:
    settings: Settings = field(default_factory=Settings)
    mode: str = Mode.INFERENCE
    ran: list = field(default_factory=list)


def _run(backend: str, verdict=None) -> RunRecord:
    return RunRecord("c", "v", "s", backend, verdict=verdict)


def _note(name: str, column: str = "message"):
    def run(c: Context, runs: list) -> None:
        c.ran.append((name, [o.backend for o in runs]))
        for o in runs:
            setattr(o, column, name)
    return run


def test_passes_run_in_order_each_on_the_runs_it_admits():
    manager = PassManager([
        Pass("first", _note("first"), revises=("message",)),
        Pass("divergent", _note("divergent", "explanation"), owns=("explanation",),
             verdicts=(Verdict.TARGET_DIVERGENT,)),
        Pass("unexplained", _note("unexplained", "align_error"), owns=("align_error",),
             when=lambda c, o: o.explanation is None),
    ], given=("message",))
    runs = [_run("a", Verdict.AGREE), _run("b", Verdict.TARGET_DIVERGENT)]
    c = Context()
    seconds = manager.run(c, runs)
    assert c.ran == [("first", ["a", "b"]), ("divergent", ["b"]), ("unexplained", ["a"])]
    assert list(seconds) == ["first", "divergent", "unexplained"]
    assert runs[1].explanation == "divergent" and runs[1].align_error is None


def test_a_pass_is_skipped_when_its_switch_mode_or_runs_say_so():
    manager = PassManager([
        Pass("switched", _note("switched"), revises=("message",), flag="explain"),
        Pass("inference", _note("inference"), revises=("message",), modes=(Mode.INFERENCE,)),
        Pass("none", _note("none"), revises=("message",), verdicts=(Verdict.ORACLE,)),
    ], given=("message",))
    c = Context(Settings(explain=False), Mode.TRAINING)
    assert manager.run(c, [_run("a", Verdict.AGREE)]) == {}
    assert c.ran == []
    c = Context(Settings(explain=True), "inference")  # the bare string is the mode too
    manager.run(c, [_run("a", Verdict.AGREE)])
    assert [name for name, _ in c.ran] == ["switched", "inference"]


def test_two_passes_cannot_own_one_column():
    with pytest.raises(ValueError, match="pass 'b' owns column 'explanation', which pass 'a' owns already"):
        PassManager([Pass("a", _note("a"), owns=("explanation",)), Pass("b", _note("b"), owns=("explanation",))])
    first = PassManager([Pass("a", _note("a"), owns=("explanation",))])
    with pytest.raises(ValueError, match="which pass 'a' owns already"):
        PassManager([Pass("b", _note("b"), owns=("explanation",))], after=first)


def test_a_pass_revises_only_what_an_earlier_pass_or_the_run_wrote():
    with pytest.raises(ValueError, match=r"revises column 'verdict' before anything wrote it \(pass 'b' owns it"):
        PassManager([Pass("a", _note("a"), revises=("verdict",)), Pass("b", _note("b"), owns=("verdict",))])
    with pytest.raises(ValueError, match="no pass owns it"):
        PassManager([Pass("a", _note("a"), revises=("verdict",))])
    PassManager([Pass("a", _note("a"), revises=("verdict",))], given=("verdict",))


def test_names_are_checked_when_the_chain_is_made():
    with pytest.raises(ValueError, match="'verdictt' is not a record column; did you mean 'verdict'"):
        Pass("a", _note("a"), owns=("verdictt",))
    with pytest.raises(ValueError, match="two passes are named 'a'"):
        PassManager([Pass("a", _note("a")), Pass("a", _note("a"))])


def test_a_pass_that_writes_a_column_it_did_not_declare_fails():
    manager = PassManager([Pass("sneaky", _note("sneaky", "culprit"), owns=("explanation",))])
    with pytest.raises(RuntimeError, match=r"pass 'sneaky' wrote \['culprit'\]"):
        manager.run(Context(), [_run("a")])


def test_the_judging_chain_names_its_tiers_and_owns_each_column_once():
    names = [p.name for p in (*PROBE_CHAIN.passes, *VARIANT_CHAIN.passes)]
    assert names == ["closeness", "task", "loss", "platform", "consensus", "tf32", "explain", "pytorch rule",
                     "location", "late location", "culprit"]
    owners = VARIANT_CHAIN.owner
    assert owners["verdict"] == "pass 'closeness'" and owners["task_agree"] == "pass 'task'"
    assert owners["explanation"] == "pass 'loss'" and owners["torch_same"] == "pass 'pytorch rule'"
    assert owners["first_div_op"] == "pass 'location'" and owners["culprit"] == "pass 'culprit'"
    explain = next(p for p in PROBE_CHAIN.passes if p.name == "explain")
    assert explain.modes == {Mode.INFERENCE} and explain.flag == "explain"

"""One wall budget per (variant, backend) pair, from its compile to its culprit.

A pool's runner works on a variant's pairs in turn: each backend's run (its prepare and timed calls,
and the retries that tell which probe killed it), then, probe by probe, the judging chain over all of
them (``workers.judge.chain``), then the culprits. Without one budget a pair could hold its worker for
its run's ``timeout_s``, then its alignment's, its explanation's and its bisection's limits, one after
the other (a campaign stalled 30 minutes so). Here a pair's time is what its worker's sandbox spent on
its behalf: every sandbox call made for one backend is charged to that pair, and its timeout is the
pair's budget left where that is shorter than the call's own, so no pair holds a worker past its budget,
whatever it is doing, and the worker moves on to the next pair.

What a pair that runs over is recorded as:

- over while ``running`` (its prepare, its calls, the retries after a fault): the sandbox kills the
  executor, and the records the pair still owes are status ``timeout``, stage ``run`` (``torch.compile``
  compiles at the first call: a kill cannot tell compiling from running, as for a run over ``timeout_s``),
  error type ``timeout``, cause ``limit:timeout <N>s, the pair's budget``;
- over after its verdict (``explaining``: the TF32 re-run and the hypotheses on eager; ``aligning``;
  ``bisecting``): the verdict is what was judged and stays, with its status and stage (a divergence found
  is a finding, attributed or not); the stage that ran over and every later one are not run for the pair
  and, where they have a column for it, say so: ``align_error`` and ``bisect_error`` read ``over the
  pair's budget (<N> s) while <stage>``; an explanation that ran over is left empty.

Calls made for no one pair (loading the variant, numpy's answer, which op raised) are charged to none.
"""
from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass

RUNNING, JUDGING, EXPLAINING, ALIGNING, BISECTING = "running", "judging", "explaining", "aligning", "bisecting"
BUDGET_CAUSE = "the pair's budget"  # a Fault's cause names it after the limit: "limit:timeout 1200s, the pair's budget"


def pair_budget_s(settings, spec_timeout_s: float | None = None) -> float:
    """A pair's budget: the campaign's ``pair_budget_s``, or its backend's run limit and a whole bisection."""
    given = getattr(settings, "pair_budget_s", None)
    return float(given) if given else float(spec_timeout_s or settings.timeout_s) + float(settings.bisect_budget_s)


@dataclass
class Pair:
    budget_s: float
    started: float  # time.monotonic() of its first call
    spent: float = 0.0
    over_at: str | None = None  # the stage it ran over in


class PairClock:
    """The budgets of one variant's pairs on one worker (backend -> budget), and what it is doing now."""

    def __init__(self, variant_id: str, budgets: dict[str, float]):
        self.variant_id, self.budgets = variant_id, dict(budgets)
        self.pairs: dict[str, Pair] = {}
        self.started = time.monotonic()
        self.doing: tuple = (None, JUDGING, self.started)  # (backend, stage, since): read from another thread

    @classmethod
    def of(cls, request, settings=None) -> PairClock:
        """The clock of a ``messages.RunRequest``: one budget per spec."""
        s = settings or request.settings
        return cls(request.variant_id, {spec.name: pair_budget_s(s, spec.timeout_s) for spec in request.specs})

    def _pair(self, backend: str) -> Pair:
        if backend not in self.pairs:
            self.pairs[backend] = Pair(self.budgets.get(backend, float("inf")), time.monotonic())
        return self.pairs[backend]

    def left(self, backend: str) -> float:
        pair = self._pair(backend)
        return pair.budget_s - pair.spent

    def over(self, backend: str) -> bool:
        return backend in self.pairs and self.left(backend) <= 0

    def why(self, backend: str, stage: str | None = None) -> str:
        """``over the pair's budget (1200 s) while bisecting``: the stage it ran over in (else ``stage``)."""
        pair = self._pair(backend)
        at = pair.over_at or stage
        return f"over the pair's budget ({pair.budget_s:g} s)" + (f" while {at}" if at else "")

    def exhaust(self, backend: str, stage: str) -> None:
        """The pair is over its budget now (a call that stopped itself when the budget it was given ran out)."""
        pair = self._pair(backend)
        pair.spent = max(pair.spent, pair.budget_s)
        pair.over_at = pair.over_at or stage

    def cause(self, backend: str) -> str:
        return f"limit:timeout {self._pair(backend).budget_s:g}s, {BUDGET_CAUSE}"

    @contextlib.contextmanager
    def spend(self, backend: str, stage: str):
        """Charge the block's wall time to ``backend``'s pair, doing ``stage``; yields the seconds it has left."""
        pair = self._pair(backend)
        t0 = time.monotonic()
        self.doing = (backend, stage, pair.started)
        try:
            yield pair.budget_s - pair.spent
        finally:
            pair.spent += time.monotonic() - t0
            if pair.spent >= pair.budget_s and pair.over_at is None:
                pair.over_at = stage
            self.doing = (None, JUDGING, self.started)

    def now(self) -> dict:
        """What this variant's worker is doing: the pair (None while judging them all) and its stage and age."""
        backend, stage, since = self.doing
        return {"variant": self.variant_id, "backend": backend, "stage": stage, "age_s": time.monotonic() - since}

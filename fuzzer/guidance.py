"""Which mutator to draw next: uniform, LEMON's MCMC over mutator scores, or coverage-guided.

The driver keeps a :class:`Feedback` from the records as they arrive and hands a snapshot
(``messages.Guidance``) to each build; the generator's :class:`Chooser` draws from it. A variant
*hits* when one of its target runs shows a bug key not seen before (``core.bugs``), covers an
(operator, backend, outcome) triple not seen before, or makes a compiler run a pass or fire a
pattern-matcher pattern no variant did (pass coverage, ``workers.judge.culprit``); its mutators share the
credit. Coverage guidance also weights the choices of mutators that pick from named choices (``Mutator.choices``)
by how little a campaign has used each.
"""
from __future__ import annotations

import math
import random
from collections import Counter, defaultdict

from gapfuzz.fuzzer.builds import Guidance
from gapfuzz.fuzzer.config.settings import GuidanceMode
from gapfuzz.fuzzer.mutators import get_mutator


class Feedback:
    def __init__(self, mutators: list[str]):
        self.mutators = list(mutators)
        self.uses: Counter = Counter()
        self.hits: Counter = Counter()
        self.keys: set = set()
        self.covered: set = set()  # (op, backend, status)
        self.fired: set = set()  # (backend, compiler pass or pattern)
        self.choice_params = {m: get_mutator(m).choice_param for m in self.mutators}
        self.choices = {m: type(get_mutator(m)).choices() for m, p in self.choice_params.items() if p}
        self.chosen: dict[str, Counter] = defaultdict(Counter)  # mutator -> choice -> variants that used it

    def update(self, mutations: list, ops: list[str], outcomes: list[tuple[str, str, str | None]],
               fired: list[tuple[str, str]] = ()) -> bool:
        """``mutations``: the recipe's [name, params] steps; ``outcomes``: (backend, status, bug key id)
        of each target run of the variant; ``fired``: (backend, pass or pattern) its compiles ran.
        Returns whether the variant hit something new."""
        new = False
        for item in fired:
            if item not in self.fired:
                self.fired.add(item)
                new = True
        for name, params in mutations:
            if self.choice_params.get(name):
                self.chosen[name][params.get(self.choice_params[name])] += 1
        for backend, status, key in outcomes:
            if key and key not in self.keys:
                self.keys.add(key)
                new = True
            for op in ops:
                if (op, backend, status) not in self.covered:
                    self.covered.add((op, backend, status))
                    new = True
        for m in {name for name, _ in mutations}:
            self.uses[m] += 1
            self.hits[m] += new
        return new

    def scores(self) -> dict[str, float]:
        """Hit rate with a Beta(1, 1) prior, so an unused mutator starts at 1/2."""
        return {m: (self.hits[m] + 1) / (self.uses[m] + 2) for m in self.mutators}

    def snapshot(self, mode: GuidanceMode) -> Guidance:
        weights = {}
        if mode == GuidanceMode.COVERAGE:
            weights = {m: {c: 1 / math.sqrt(1 + self.chosen[m][c]) for c in names} for m, names in self.choices.items()}
        return Guidance(mode, self.scores(), weights)


class Chooser:
    """Draws mutator names for one build, following a :meth:`Feedback.snapshot`."""

    def __init__(self, mutators: list[str], snapshot: Guidance | None):
        self.mutators = list(mutators)
        self.snap = snapshot or Guidance()
        self.current: str | None = None

    def choose(self, rng: random.Random) -> str:
        mode = self.snap.mode
        if mode == GuidanceMode.UNIFORM or len(self.mutators) == 1:
            return self.mutators[rng.randrange(len(self.mutators))]
        scores = self.snap.scores
        if mode == GuidanceMode.COVERAGE:
            weights = [scores.get(m, 0.5) for m in self.mutators]
            return rng.choices(self.mutators, weights=weights)[0]
        return self._mcmc(rng, scores)

    def _mcmc(self, rng: random.Random, scores: dict) -> str:
        """LEMON: rank by score; accept a uniform proposal with probability (1-p)^(k_new - k_cur)."""
        ranked = sorted(self.mutators, key=lambda m: -scores.get(m, 0.5))
        rank = {m: k for k, m in enumerate(ranked)}
        p = 1 / len(ranked)
        if self.current is None:
            self.current = ranked[0]
        while True:
            cand = self.mutators[rng.randrange(len(self.mutators))]
            if rng.random() < min(1.0, (1 - p) ** (rank[cand] - rank[self.current])):
                self.current = cand
                return cand

    def choice_weights(self, mutator: str) -> dict | None:
        return self.snap.choice_weights.get(mutator)

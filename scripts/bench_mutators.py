#!/usr/bin/env python
"""Mutator validity, replay, metamorphic agreement and generation cost, on random real seeds.

    python scripts/bench_mutators.py --seeds 30 --variants 20 --sources timm,transformers

Prints: the share of generated variants that run on the reference after a payload round
trip (what a backend receives), rejection rates per mutator, replay determinism of recipes,
how often semantics-preserving variants agree with their seed, and the time to generate a
variant against the time its backends take (eager reference + fp64 oracle, and Inductor).
"""
from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections import Counter
from dataclasses import dataclass, field

import torch

from gapfuzz.core.ir import Variant
from gapfuzz.fuzzer.builds import BuildRequest
from gapfuzz.fuzzer.config.settings import VariantSettings
from gapfuzz.fuzzer.generate import build_seed_variants, replay
from gapfuzz.fuzzer.mutators import list_mutators
from gapfuzz.seeds import list_seeds
from gapfuzz.workers.backends.eager import EagerFp64
from gapfuzz.workers.backends.inductor import Inductor


def timed_runs(fn, inputs, repeats: int = 3) -> float:
    """prepare-free cost of one backend as the pool pays it: a first call plus ``repeats`` timed calls."""
    t0 = time.perf_counter()
    with torch.no_grad():
        for _ in range(repeats + 1):
            fn(*inputs)
    return time.perf_counter() - t0


@dataclass
class Tally:
    """What the seeds' variants gave: counts, failures, recipes and the times of each side."""

    tried: Counter = field(default_factory=Counter)
    rejected: Counter = field(default_factory=Counter)
    ran: int = 0
    total: int = 0
    failures: list = field(default_factory=list)
    recipes: list = field(default_factory=list)
    gen_s: list = field(default_factory=list)
    eager_s: list = field(default_factory=list)
    inductor_s: list = field(default_factory=list)
    inductor_gen: list = field(default_factory=list)
    meta: list = field(default_factory=list)  # (variant id, mutators, metamorphic_ok, metamorphic_err)

    def add_seed(self, res, inductor_per_seed: int) -> None:
        self.tried.update(res.tried)
        self.rejected.update(res.rejected)
        for k, v in enumerate(res.variants):
            self.total += 1
            self.recipes.append((v.recipe, v.graph_hash))
            self.gen_s.append(v.gen_s)
            if v.metamorphic_ok is not None:
                self.meta.append((v.variant_id, v.recipe.mutator_names, v.metamorphic_ok, v.metamorphic_err))
            var = Variant.from_payload(res.payloads[v.variant_id])
            if self.time_eager(v, var) and k < inductor_per_seed:
                self.time_inductor(v, var)

    def time_eager(self, v, var) -> bool:
        try:
            cost = timed_runs(var.gm, var.inputs)
            cost += timed_runs(EagerFp64().prepare(var.gm, var.inputs, "cpu"), var.inputs)
        except Exception as e:  # noqa: BLE001 - counted and shown
            self.failures.append((v.variant_id, v.recipe.to_json(), f"{type(e).__name__}: {str(e)[:120]}"))
            return False
        self.eager_s.append(cost)
        self.ran += 1
        return True

    def time_inductor(self, v, var) -> None:
        try:
            t0 = time.perf_counter()
            fn = Inductor().prepare(var.gm, var.inputs, "cpu")
            with torch.no_grad():
                fn(*var.inputs)
            self.inductor_s.append(time.perf_counter() - t0 + timed_runs(fn, var.inputs))
            self.inductor_gen.append(v.gen_s)
        except Exception:  # noqa: BLE001 - an Inductor failure is a finding, not a benchmark bug
            pass
        torch._dynamo.reset()

    def report(self, seeds_done: int, replays: int) -> None:
        print(f"\nseeds {seeds_done}, variants {self.total}, ran on the reference after a payload round trip: "
              f"{self.ran}/{self.total} = {self.ran / max(1, self.total):.1%}")
        for vid, recipe, err in self.failures[:10]:
            print(f"  did not run: {vid} {recipe} {err}")
        print("\nrejections per mutator (rejected / tried):")
        for m in sorted(self.tried, key=lambda m: -self.rejected[m] / self.tried[m]):
            print(f"  {m:24s} {self.rejected[m]:5d} / {self.tried[m]:5d} = {self.rejected[m] / self.tried[m]:6.1%}")
        sample = random.Random(1).sample(self.recipes, min(replays, len(self.recipes)))
        same = sum(replay(r).graph_hash == h for r, h in sample)
        print(f"\nreplayed {len(sample)} recipes: {same} gave the same graph hash")
        ok = sum(1 for m in self.meta if m[2])
        print(f"semantics-preserving variants agreeing with their seed on the reference: "
              f"{ok}/{len(self.meta)} = {ok / max(1, len(self.meta)):.1%}")
        for vid, muts, _, err in [m for m in self.meta if not m[2]][:10]:
            print(f"  disagrees: {vid} {muts} tol_ratio {err:.3g}")
        self.report_times()

    def report_times(self) -> None:
        med = statistics.median
        print(f"\ngeneration per variant: median {med(self.gen_s):.3f} s, mean {statistics.mean(self.gen_s):.3f} s")
        print(f"eager reference + fp64 oracle runs per variant: median {med(self.eager_s):.3f} s; "
              f"generation / backends = {sum(self.gen_s) / sum(self.eager_s):.1%}")
        if self.inductor_s:
            ratio = sum(self.inductor_gen) / (sum(self.inductor_s) + sum(self.eager_s[:len(self.inductor_s)]))
            print(f"with Inductor (compile + runs, {len(self.inductor_s)} variants): median "
                  f"{med(self.inductor_s):.2f} s; generation / backends = {ratio:.1%}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", type=int, default=30)
    p.add_argument("--variants", type=int, default=20)
    p.add_argument("--mutations", type=int, default=2)
    p.add_argument("--sources", default="timm,transformers")
    p.add_argument("--max-params", type=int, default=30_000_000)
    p.add_argument("--replays", type=int, default=100)
    p.add_argument("--inductor-per-seed", type=int, default=1, help="variants per seed also timed on Inductor")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    torch.set_num_threads(1)
    rng = random.Random(a.seed)
    pool = [i for s in a.sources.split(",") for i in list_seeds(source=s)]
    settings = VariantSettings(a.variants, include_seed=False, mutations=a.mutations, mutators=list_mutators(),
                               exclude_mutators=[], guidance="uniform", max_tries=8)
    tally, seeds_done = Tally(), 0
    for sid in rng.sample(pool, len(pool)):
        if seeds_done >= a.seeds:
            break
        res = build_seed_variants(BuildRequest(sid, list(range(a.variants)), settings, a.seed, a.max_params))
        if not res.ok:
            print(f"skip {sid}: {res.failure.stage} {res.failure.error_type}", file=sys.stderr)
            continue
        seeds_done += 1
        tally.add_seed(res, a.inductor_per_seed)
        print(f"[{seeds_done}/{a.seeds}] {sid}: {len(res.variants)} variants", file=sys.stderr)
    tally.report(seeds_done, a.replays)
    return 0


if __name__ == "__main__":
    sys.exit(main())

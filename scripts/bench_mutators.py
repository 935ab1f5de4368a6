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
    mutators = list_mutators()
    settings = VariantSettings(a.variants, include_seed=False, mutations=a.mutations, mutators=mutators,
                               exclude_mutators=[], guidance="uniform", max_tries=8)
    tried, rejected = Counter(), Counter()
    ran = total = 0
    failures, recipes, gen_s, eager_s, inductor_s, inductor_gen = [], [], [], [], [], []
    meta_ok = meta_total = 0
    meta_bad = []
    seeds_done = 0
    for sid in rng.sample(pool, len(pool)):
        if seeds_done >= a.seeds:
            break
        res = build_seed_variants(BuildRequest(sid, list(range(a.variants)), settings, a.seed, a.max_params))
        if not res.ok:
            print(f"skip {sid}: {res.stage} {res.error_type}", file=sys.stderr)
            continue
        seeds_done += 1
        tried.update(res.tried)
        rejected.update(res.rejected)
        for k, v in enumerate(res.variants):
            total += 1
            recipes.append((v.recipe, v.graph_hash))
            gen_s.append(v.gen_s)
            if v.metamorphic_ok is not None:
                meta_total += 1
                meta_ok += v.metamorphic_ok
                if not v.metamorphic_ok:
                    meta_bad.append((v.variant_id, v.recipe.mutator_names, v.metamorphic_err))
            var = Variant.from_payload(res.payloads[v.variant_id])
            try:
                cost = timed_runs(var.gm, var.inputs)
                cost += timed_runs(EagerFp64().prepare(var.gm, var.inputs, "cpu"), var.inputs)
                eager_s.append(cost)
                ran += 1
            except Exception as e:  # noqa: BLE001 - counted and shown
                failures.append((v.variant_id, v.recipe.to_json(), f"{type(e).__name__}: {str(e)[:120]}"))
                continue
            if k < a.inductor_per_seed:
                try:
                    t0 = time.perf_counter()
                    fn = Inductor().prepare(var.gm, var.inputs, "cpu")
                    with torch.no_grad():
                        fn(*var.inputs)
                    inductor_s.append(time.perf_counter() - t0 + timed_runs(fn, var.inputs))
                    inductor_gen.append(v.gen_s)
                except Exception:  # noqa: BLE001 - an Inductor failure is a finding, not a benchmark bug
                    pass
                torch._dynamo.reset()
        print(f"[{seeds_done}/{a.seeds}] {sid}: {len(res.variants)} variants", file=sys.stderr)

    print(f"\nseeds {seeds_done}, variants {total}, ran on the reference after a payload round trip: "
          f"{ran}/{total} = {ran / max(1, total):.1%}")
    for vid, recipe, err in failures[:10]:
        print(f"  did not run: {vid} {recipe} {err}")
    print("\nrejections per mutator (rejected / tried):")
    for m in sorted(tried, key=lambda m: -rejected[m] / tried[m]):
        print(f"  {m:24s} {rejected[m]:5d} / {tried[m]:5d} = {rejected[m] / tried[m]:6.1%}")
    sample = random.Random(1).sample(recipes, min(a.replays, len(recipes)))
    same = sum(replay(r).graph_hash == h for r, h in sample)
    print(f"\nreplayed {len(sample)} recipes: {same} gave the same graph hash")
    print(f"semantics-preserving variants agreeing with their seed on the reference: "
          f"{meta_ok}/{meta_total} = {meta_ok / max(1, meta_total):.1%}")
    for vid, muts, err in meta_bad[:10]:
        print(f"  disagrees: {vid} {muts} tol_ratio {err:.3g}")
    med = statistics.median
    print(f"\ngeneration per variant: median {med(gen_s):.3f} s, mean {statistics.mean(gen_s):.3f} s")
    print(f"eager reference + fp64 oracle runs per variant: median {med(eager_s):.3f} s; "
          f"generation / backends = {sum(gen_s) / sum(eager_s):.1%}")
    if inductor_s:
        ratio = sum(inductor_gen) / (sum(inductor_s) + sum(eager_s[:len(inductor_s)]))
        print(f"with Inductor (compile + runs, {len(inductor_s)} variants): median {med(inductor_s):.2f} s; "
              f"generation / backends = {ratio:.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python
"""Per dtype, the share of variants meant to be mutated that came out with no mutation, on operator seeds.

    python scripts/bench_unmutated.py --per-dtype 40 --variants 2 --mutations 1

Builds the variants as a campaign's workers do (``fuzzer.generate.build_seed_variants``, every mutator,
the seed itself left out), on ``--per-dtype`` operator seeds drawn per dtype, and prints per dtype the
variants meant to carry a mutation, how many carry none, and which mutators the others carry. No
backend runs: this measures the generator alone.
"""
from __future__ import annotations

import argparse
import random
import sys
import warnings
from collections import Counter, defaultdict

import torch

from gapfuzz.fuzzer.builds import BuildRequest
from gapfuzz.fuzzer.config.settings import VariantSettings
from gapfuzz.fuzzer.generate import build_seed_variants
from gapfuzz.fuzzer.mutators import list_mutators
from gapfuzz.seeds import list_seeds

DTYPES = ("float32", "float16", "bfloat16", "float64", "int64", "int32", "int16", "int8", "uint8", "bool")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--per-dtype", type=int, default=40)
    p.add_argument("--variants", type=int, default=2, help="variants per seed, each meant to be mutated")
    p.add_argument("--mutations", type=int, default=1)
    p.add_argument("--dtypes", default=",".join(DTYPES))
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")  # operator samples warn of deprecated calls
    settings = VariantSettings(a.variants, include_seed=False, mutations=a.mutations, mutators=list_mutators(),
                               exclude_mutators=[], guidance="uniform", max_tries=8)
    rng = random.Random(a.seed)
    meant, none, failed, carried = Counter(), Counter(), Counter(), defaultdict(Counter)
    for dtype in a.dtypes.split(","):
        pool = list_seeds(f"ops/*/{dtype}/*", source="ops")
        for seed_id in rng.sample(pool, min(a.per_dtype, len(pool))):
            build = build_seed_variants(BuildRequest(seed_id, list(range(a.variants)), settings, a.seed, None,
                                                     use_cache=False))
            if not build.ok:
                failed[dtype] += 1
                continue
            for v in build.variants:
                meant[dtype] += 1
                none[dtype] += not v.recipe.mutations
                carried[dtype].update(v.recipe.mutator_names)
        print(f"{dtype:9s} {none[dtype]:4d} of {meant[dtype]:4d} carry no mutation "
              f"({none[dtype] / max(1, meant[dtype]):6.1%}); seeds that did not build: {failed[dtype]}; "
              f"most carried: {', '.join(f'{m} {c}' for m, c in carried[dtype].most_common(4))}", flush=True)
    worst = max(meant, key=lambda d: none[d] / max(1, meant[d]), default=None)
    if worst:
        print(f"worst: {worst} {none[worst] / meant[worst]:.1%}; all: {sum(none.values())} of {sum(meant.values())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""How well a campaign covers its targets' option spaces: per seed and mode, the pairs of option values
run out of the pairs in the space (and the option values run out of those in it).

    python scripts/option_coverage.py campaigns/inductor.yaml [runs/inductor]

From the plan (the option set every planned variant gets, no run needed) under the target's
``option_cover`` and, to compare, under ``draw`` (one random draw per variant); given a run folder,
from its records too. The counting is ``analysis.option_cover``'s, for the plan and the records alike.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gapfuzz.analysis.option_cover import pair_coverage
from gapfuzz.core.covering import DRAW


def planned(c, spec, seeds: list[str]) -> pd.DataFrame:
    """Records as the plan would make them: one per planned variant of ``spec``, with its option set."""
    from gapfuzz.fuzzer.config.plan import plan
    from gapfuzz.fuzzer.recipe import variant_id

    rows = []
    for w in plan(c, seeds, set(), [spec.name]):
        for i in w.indices:
            options = spec.for_variant(variant_id(w.seed_id, i, w.mode), c.seed, w.seed_id, i, w.mode).options
            rows.append({"backend": spec.name, "seed_id": w.seed_id, "mode": str(w.mode),
                         "backend_options": json.dumps(options, default=str), "backend_version": "planned"})
    return pd.DataFrame(rows, columns=["backend", "seed_id", "mode", "backend_options", "backend_version"])


def summary(per_seed: pd.DataFrame, whole: pd.DataFrame, label: str, variants) -> pd.DataFrame:
    """One row per (target, mode, variants a seed has in a mode): pairs a seed runs (mean, fewest, most),
    seeds with every value, and the pairs the whole campaign runs in that mode."""
    out = []
    per_seed = per_seed.assign(variants=per_seed["seed_id"].map(variants))
    for (backend, mode, n), g in per_seed.groupby(["backend", "mode", "variants"], sort=True):
        w = whole[(whole["backend"] == backend) & (whole["mode"] == mode)].iloc[0]
        out.append({"backend": backend, "from": label, "mode": mode, "variants a seed": n, "seeds": len(g),
                    "pairs a seed runs (mean)": f"{g['pairs'].mean():.1f}/{w['of']}",
                    "fewest": int(g["pairs"].min()), "most": int(g["pairs"].max()),
                    "share (mean)": f"{g['share'].mean():.0%}",
                    "seeds with every value": f"{int((g['values'] == g['of_values']).sum())}/{len(g)}",
                    "campaign's pairs": f"{w['pairs']}/{w['of']}"})
    return pd.DataFrame(out)


def coverage(df: pd.DataFrame, spaces: dict, label: str, variants) -> pd.DataFrame:
    """``summary`` per mode, then with a seed's modes together (mode ``both``: its option sets of every mode)."""
    both = "both"
    return pd.concat([summary(pair_coverage(df, spaces), pair_coverage(df, spaces, ("mode",)), label, variants),
                      summary(pair_coverage(df, spaces, ("seed_id",)).assign(mode=both),
                              pair_coverage(df, spaces, ()).assign(mode=both), label, variants)], ignore_index=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("campaign", help="a campaign file")
    ap.add_argument("run", nargs="?", help="a run folder of that campaign: its records' coverage too")
    args = ap.parse_args(argv)
    from gapfuzz.fuzzer.config.campaign import load_campaign
    from gapfuzz.fuzzer.config.plan import select_seeds, variant_count, with_sizes

    c = load_campaign(args.campaign)
    specs = [t for t in c.backends.targets if t.option_space]
    if not specs:
        print(f"{args.campaign}: no target has an option_space")
        return 0
    seeds = with_sizes(c, select_seeds(c))
    parts = []
    variants = lambda seed_id: variant_count(c, seed_id)  # noqa: E731
    for spec in specs:
        spaces = {spec.name: spec.option_space}
        parts.append(coverage(planned(c, spec, seeds), spaces, f"plan, {spec.option_cover}", variants))
        if spec.option_cover != DRAW:
            parts.append(coverage(planned(c, dataclasses.replace(spec, option_cover=DRAW), seeds), spaces,
                                  "plan, draw", variants))
    if args.run:
        from gapfuzz.analysis.api import load_run

        run = load_run(args.run)
        df = run.records(["backend", "seed_id", "mode", "backend_options", "backend_version"])
        parts.append(coverage(df, run.option_spaces(), "records", variants))
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(pd.concat(parts, ignore_index=True).to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

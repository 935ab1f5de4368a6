"""A stack that cannot run on this host says so once: after its prepare has killed its process on a few
variants, the rest of its pairs are skipped with the reason, a healthy target beside it runs every variant,
and triage classes its crashes "unusable here", not a vendor finding (until seen on a second host)."""
from __future__ import annotations

import logging

import pytest

from tests.conftest import run_campaign

DIES = "dies-preparing@cpu"
CAMPAIGN = """
name: unusable
seeds: [{source: ops, include: ["ops/nn.functional.relu/float32/0"]}]
variants: {per_seed: 6, mutations: 1, mutators: [insert_unary]}
sizes: {per_seed: 0, widths: 0}
probes: {per_variant: 1}
backends:
  targets:
    - {class: "tests.stacks.crashing_backends:DiesPreparing", device: cpu}
    - {backend: eager@cpu, label: eager-copy}
pools: {cpu: {workers: 1}}
run: {repeats: 1}
compare: {align: false, bisect: false}
"""


@pytest.mark.ray
def test_a_stack_that_dies_preparing_is_skipped_here_after_three_variants(tmp_path, local_ray, caplog):
    import pandas as pd

    from gapfuzz.analysis.api import CLUSTER_COLUMNS
    from gapfuzz.analysis.clusters import UNUSABLE_HERE, clusters
    from gapfuzz.analysis.vendor import digest
    from gapfuzz.fuzzer.unusable import THRESHOLD

    with caplog.at_level(logging.WARNING, logger="gapfuzz.fuzzer"):
        run = run_campaign(CAMPAIGN, tmp_path / "run")
    df = run.records()
    variants = set(df.loc[df["backend"] == run.reference, "variant_id"])
    assert len(variants) >= 6

    mine = df[df["backend"] == DIES]
    crashed = mine[mine["status"] == "crash"]
    skipped = mine[mine["status"] == "skipped"]
    assert crashed["variant_id"].nunique() == THRESHOLD, mine[["variant_id", "status", "message"]]
    assert set(crashed["variant_id"]) | set(skipped["variant_id"]) == variants
    assert not set(crashed["variant_id"]) & set(skipped["variant_id"])
    assert (skipped["error_type"] == "UnusableHere").all()
    assert skipped["message"].str.contains("every prepare dies with SIGSEGV on host").all()
    assert (skipped["signature"] == crashed["signature"].iloc[0]).all()  # the crash that made the mark

    healthy = df[df["backend"] == "eager-copy@cpu"]
    assert set(healthy["variant_id"]) == variants and (healthy["status"] == "ok").all()

    lines = [r.getMessage() for r in caplog.records if "every prepare dies" in r.getMessage()]
    assert len(lines) == 1 and lines[0].startswith(f"{DIES}: every prepare dies with SIGSEGV on host"), lines

    c = run.clusters()
    here = c[c["backends"].map(lambda b: DIES in b)]
    assert len(here) == 1 and here["level"].iloc[0] == UNUSABLE_HERE and not here["vendor"].iloc[0]
    assert here["count"].iloc[0] == len(crashed)
    assert not run.clusters(vendor=True)["backends"].map(lambda b: DIES in b).any()
    assert digest(run, DIES, tmp_path / "vendor") == []  # nothing to report to the stack's vendor

    # the same crash on a second host is a finding again
    frame = run.records(CLUSTER_COLUMNS)
    elsewhere = frame.loc[crashed.index].assign(host="another-host")
    found = clusters(pd.concat([frame, elsewhere], ignore_index=True), run.reference, run.oracle)
    again = found[found["backends"].map(lambda b: DIES in b)]
    assert len(again) == 1 and again["vendor"].iloc[0] and again["level"].iloc[0] == "crash"

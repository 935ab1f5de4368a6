"""The width axis in a campaign: a fault past a 1024-wide row is found with the default widths."""
from __future__ import annotations

import pytest

from gapfuzz.core.ids import SeedId

WIDE = """
name: wide
seed: 0
seeds:
  - {source: transformers, include: ["hf/bert/masked-lm"]}
variants: {per_seed: 1}
sizes: {per_seed: 0}  # widths as by default: one per seed
backends:
  targets: [{class: "tests.stacks.probe_backends:NarrowLayerNorm", device: cpu}]
pools: {cpu: {workers: 2}}
run: {repeats: 1}
"""


@pytest.mark.ray
def test_a_layer_norm_that_reads_one_block_of_a_row_is_found_only_at_a_width(tmp_path, local_ray):
    from gapfuzz.analysis.api import load_run
    from gapfuzz.core.strict_yaml import load
    from gapfuzz.fuzzer.config.campaign import from_dict
    from gapfuzz.fuzzer.driver import Driver

    Driver(from_dict(load(WIDE, "wide"), "wide"), tmp_path / "wide", progress=False).run()
    runs = load_run(tmp_path / "wide").records()
    mine = runs[runs["backend"] == "narrow-layer-norm@cpu"]
    wrong = set(mine[mine["status"] == "mismatch"]["seed_id"])
    assert wrong == {"hf/bert/masked-lm@w2050"}, sorted(set(mine["seed_id"]))  # the first width handed out
    own = mine[mine["seed_id"] == "hf/bert/masked-lm"]["status"]  # bounds probes the reference refuses are skipped
    assert (own == "ok").any() and own.isin(["ok", "skipped"]).all()
    assert SeedId.parse(next(iter(wrong))).width > 1024
    found = load_run(tmp_path / "wide").clusters(vendor=True)
    assert found["backends"].map(lambda b: "narrow-layer-norm@cpu" in b).any()

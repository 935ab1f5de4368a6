"""``run --check``'s wall-time estimate: pair times remembered from earlier campaigns, read back as data."""
from __future__ import annotations

import json

import pyarrow as pa
import pytest

from gapfuzz.fuzzer.config.estimate import START_S, TIMINGS, estimate, read_timings, remember


def _records(rows):
    names = ("variant_id", "backend", "seed_id", "mode", "worker_s")
    return pa.table({n: [r[i] for r in rows] for i, n in enumerate(names)})


def test_a_pair_is_priced_by_its_seed_then_its_backend_s_seeds_of_its_kind_then_a_guess(tmp_path):
    remember(_records([  # two probes of one pair add up; two pairs of a seed average
        ("ops/aten.relu#0", "inductor@cpu", "ops/aten.relu", "inference", 1.5),
        ("ops/aten.relu#0", "inductor@cpu", "ops/aten.relu", "inference", 0.5),
        ("ops/aten.relu#1", "inductor@cpu", "ops/aten.relu", "inference", 4.0),
        ("timm/test_vit#0", "inductor@cpu", "timm/test_vit", "inference", 40.0),
    ]), tmp_path)
    timings = read_timings(tmp_path)
    assert timings["inductor@cpu|inference|ops/aten.relu"] == (3.0, 2)
    planned = {("inductor@cpu", "inference", "ops/aten.relu"): 4,  # its own: 4 x 3 s
               ("inductor@cpu", "inference", "ops/aten.sin"): 2,  # an op on inductor: 2 x 3 s
               ("inductor@cpu", "inference", "timm/test_resnet"): 1,  # a model on inductor: 40 s
               ("openvino@cpu", "inference", "ops/aten.sin"): 5}  # never timed: guessed
    e = estimate(planned, workers=2, timings=timings)
    assert (e.pairs, e.timed, e.like, e.guessed) == (12, 4, 3, 5)
    assert e.seconds == pytest.approx(START_S + (12 + 6 + 40 + 5 * 2.0) / 2)
    assert "4 of 12 pairs timed" in e.line(2) and "3 from other seeds" in e.line(2)
    # a later campaign's measure of the same seed replaces it; the others stay
    remember(_records([("ops/aten.relu#0", "inductor@cpu", "ops/aten.relu", "inference", 1.0)]), tmp_path)
    assert read_timings(tmp_path)["inductor@cpu|inference|ops/aten.relu"] == (1.0, 1)
    assert "inductor@cpu|inference|timm/test_vit" in read_timings(tmp_path)


def test_a_timings_file_is_data_and_what_is_not_a_number_is_left_out(tmp_path):
    (tmp_path / TIMINGS).write_text(json.dumps({
        "a@cpu|inference|ops/x": [2.0, 3], "b@cpu|inference|ops/x": ["__import__('os')", 1],
        "c@cpu|inference|ops/x": [float("nan"), 1], "d@cpu|inference|ops/x": [1.0, 0], "e": True}))
    assert read_timings(tmp_path) == {"a@cpu|inference|ops/x": (2.0, 3)}
    (tmp_path / TIMINGS).write_text("[1, 2")
    assert read_timings(tmp_path) == {}
    assert estimate({}, 2, {}).seconds == 0.0

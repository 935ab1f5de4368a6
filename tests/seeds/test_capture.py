"""torch.export capture: the flat IR computes exactly what the model computes."""
from __future__ import annotations

import pytest
import torch

from gapfuzz.seeds import SeedError, create_seed, list_seeds
from gapfuzz.seeds.capture import CaptureError, capture


def test_timm_test_models_are_listed_without_building():
    ids = list_seeds(filter="test_*", source="timm")
    assert "timm/test_resnet" in ids and len(ids) >= 10
    assert list_seeds(filter="timm/test_res*") == ["timm/test_resnet"]
    assert "timm/test_vit" not in list_seeds(filter="test_*", source="timm", exclude="*vit*")


def test_capture_matches_eager_bit_for_bit():
    seed = create_seed("timm/test_resnet")
    expected = seed.model(*seed.args)
    cap = capture(seed)
    v = cap.variant
    assert not [n for n in v.gm.graph.nodes if n.op == "placeholder" and n.name.startswith("p_")]
    assert v.output_names == ("out",)
    assert torch.equal(v.gm(*v.inputs)[0], expected)
    assert "aten.conv2d.default" in v.ops and not any(op.endswith("_.default") for op in v.ops)


def test_seeds_are_deterministic():
    a, b = capture(create_seed("timm/test_vit")).variant, capture(create_seed("timm/test_vit")).variant
    assert a.graph_hash == b.graph_hash
    assert a.weight_checksum() == b.weight_checksum() and a.input_checksum() == b.input_checksum()


def test_budget_and_unknown_ids_are_clear():
    with pytest.raises(CaptureError) as e:
        capture(create_seed("timm/test_resnet"), max_params=10)
    assert e.value.stage == "budget" and "exceed the cap" in str(e.value)
    with pytest.raises(SeedError, match="no_such_model"):
        create_seed("timm/no_such_model")
    with pytest.raises(SeedError, match="no known source prefix"):
        create_seed("nope/x")

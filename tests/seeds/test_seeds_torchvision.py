"""torchvision seeds: every model listed, inputs per task, seeded weights."""
from __future__ import annotations

import torch

from gapfuzz.seeds import create_seed, list_seeds
from gapfuzz.seeds.capture import capture


def test_every_torchvision_model_is_listed():
    ids = list_seeds(source="torchvision")
    assert len(ids) >= 100
    assert {"tv/resnet18", "tv/fasterrcnn_resnet50_fpn", "tv/r3d_18", "tv/raft_small", "tv/fcn_resnet50"} <= set(ids)


def test_tasks_get_their_inputs():
    seg = create_seed("tv/lraspp_mobilenet_v3_large")
    assert seg.info.task == "semantic-segmentation" and seg.info.output_kind == "masks"
    det = create_seed("tv/ssdlite320_mobilenet_v3_large")
    assert det.info.output_kind == "boxes" and isinstance(det.args[0], list)
    flow = create_seed("tv/raft_small")
    assert len(flow.args) == 2 and flow.info.output_kind == "flow"


def test_segmentation_seed_captures_with_named_outputs():
    seed = create_seed("tv/lraspp_mobilenet_v3_large")
    expected = seed.model(*seed.args)["out"]
    v = capture(seed).variant
    assert v.output_names == ("out",)
    assert torch.equal(v.gm(*v.inputs)[0], expected)

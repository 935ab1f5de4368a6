"""The size axis: seeds rebuilt at other sizes, chosen in bands, planned as seeds of their own."""
from __future__ import annotations

import pytest
import torch
from torch.testing._internal.opinfo.core import SampleInput

from gapfuzz.core.ids import SeedId
from gapfuzz.fuzzer.config.campaign import CampaignError, from_dict
from gapfuzz.fuzzer.config.plan import plan, select_seeds, with_sizes
from gapfuzz.seeds import create_seed
from gapfuzz.seeds.sizes import DIMENSION_SIZES, SizeError, choose
from gapfuzz.seeds.sources.op_sizes import resize

BASE = {"backends": {"targets": ["inductor@cpu"]}}


def test_a_sized_id_reads_back_and_refuses_a_size_that_is_no_number():
    assert SeedId.parse("ops/sum/float32/0@1025") == SeedId("ops/sum/float32/0", 1025)
    assert str(SeedId("timm/test_vit", 48)) == "timm/test_vit@48"
    assert SeedId.parse("timm/test_vit").size is None
    along = SeedId.parse("ops/softmax/float32/1@d4097")
    assert along == SeedId("ops/softmax/float32/1", along=4097) and str(along) == "ops/softmax/float32/1@d4097"
    with pytest.raises(Exception, match="whole number"):
        SeedId.parse("timm/test_vit@big")


def test_every_draw_holds_a_small_a_middle_and_a_large_size():
    for key in range(50):
        small, middle, large = choose(DIMENSION_SIZES, 3, str(key))
        assert small <= 17 and 31 <= middle <= 1024 and large > 1024
    assert choose(DIMENSION_SIZES, 3, "a") == choose(DIMENSION_SIZES, 3, "a")
    assert choose([5, 6], 3, "a") == [5, 6] and choose(DIMENSION_SIZES, 0, "a") == []


def test_an_operator_sample_is_rebuilt_with_its_main_dimension_at_the_size():
    seed = create_seed("ops/sum/float32/0@1025")  # a scalar sample becomes a vector
    assert [tuple(t.shape) for t in seed.args] == [(1025,)] and seed.info.extra["size"] == 1025
    assert seed.args[0].unique().numel() > 100  # values drawn, not one value repeated
    mm = create_seed("ops/mm/float32/0")
    big = create_seed("ops/mm/float32/0@129")
    side = mm.args[0].shape[-1]
    assert all(s == 129 or s in mm.args[0].shape + mm.args[1].shape for t in big.args for s in t.shape)
    assert side != 129 and any(129 in t.shape for t in big.args)
    assert torch.isfinite(big.model(*big.args)).all()


def test_a_size_a_seed_cannot_take_is_refused_with_a_reason():
    with pytest.raises(SizeError, match="does not run at size 33: .*divisible by patch size"):
        create_seed("timm/test_vit@33")
    with pytest.raises(SizeError, match="no non-empty dimension"):
        resize(SampleInput(torch.zeros(3, 0)), 5, "key")
    assert create_seed("timm/test_resnet@65").args[0].shape[-2:] == (65, 65)


def test_a_model_keeps_its_weights_at_every_size():
    a, b = create_seed("timm/test_resnet"), create_seed("timm/test_resnet@96")
    assert b.args[0].shape[-2:] == (96, 96) and torch.equal(a.model.fc.weight, b.model.fc.weight)
    vit = create_seed("timm/test_vit@96")  # built for its size: the patch grid follows it
    assert vit.args[0].shape[-1] == 96 and vit.model.patch_embed.img_size == (96, 96)
    bert = create_seed("hf/bert/masked-lm@33")
    assert bert.kwargs["input_ids"].shape[-1] == 33
    long = create_seed("hf/gpt2/causal-lm@1025")  # past the tiny config's positions: as many as tokens
    assert long.kwargs["input_ids"].shape[-1] == 1025 and long.model.config.n_positions == 1025


def test_a_campaign_plans_its_sizes_as_seeds_of_their_own_with_fewer_variants():
    c = from_dict({**BASE, "seeds": [{"source": "ops", "include": ["ops/sum/float32/0"]},
                                     {"source": "timm", "include": ["test_vit"]}],
                   "variants": {"per_seed": 3}, "sizes": {"per_seed": 2, "variants": 1, "widths": 0}})
    ids = with_sizes(c, select_seeds(c))
    assert ids[0] == "ops/sum/float32/0" and ids[3] == "timm/test_vit" and len(ids) == 6
    assert all(SeedId.parse(i).size is not None for i in ids[1:3] + ids[4:])
    counts = {w.seed_id: len(w.indices) for w in plan(c, ids, set())}
    assert counts["ops/sum/float32/0"] == 3 and counts[ids[1]] == 1
    off = from_dict({**BASE, "seeds": [{"source": "timm", "include": ["test_vit"]}],
                     "sizes": {"per_seed": 0, "widths": 0}})
    assert with_sizes(off, select_seeds(off)) == ["timm/test_vit"]


def test_a_campaign_plans_widths_as_seeds_of_their_own_past_1024():
    c = from_dict({**BASE, "seeds": [{"source": "ops", "include": ["ops/mm/float32/0"]},
                                     {"source": "timm", "include": ["test_vit", "test_efficientnet"]},
                                     {"source": "transformers", "include": ["hf/llama/causal-lm"]}],
                   "sizes": {"per_seed": 0, "widths": 2}})
    ids = with_sizes(c, select_seeds(c))
    wide = {i: SeedId.parse(i) for i in ids if SeedId.parse(i).width is not None}
    assert {w.base for w in wide.values()} == {"ops/mm/float32/0", "timm/test_vit", "hf/llama/causal-lm"}
    assert all(len([w for w in wide.values() if w.base == b]) == 2 for b in ("timm/test_vit", "hf/llama/causal-lm"))
    # handed out per source in width_order: a tail past 2048 and its multiple first
    assert [w.width for w in wide.values() if w.base == "timm/test_vit"] == [2050, 2048]
    assert [w.width for w in wide.values() if w.base == "ops/mm/float32/0"] == [2050, 2048]
    assert with_sizes(c, select_seeds(c)) == ids  # the same draw every time


def test_widths_are_handed_out_over_a_campaign_a_tail_past_2048_first():
    from gapfuzz.seeds.sizes import WIDTHS, width_order

    assert width_order(WIDTHS) == [2050, 2048, 4098, 4096, 1026, 1024, 768]
    assert width_order([768, 1000, 3000, 4096]) == [3000, 1000, 4096, 768]  # a tail without its multiple listed
    c = from_dict({**BASE, "seeds": [{"source": "timm", "include": ["test_resnet", "test_vit", "test_convnext"]}],
                   "sizes": {"per_seed": 0}})  # one width per seed, as by default
    widths = [SeedId.parse(i).width for i in with_sizes(c, select_seeds(c)) if SeedId.parse(i).width]
    assert widths == [2050, 2048, 4098]  # the first seed takes a tail past 2048 even alone


@pytest.mark.parametrize("seed_id, width", [("hf/llama/causal-lm@w1026", 1026), ("timm/test_vit@w2048", 2048),
                                            ("timm/test_resnet@w1024", 1024), ("tv/vit_b_16@w1024", 1024)])
def test_a_model_rebuilt_at_a_width_has_that_many_features(seed_id, width):
    from gapfuzz.seeds.registry import create_seed

    built = create_seed(seed_id)
    model = built.model
    got = getattr(getattr(model, "config", None), "hidden_size", None) or getattr(model, "num_features", None) \
        or getattr(model, "hidden_dim", None)
    assert got == width and SeedId.parse(built.info.id).width == width


def test_layer_norm_is_rebuilt_at_a_size_and_a_width_with_its_normalised_shape():
    from gapfuzz.seeds.registry import create_seed

    sized = create_seed("ops/nn.functional.layer_norm/float32/1@4098")
    assert all(t.shape[-1] == 4098 for t in sized.args)
    wide = create_seed("ops/mm/float32/0@w2048")  # its rows and its contraction: rows shrunk to fit the cap
    assert wide.args[0].shape[1] == wide.args[1].shape[0] == 2048 and wide.args[0].shape[0] == 512


def test_a_width_past_the_parameter_cap_is_refused_saying_so():
    from gapfuzz.seeds.capture import CaptureError, capture
    from gapfuzz.seeds.registry import create_seed

    with pytest.raises(CaptureError, match="parameters exceed the cap of 10,000,000"):
        capture(create_seed("timm/test_vit@w1024"), max_params=10_000_000)


def test_a_timm_model_that_takes_no_width_is_not_drawn_at_one():
    from gapfuzz.seeds.registry import get_source
    from gapfuzz.seeds.sizes import WIDTHS, SizeError

    assert get_source("timm").width_points("timm/test_efficientnet", list(WIDTHS)) == []
    with pytest.raises(SizeError, match="takes no width"):
        get_source("timm").build("timm/test_efficientnet@w1024")


@pytest.mark.parametrize("sizes, message", [({"values": []}, "sizes.values"), ({"per_seed": -1}, "sizes.per_seed"),
                                            ({"values": [3, -2]}, "sizes.values"), ({"variant": 1}, "variant")])
def test_bad_size_keys_are_one_line_naming_the_key(sizes, message):
    with pytest.raises(CampaignError, match=message):
        from_dict({**BASE, "seeds": [{"source": "timm"}], "sizes": sizes})


def test_inductor_takes_dynamic_shapes_as_an_option():
    from gapfuzz.workers.backends.inductor import Inductor

    assert Inductor().check_options({"dynamic": True}) is None
    assert "did you mean 'dynamic'" in Inductor().check_options({"dynamc": True})


def test_torchvision_rebuilds_classifiers_at_a_size_and_not_detectors():
    from gapfuzz.seeds.registry import source_of

    assert create_seed("tv/squeezenet1_1@65").args[0].shape[-2:] == (65, 65)
    assert source_of("tv/squeezenet1_1").size_points("tv/squeezenet1_1", []) != []
    assert source_of("tv/fasterrcnn_resnet50_fpn").size_points("tv/fasterrcnn_resnet50_fpn", []) == []
    with pytest.raises(SizeError, match="only classification and segmentation"):
        create_seed("tv/fasterrcnn_resnet50_fpn@64")

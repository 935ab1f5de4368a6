"""core.ids: each identifier reads back from its one string form, and a malformed one is refused."""
import pytest

from gapfuzz.core.ids import BackendName, CulpritName, IdError, SeedId, VariantId


@pytest.mark.parametrize("text", ["timm/test_vit", "timm/test_vit@96", "ops/sum/float32/0@w2050",
                                  "ops/softmax/float32/1@d4097", "hf/bert/masked-lm"])
def test_a_seed_id_reads_back(text):
    assert str(SeedId.parse(text)) == text


def test_a_seed_id_names_its_source_and_name():
    s = SeedId.parse("torchvision/resnet18/backbone@64")
    assert (s.source, s.name, s.size, s.rebuilt) == ("torchvision", "resnet18/backbone", 64, True)
    with pytest.raises(IdError, match="whole number"):
        SeedId.parse("timm/test_vit@big")


@pytest.mark.parametrize("text", ["timm/test_vit#0", "timm/test_vit@96#4:train", "ops/add/float16/0#12"])
def test_a_variant_id_reads_back(text):
    assert str(VariantId.parse(text)) == text


def test_a_variant_id_splits_into_seed_index_and_mode():
    v = VariantId.parse("timm/test_vit@96#4:train")
    assert (v.seed, v.index, v.train) == ("timm/test_vit@96", 4, True)
    assert SeedId.parse(v.seed).size == 96
    assert VariantId.parse("timm/test_vit#seed:train") == VariantId("timm/test_vit", "seed", True)
    for bad in ("timm/test_vit", "#3", "timm/test_vit#", "timm/test_vit#1-2"):
        with pytest.raises(IdError, match="variant id"):
            VariantId.parse(bad)


def test_a_backend_name_is_a_stack_on_a_device():
    b = BackendName.parse("inductor@cuda")
    assert (b.stack, b.device, str(b.on("cpu"))) == ("inductor", "cuda", "inductor@cpu")
    assert BackendName.stack_of("ov@cpu") == "ov" and BackendName.stack_of("label") == "label"
    assert BackendName.loose("label") == BackendName("label", "")
    for bad in ("inductor", "@cpu", "inductor@"):
        with pytest.raises(IdError, match="stack@device"):
            BackendName.parse(bad)


def test_a_culprit_names_backend_subsystem_and_pass():
    c = CulpritName.parse("inductor:post_grad_passes:pattern_matcher")
    assert (c.backend, c.subsystem, c.pass_name, c.last) == ("inductor", "post_grad_passes", "pattern_matcher",
                                                             "pattern_matcher")
    assert str(CulpritName.parse("aot_eager_decomp_partition:decomposition")) == \
        "aot_eager_decomp_partition:decomposition"
    assert CulpritName.parse("inductor").last == "inductor"

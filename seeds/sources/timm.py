"""Every timm architecture, built with seeded random weights at its pretrained input size.

Sizes (``timm/resnet18@129``): the image side. Models whose pretrained config fixes the input
size (ViTs, Swin) are built for it (``img_size``); the others take the new input as they are.
Widths (``timm/test_vit@w1024``): the features before the classifier, reached by the constructor
argument the model has (``embed_dim``, ``dims``, ``channels``, ``num_features``), with one block per
stage so a wide model stays cheap (``width_kwargs``).
"""
from __future__ import annotations

import functools

import torch

from gapfuzz.core.ids import SeedId
from gapfuzz.core.seeding import seeded_generator, stable_int

from ..registry import SeedError, SeedSource, register_source
from ..sizes import IMAGE_SIDES, PATCH_GRID_SIDES, SizeError
from ..spec import BuiltSeed, SeedInfo, count_params, input_spec_of


@register_source
class TimmSource(SeedSource):
    name = "timm"
    prefix = "timm"

    def list_ids(self) -> list[str]:
        import timm
        return [f"timm/{m}" for m in timm.list_models()]

    def size_points(self, seed_id: str, dimension_sizes: list[int]) -> list[int]:
        import timm

        name = SeedId.parse(seed_id).name
        cfg = timm.models.get_pretrained_cfg(name) if timm.is_model(name) else None
        return list(PATCH_GRID_SIDES if getattr(cfg, "fixed_input_size", False) else IMAGE_SIDES)

    def width_points(self, seed_id: str, widths: list[int]) -> list[int]:
        name = SeedId.parse(seed_id).name
        try:
            return list(widths) if width_kwargs(name, max(widths or [1])) else []
        except Exception:  # noqa: BLE001 - a model that cannot be looked at on the meta device has no width
            return []

    def width_params(self, seed_id: str) -> int | None:
        import timm

        sized = SeedId.parse(seed_id)
        name = sized.name
        wide = width_kwargs(name, sized.width) if sized.width and timm.is_model(name) else {}
        if not wide:
            return None
        with torch.device("meta"):
            return count_params(timm.create_model(name, pretrained=False, **wide))

    def build(self, seed_id: str) -> BuiltSeed:
        import timm
        from timm.models import _registry

        sized = SeedId.parse(seed_id)
        name = sized.name
        if not timm.is_model(name):
            raise SeedError(f"unknown timm model {name!r} in seed id {seed_id!r}")
        cfg = timm.models.get_pretrained_cfg(name)
        input_size = tuple(getattr(cfg, "input_size", None) or (3, 224, 224))
        kwargs = {}
        if sized.size is not None:
            input_size = (input_size[0], sized.size, sized.size)
            if getattr(cfg, "fixed_input_size", False):
                kwargs["img_size"] = sized.size
        if sized.width is not None:
            wide = width_kwargs(name, sized.width)
            if not wide:
                raise SizeError(f"{seed_id}: timm's {name} takes no width argument (embed_dim, dims, channels, "
                                "num_features)")
            kwargs.update(wide)
        torch.manual_seed(stable_int(sized.base))  # the same weights at every size where shapes allow
        try:
            model = timm.create_model(name, pretrained=False, **kwargs).eval()
        except Exception as e:
            if sized.width is None:
                raise
            raise SizeError(f"{seed_id}: does not build at width {sized.width}: {type(e).__name__}: "
                            f"{(str(e).strip().splitlines() or [''])[0][:200]}") from e
        x = torch.randn((1, *input_size), generator=seeded_generator(seed_id + "#input"))
        info = SeedInfo(
            id=seed_id, source=self.name,
            family=_registry._model_to_module.get(name, name.split("_")[0]),
            task="image-classification", output_kind="class_logits",
            input_spec=input_spec_of((x,), {}), params=count_params(model),
        )
        return BuiltSeed(info, model, (x,))


def width_kwargs(name: str, width: int) -> dict:
    return dict(_checked_width_kwargs(name, width))  # a copy: callers add to it


@functools.lru_cache(maxsize=256)
def _checked_width_kwargs(name: str, width: int) -> dict:
    """Constructor arguments that put ``name``'s features before the classifier at ``width`` (stages
    scaled alike, one block each), read from the model built on the meta device; {} if it has none
    or they do not build there."""
    import timm

    out = _width_kwargs(name, width)
    try:
        with torch.device("meta"):
            timm.create_model(name, pretrained=False, **out)
    except Exception:  # noqa: BLE001 - the entrypoint fixes that argument itself, or the widths clash
        return {}
    return out


def _width_kwargs(name: str, width: int) -> dict:
    import inspect

    import timm

    with torch.device("meta"):
        model = timm.create_model(name, pretrained=False)
    takes = inspect.signature(type(model).__init__).parameters
    scale = width / max(1, int(model.num_features))
    stages = [int(f["num_chs"]) for f in getattr(model, "feature_info", [])]
    heads = getattr(getattr(getattr(model, "blocks", [None])[0], "attn", None), "num_heads", None)
    if "embed_dim" in takes and isinstance(getattr(model, "embed_dim", None), int):
        embed = max(1, round(model.embed_dim * scale))
        out = {"embed_dim": embed}
        if isinstance(heads, int) and "num_heads" in takes:
            head_dim = model.embed_dim // heads
            out["num_heads"] = embed // head_dim if embed % head_dim == 0 else 1
        if "depth" in takes:
            out["depth"] = 1
        return out
    if "dims" in takes and stages:
        return {"dims": tuple(max(1, round(c * scale)) for c in stages[-4:]),
                **({"depths": (1,) * len(stages[-4:])} if "depths" in takes else {})}
    if "channels" in takes and all(hasattr(model, f"layer{i}") for i in range(1, 5)):
        planes = []
        for i in range(1, 5):
            block = getattr(model, f"layer{i}")[0]
            conv = getattr(block, "conv3", None) or block.conv2
            planes.append(conv.out_channels // getattr(block, "expansion", 1))
        return {"channels": tuple(max(1, round(p * scale)) for p in planes),
                **({"layers": (1, 1, 1, 1)} if "layers" in takes else {})}
    if "num_features" in takes:
        return {"num_features": width}
    return {}

"""Every timm architecture, built with seeded random weights at its pretrained input size.

Sizes (``timm/resnet18@129``): the image side. Models whose pretrained config fixes the input
size (ViTs, Swin) are built for it (``img_size``); the others take the new input as they are.
"""
from __future__ import annotations

import torch

from core.seeding import seeded_generator, stable_int

from ..registry import SeedError, SeedSource, register_source
from ..sizes import IMAGE_SIDES, PATCH_GRID_SIDES, SizedId
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

        name = seed_id.split("/", 1)[1]
        cfg = timm.models.get_pretrained_cfg(name) if timm.is_model(name) else None
        return list(PATCH_GRID_SIDES if getattr(cfg, "fixed_input_size", False) else IMAGE_SIDES)

    def build(self, seed_id: str) -> BuiltSeed:
        import timm
        from timm.models import _registry

        sized = SizedId.parse(seed_id)
        name = sized.base.split("/", 1)[1]
        if not timm.is_model(name):
            raise SeedError(f"unknown timm model {name!r} in seed id {seed_id!r}")
        cfg = timm.models.get_pretrained_cfg(name)
        input_size = tuple(getattr(cfg, "input_size", None) or (3, 224, 224))
        kwargs = {}
        if sized.size is not None:
            input_size = (input_size[0], sized.size, sized.size)
            if getattr(cfg, "fixed_input_size", False):
                kwargs["img_size"] = sized.size
        torch.manual_seed(stable_int(sized.base))  # the same weights at every size where shapes allow
        model = timm.create_model(name, pretrained=False, **kwargs).eval()
        x = torch.randn((1, *input_size), generator=seeded_generator(seed_id + "#input"))
        info = SeedInfo(
            id=seed_id, source=self.name,
            family=_registry._model_to_module.get(name, name.split("_")[0]),
            task="image-classification", output_kind="class_logits",
            input_spec=input_spec_of((x,), {}), params=count_params(model),
        )
        return BuiltSeed(info, model, (x,))

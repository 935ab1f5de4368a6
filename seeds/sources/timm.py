"""Every timm architecture, built with seeded random weights at its pretrained input size."""
from __future__ import annotations

import torch

from ..registry import SeedError, SeedSource, register_source
from ..spec import BuiltSeed, SeedInfo, count_params, input_spec_of, seeded_generator, stable_int


@register_source
class TimmSource(SeedSource):
    name = "timm"
    prefix = "timm"

    def list_ids(self) -> list[str]:
        import timm
        return [f"timm/{m}" for m in timm.list_models()]

    def build(self, seed_id: str) -> BuiltSeed:
        import timm
        from timm.models import _registry

        name = seed_id.split("/", 1)[1]
        if not timm.is_model(name):
            raise SeedError(f"unknown timm model {name!r} in seed id {seed_id!r}")
        cfg = timm.models.get_pretrained_cfg(name)
        input_size = tuple(getattr(cfg, "input_size", None) or (3, 224, 224))
        torch.manual_seed(stable_int(seed_id))
        model = timm.create_model(name, pretrained=False).eval()
        x = torch.randn((1, *input_size), generator=seeded_generator(seed_id + "#input"))
        info = SeedInfo(
            id=seed_id, source=self.name,
            family=_registry._model_to_module.get(name, name.split("_")[0]),
            task="image-classification", output_kind="class_logits",
            input_spec=input_spec_of((x,), {}), params=count_params(model),
        )
        return BuiltSeed(info, model, (x,))

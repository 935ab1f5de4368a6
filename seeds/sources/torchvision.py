"""Every torchvision model: classification, detection, segmentation, video, optical flow.

Each is built with seeded random weights (``weights=None``, ``weights_backbone=None``) and
given the input its task expects. Detection models keep their architecture but resize to
320 pixels instead of 800, which keeps a CPU campaign affordable.

Sizes (``tv/resnet18@129``): the image side of classification and segmentation models (ViTs are
built for it, ``image_size``); detection, video and optical-flow models are not rebuilt at a size.
"""
from __future__ import annotations

import inspect

import torch

from gapfuzz.core.ids import SeedId
from gapfuzz.core.seeding import seeded_generator, stable_int

from ..registry import SeedError, SeedSource, register_source
from ..sizes import IMAGE_SIDES, PATCH_GRID_SIDES, SizeError
from ..spec import BuiltSeed, SeedInfo, count_params, input_spec_of

# task module -> (task, output kind)
_TASKS = {
    "detection": ("object-detection", "boxes"),
    "segmentation": ("semantic-segmentation", "masks"),
    "video": ("video-classification", "class_logits"),
    "optical_flow": ("optical-flow", "flow"),
    "quantization": ("image-classification", "class_logits"),
}
_SIZABLE = ("classification", "segmentation", "quantization")  # the modules whose image side can change
_SIZE = {"inception_v3": 299, "quantized_inception_v3": 299}  # classification inputs differ from 224
_VIDEO_SIZE = {"r3d_18": 112, "mc3_18": 112, "r2plus1d_18": 112}  # others take 224
_DETECTION_SIZE = 320
# Single-stage detectors whose scoring is static up to NMS: also seeds of their candidate boxes.
_CANDIDATES = {"ssd300_vgg16": "ssd", "ssdlite320_mobilenet_v3_large": "ssd", "retinanet_resnet50_fpn": "retinanet",
               "retinanet_resnet50_fpn_v2": "retinanet", "fcos_resnet50_fpn": "fcos"}
TOP_K = 300


class DetectionCandidates(torch.nn.Module):
    """A detector up to its data-dependent post-processing: its top-k scored candidate boxes.

    torch.export cannot capture score thresholds and NMS (their output sizes depend on the data);
    everything before them is static. Post-processing is done by the comparison's detection
    adapter instead, deterministically, as a deployment would do it outside the graph.
    """

    def __init__(self, model: torch.nn.Module, kind: str, k: int = TOP_K):
        super().__init__()
        self.model, self.kind, self.k = model, kind, k

    def forward(self, image: torch.Tensor) -> dict:
        m = self.model
        images, _ = m.transform([image])
        feats = m.backbone(images.tensors)
        features = list(feats.values()) if isinstance(feats, dict) else [feats]
        head = m.head(features)
        anchors = m.anchor_generator(images, features)[0]
        logits, regression = head["cls_logits"][0], head["bbox_regression"][0]
        offset = 0
        if self.kind == "ssd":
            scores, offset = torch.softmax(logits, -1)[:, 1:], 1
            boxes = m.box_coder.decode_single(regression, anchors)
        elif self.kind == "retinanet":
            scores, boxes = torch.sigmoid(logits), m.box_coder.decode_single(regression, anchors)
        else:
            scores = torch.sqrt(torch.sigmoid(logits) * torch.sigmoid(head["bbox_ctrness"][0]))
            boxes = m.box_coder.decode(regression, anchors)
        top = scores.reshape(-1).topk(min(self.k, scores.numel()))
        classes = scores.shape[1]
        return {"boxes": boxes[top.indices // classes], "scores": top.values, "labels": top.indices % classes + offset}


def _task_module(name: str) -> str:
    from torchvision import models

    for module in _TASKS:
        if name in models.list_models(module=getattr(models, module)):
            return module
    return "classification"


@register_source
class TorchvisionSource(SeedSource):
    name = "torchvision"
    prefix = "tv"

    def list_ids(self) -> list[str]:
        from torchvision import models

        return [f"tv/{m}" for m in models.list_models()] + [f"tv/{m}/candidates" for m in _CANDIDATES]

    def size_points(self, seed_id: str, dimension_sizes: list[int]) -> list[int]:
        name, _, part = SeedId.parse(seed_id).name.partition("/")
        if part or _task_module(name) not in _SIZABLE:
            return []
        return list(PATCH_GRID_SIDES if name.startswith(("vit_", "swin_", "maxvit")) else IMAGE_SIDES)

    def width_points(self, seed_id: str, widths: list[int]) -> list[int]:
        name, _, part = SeedId.parse(seed_id).name.partition("/")
        return [] if part or not name.startswith(_WIDE) else list(widths)

    def build(self, seed_id: str) -> BuiltSeed:
        from torchvision import models

        sized = SeedId.parse(seed_id)
        name, _, part = sized.name.partition("/")
        if name not in models.list_models() or part not in ("", "candidates") or (part and name not in _CANDIDATES):
            raise SeedError(f"unknown torchvision model {name!r} in seed id {seed_id!r}")
        module = _task_module(name)
        kwargs = {"weights": None}
        builder = models.get_model_builder(name)
        if "weights_backbone" in inspect.signature(builder).parameters:
            kwargs["weights_backbone"] = None
        if module == "detection" and not name.startswith(("ssd", "ssdlite")):
            kwargs.update(min_size=_DETECTION_SIZE, max_size=_DETECTION_SIZE)
        if sized.size is not None and (module not in _SIZABLE or part):
            raise SizeError(f"{seed_id}: only classification and segmentation models are rebuilt at a size")
        if sized.size is not None and name.startswith("vit_"):
            kwargs["image_size"] = sized.size
        if sized.width is not None:
            if part or not name.startswith(_WIDE):
                raise SizeError(f"{seed_id}: only {', '.join(_WIDE)} models are rebuilt at a width")
            kwargs.update({} if name.startswith("vit_") else _width_kwargs(name, sized.width))
        torch.manual_seed(stable_int(sized.base))  # the same weights at every size where shapes allow
        if sized.width is not None and name.startswith("vit_"):  # its builders fix the widths: the class itself
            patch = int(name.rsplit("_", 1)[-1])
            model = models.VisionTransformer(kwargs.get("image_size", 224), patch, **_width_kwargs(name, sized.width))
        else:
            model = builder(**kwargs).eval()
        model.eval()
        args = self._inputs(name, module, seeded_generator(seed_id + "#input"), sized.size)
        task, kind = _TASKS.get(module, ("image-classification", "class_logits"))
        if part:
            model, args, task = (DetectionCandidates(model, _CANDIDATES[name]).eval(), (args[0][0],),
                                 "detection-candidates")
        family = builder.__module__.rsplit(".", 1)[-1]
        info = SeedInfo(id=seed_id, source=self.name, family=family, task=task, output_kind=kind,
                        input_spec=input_spec_of(_flat(args), {}), params=count_params(model),
                        extra={"task_module": module})
        return BuiltSeed(info, model, args)

    @staticmethod
    def _inputs(name: str, module: str, g: torch.Generator, side: int | None = None) -> tuple:
        if module == "detection":
            size = 300 if name.startswith("ssd300") else _DETECTION_SIZE
            return ([torch.rand((3, size, size), generator=g)],)
        if module == "video":
            s = _VIDEO_SIZE.get(name, 224)
            return (torch.randn((1, 3, 16, s, s), generator=g),)
        if module == "optical_flow":
            return (torch.rand((1, 3, 128, 128), generator=g) * 2 - 1,
                    torch.rand((1, 3, 128, 128), generator=g) * 2 - 1)
        s = side or _SIZE.get(name, 224)
        return (torch.randn((1, 3, s, s), generator=g),)


# Models whose builders take a width: the ViTs' hidden size (one layer, 64-wide heads), and the
# MobileNets' width multiplier (the last conv's channels follow it: 1280 for v2 at 1.0).
_WIDE = ("vit_", "mobilenet_v2", "mobilenet_v3")


def _width_kwargs(name: str, width: int) -> dict:
    if name.startswith("vit_"):
        return {"hidden_dim": width, "num_heads": width // 64 if width % 64 == 0 else 1, "num_layers": 1,
                "mlp_dim": 2 * width}
    base = 1024 if name == "mobilenet_v3_small" else 1280  # the last layer's channels at width_mult 1.0
    return {"width_mult": width / base}


def _flat(args: tuple) -> tuple:
    return tuple(torch.utils._pytree.tree_leaves(args))

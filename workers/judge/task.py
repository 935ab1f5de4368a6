"""Tier 3, task-level agreement, from the seed's output kind; and the detection adapter.

A classifier that agrees on the top-1 class agrees for its user even when its logits differ in
the fifth digit; a detector that returns its candidates in another order among exact ties is no
different after post-processing. The adapter makes that order deterministic (stable sort by
score, then coordinates, then label) before any comparison and before NMS, as the
configuration-first study's fix for tie-breaking did.
"""
from __future__ import annotations

import torch

DETECTION_FIELDS = ("boxes", "scores", "labels")


def _named(outputs: list, names: list) -> dict:
    return {n: t for n, t in zip(names, outputs) if isinstance(t, torch.Tensor)}


def canonical_order(boxes: torch.Tensor, scores: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Indices sorting candidates by score (descending), then x1, y1, x2, y2, then label: stable."""
    order = torch.arange(scores.shape[0])
    for key in (labels.double(), boxes[:, 3].double(), boxes[:, 2].double(), boxes[:, 1].double(),
                boxes[:, 0].double(), -scores.double()):
        order = order[torch.sort(key[order], stable=True).indices]
    return order


def canonicalize(outputs: list, names: list) -> list:
    """Detection candidates reordered canonically; any other outputs unchanged."""
    d = _named(outputs, names)
    if not all(f in d for f in DETECTION_FIELDS) or d["boxes"].dim() != 2:
        return outputs
    order = canonical_order(d["boxes"], d["scores"], d["labels"])
    return [t[order] if n in DETECTION_FIELDS and isinstance(t, torch.Tensor) else t for n, t in zip(names, outputs)]


def iou(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    lt, rb = torch.maximum(a[:, None, :2], b[None, :, :2]), torch.minimum(a[:, None, 2:], b[None, :, 2:])
    inter = (rb - lt).clamp(min=0).prod(-1)
    area = (a[:, 2:] - a[:, :2]).clamp(min=0).prod(-1)
    barea = (b[:, 2:] - b[:, :2]).clamp(min=0).prod(-1)
    return inter / (area[:, None] + barea[None, :] - inter).clamp(min=1e-12)


def greedy_nms(boxes, scores, labels, threshold: float = 0.5, min_score: float = 0.05) -> torch.Tensor:
    """Per-class greedy NMS in the order given (callers decide that order): indices kept."""
    kept = []
    boxes = boxes.double()
    for i in range(boxes.shape[0]):
        if scores[i] < min_score:
            continue
        same = [j for j in kept if labels[j] == labels[i]]
        if not same or iou(boxes[i:i + 1], boxes[same]).max() <= threshold:
            kept.append(i)
    return torch.tensor(kept, dtype=torch.long)


def _detections(d: dict, adapter: bool):
    boxes, scores, labels = d["boxes"].double(), d["scores"].double(), d["labels"]
    if adapter:
        order = canonical_order(boxes, scores, labels)
        boxes, scores, labels = boxes[order], scores[order], labels[order]
    keep = greedy_nms(boxes, scores, labels)
    return boxes[keep], labels[keep]


def detection_agreement(target: dict, reference: dict, adapter: bool) -> float:
    """Matched detections (same label, IoU >= 0.9) over the larger of the two sets after NMS."""
    tb, tl = _detections(target, adapter)
    rb, rl = _detections(reference, adapter)
    if not len(tb) and not len(rb):
        return 1.0
    used, matched = set(), 0
    overlaps = iou(tb, rb) if len(tb) and len(rb) else torch.zeros(len(tb), len(rb))
    for i in range(len(tb)):
        for j in torch.argsort(overlaps[i], descending=True).tolist():
            if j not in used and tl[i] == rl[j] and overlaps[i, j] >= 0.9:
                used.add(j)
                matched += 1
                break
    return matched / max(len(tb), len(rb))


def _topk_agreement(t: torch.Tensor, r: torch.Tensor, band: float) -> tuple[float, float]:
    """Share of rows whose top-1 agrees (a near-tie in the reference, within ``band``, counts as
    agreement: either class is right), and whose top-1 lies in the reference's top 5. A row equal
    to the reference's, NaN for NaN, agrees: argmax and topk order NaNs differently."""
    t, r = t.reshape(-1, t.shape[-1]).double(), r.reshape(-1, r.shape[-1]).double()
    same = ((t == r) | (t.isnan() & r.isnan())).all(-1)
    t1 = t.argmax(-1)
    top = r.topk(min(5, r.shape[-1]), -1)
    tied = (r.gather(-1, t1[:, None])[:, 0] >= top.values[:, 0] - band)
    top1 = ((t1 == top.indices[:, 0]) | tied | same).double().mean().item()
    top5 = ((top.indices == t1[:, None]).any(-1) | same).double().mean().item()
    return top1, top5


def task_agreement(kind: str, target: list, reference: list, names: list, adapter: bool = True,
                   band: float = 0.0) -> dict:
    """``task_metric``, ``task_agree`` (and ``top5_agree``) for the output kind; empty if none applies."""
    t, r = _named(target, names), _named(reference, names)
    if kind == "boxes" and all(f in t and f in r for f in DETECTION_FIELDS):
        return {"task_metric": "detection", "task_agree": detection_agreement(t, r, adapter)}
    first = next((n for n in names if n in t and n in r and t[n].is_floating_point() and t[n].dim() >= 1
                  and t[n].shape == r[n].shape), None)
    if first is None:
        return {}
    if kind in ("class_logits", "token_logits"):
        top1, top5 = _topk_agreement(t[first], r[first], band)
        metric = "top1" if kind == "class_logits" else "argmax_token"
        return {"task_metric": metric, "task_agree": top1, "top5_agree": top5 if kind == "class_logits" else None}
    if kind == "masks" and t[first].dim() == 4:
        agree = (t[first].argmax(1) == r[first].argmax(1)).double().mean().item()
        return {"task_metric": "pixel_argmax", "task_agree": agree}
    return {}

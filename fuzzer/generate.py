"""Turn a seed into variants: build, capture, mutate, validate on the reference.

``build_seed_variants`` runs inside a worker's sandbox (a crash in torch.export costs
one record); it returns plain data: seed facts, and per variant its recipe, payload and
graph facts, or the stage and reason the seed failed.
"""
from __future__ import annotations

import random
import time
from collections import Counter

import torch
from torch.fx.passes.shape_prop import ShapeProp

from seeds import create_seed
from seeds.capture import CaptureError, capture
from workers.faults import describe
from workers.ir import Variant, flatten_outputs, target_name

from .mutators import Rejected, get_mutator
from .recipe import Recipe, variant_id, variant_rng_seed


def run_reference(variant: Variant) -> list:
    """Run eagerly node by node, recording each node's shape and dtype for the next pass."""
    variant.gm.graph.lint()
    variant.gm.recompile()
    with torch.no_grad():
        out = ShapeProp(variant.gm).propagate(*variant.inputs)
    return flatten_outputs(out)


def all_nonfinite(outputs: list) -> bool:
    floats = [t for t in outputs if isinstance(t, torch.Tensor) and t.is_floating_point() and t.numel()]
    return bool(floats) and all(not torch.isfinite(t).any() for t in floats)


class Generator:
    """Draws mutation sequences for one seed; counts what it rejects, per mutator."""

    def __init__(self, base: Variant, seed_outputs: list, gen: dict, campaign_seed: int, mutators: list[str]):
        self.base, self.seed_outputs, self.gen = base, seed_outputs, gen
        self.campaign_seed, self.mutators = campaign_seed, mutators
        self.tried: Counter = Counter()
        self.rejected: Counter = Counter()
        self.seed_nonfinite = all_nonfinite(seed_outputs)

    def validate(self, variant: Variant, mutator) -> None:
        try:
            outputs = run_reference(variant)
        except Exception as e:  # noqa: BLE001 - an invalid mutation is rejected quietly
            raise Rejected(f"{type(e).__name__}: {e}") from e
        if not mutator.numeric and not self.seed_nonfinite and all_nonfinite(outputs):
            raise Rejected("every output became non-finite")

    def mutate_once(self, current: Variant, rng: random.Random):
        for _ in range(self.gen["max_tries"]):
            name = self.mutators[rng.randrange(len(self.mutators))]
            mutator = get_mutator(name)
            self.tried[name] += 1
            params = mutator.propose(current, rng)
            if params is None:
                self.rejected[name] += 1
                continue
            try:
                candidate = mutator.apply(current, params)
                self.validate(candidate, mutator)
            except Rejected:
                self.rejected[name] += 1
                continue
            return candidate, [name, params]
        return current, None

    def variant(self, seed_id: str, index: int) -> tuple[Recipe, Variant]:
        rng_seed = variant_rng_seed(self.campaign_seed, seed_id, index)
        recipe, current = Recipe(seed_id, [], rng_seed), self.base
        if index == 0 and self.gen["include_seed"] or not self.mutators:
            return recipe, current
        rng = random.Random(rng_seed)
        for _ in range(self.gen["mutations"]):
            current, step = self.mutate_once(current, rng)
            if step is not None:
                recipe.mutations.append(step)
        return recipe, current


def _failure(seed_id: str, stage: str, exc: BaseException, info=None) -> dict:
    d = describe(exc)
    return {"seed_id": seed_id, "status": "error", "stage": stage, "error_type": d["error_type"],
            "message": d["message"], "seed": info, "variants": []}


def build_seed_variants(seed_id: str, indices: list[int], gen: dict, campaign_seed: int,
                        mutators: list[str], max_params: int | None) -> dict:
    t0 = time.perf_counter()
    try:
        built = create_seed(seed_id)
    except Exception as e:  # noqa: BLE001 - a seed that does not build is a record
        return _failure(seed_id, "build", e)
    info = built.info.to_dict()
    try:
        cap = capture(built, max_params)
    except CaptureError as e:
        return {**_failure(seed_id, e.stage, e, info), "error_type": type(e.__cause__ or e).__name__}
    del built
    base = cap.variant
    try:
        seed_outputs = run_reference(base)
    except Exception as e:  # noqa: BLE001 - the captured graph does not run on the reference
        return _failure(seed_id, "run", e, info)
    gen_t = Generator(base, seed_outputs, gen, campaign_seed, mutators)
    variants = []
    for index in indices:
        t1 = time.perf_counter()
        recipe, v = gen_t.variant(seed_id, index)
        preserving = all(get_mutator(m).preserves_semantics for m in recipe.mutator_names)
        variants.append({
            "variant_id": variant_id(seed_id, index), "recipe": recipe.to_json(),
            "mutations": recipe.mutator_names, "semantics_preserving": preserving,
            "graph_hash": v.graph_hash, "node_count": v.node_count, "ops": v.ops,
            "output_names": list(v.output_names),
            "payload": v.to_payload(), "gen_s": time.perf_counter() - t1,
        })
    counts = Counter(target_name(n.target) for n in base.gm.graph.nodes if n.op == "call_function")
    return {"seed_id": seed_id, "status": "ok", "seed": info, "variants": variants,
            "capture_s": cap.capture_s, "build_s": time.perf_counter() - t0,
            "base": {"node_count": base.node_count, "op_counts": dict(counts), "output_names": list(base.output_names)},
            "tried": dict(gen_t.tried), "rejected": dict(gen_t.rejected)}


def replay(recipe: Recipe, max_params: int | None = None) -> Variant:
    """The variant a recipe describes, rebuilt from scratch (same graph hash, weights, inputs)."""
    cap = capture(create_seed(recipe.seed), max_params)
    current = cap.variant
    run_reference(current)
    for name, params in recipe.mutations:
        current = get_mutator(name).apply(current, params)
        run_reference(current)
    return current

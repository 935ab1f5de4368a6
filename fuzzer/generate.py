"""Turn a seed into variants: build, capture, mutate, validate on the reference.

``build_seed_variants`` runs inside a worker's sandbox (a crash in torch.export costs
one record); it answers a ``BuildRequest`` with a ``SeedBuild``: the seed's facts and per
variant its recipe, graph facts and payload, or the stage and reason the seed failed.
"""
from __future__ import annotations

import dataclasses
import logging
import random
import time
from collections import Counter

import torch

from gapfuzz.core.bugs import Stage, Status, Verdict
from gapfuzz.core.failures import Failure, describe
from gapfuzz.core.ir import Variant, flatten_outputs, target_name, tensor_to_wire
from gapfuzz.core.tolerances import Tolerances
from gapfuzz.fuzzer.builds import BuildRequest, BuiltVariant, Guidance, SeedBuild
from gapfuzz.fuzzer.config.settings import VariantSettings
from gapfuzz.fuzzer.guidance import Chooser
from gapfuzz.fuzzer.mutators import Rejected, get_mutator
from gapfuzz.fuzzer.recipe import Recipe, variant_id, variant_rng_seed
from gapfuzz.fuzzer.validate import Evaluation, evaluate
from gapfuzz.seeds import create_seed
from gapfuzz.seeds.capture import Captured, CaptureError, capture, check_budget
from gapfuzz.seeds.capture_cache import CaptureCache
from gapfuzz.seeds.registry import width_params
from gapfuzz.seeds.sizes import SizeError
from gapfuzz.seeds.spec import SeedInfo
from gapfuzz.workers.backends.eager import Eager, prepare_eager_fp64
from gapfuzz.workers.judge.compare import attribute, compare
from gapfuzz.workers.run.training import Trainer, output_names

log = logging.getLogger("gapfuzz.fuzzer")


def run_reference(variant: Variant) -> list:
    """Run eagerly node by node, recording each node's shape and dtype for the next pass."""
    return evaluate(variant).outputs


def all_nonfinite(outputs: list) -> bool:
    floats = [t for t in outputs if isinstance(t, torch.Tensor) and t.is_floating_point() and t.numel()]
    return bool(floats) and all(not torch.isfinite(t).any() for t in floats)


class NotTrainable(Exception):
    """Eager itself cannot run a training step of a graph (an input it cannot differentiate, an
    operator with no derivative): outside what training mode tests."""


def check_trains(variant: Variant) -> None:
    """One training step of the variant on eager, or ``NotTrainable`` with what it raised."""
    try:
        Trainer(variant.gm, "cpu").prepare(Eager(), variant.inputs, "cpu")(*variant.inputs)
    except Exception as e:
        raise NotTrainable(f"eager cannot train it: {type(e).__name__}: {e}") from e


EXTRA_ROUNDS = 3  # more draws for a variant meant to be mutated that no step could mutate


def applicable(mutators: list[str], variant: Variant) -> list[str]:
    """The mutators that find a site in ``variant`` (an integer graph has none for a floating-only one)."""
    return [m for m in mutators if get_mutator(m).propose(variant, random.Random(0)) is not None]


class Generator:
    """Draws mutation sequences for one seed, from the mutators that apply to it; counts what it rejects,
    per mutator. For training variants, a mutation that leaves eager unable to train the graph is
    rejected too."""

    def __init__(self, base: Evaluation, settings: VariantSettings, campaign_seed: int,
                 guidance: Guidance | None = None, training: bool = False):
        self.base, self.seed_outputs, self.gen = base, base.outputs, settings
        self.campaign_seed = campaign_seed
        self.mutators = applicable(settings.mutators, base.variant) if settings.mutators else []
        self.chooser = Chooser(self.mutators, guidance)
        self.tried: Counter = Counter()
        self.rejected: Counter = Counter()
        self.seed_nonfinite = all_nonfinite(self.seed_outputs)
        self.training = training

    def validate(self, variant: Variant, mutator, parent: Evaluation) -> Evaluation:
        try:
            ev = evaluate(variant, parent)
        except Exception as e:
            raise Rejected(f"{type(e).__name__}: {e}") from e
        if not mutator.numeric and not self.seed_nonfinite and all_nonfinite(ev.outputs):
            raise Rejected("every output became non-finite")
        if self.training:
            try:
                check_trains(variant)
            except NotTrainable as e:
                raise Rejected(str(e)) from e
        return ev

    def mutate_once(self, current: Evaluation, rng: random.Random):
        for _ in range(self.gen.max_tries):
            name = self.chooser.choose(rng)
            mutator = get_mutator(name)
            mutator.choice_weights = self.chooser.choice_weights(name)
            self.tried[name] += 1
            params = mutator.propose(current.variant, rng)
            if params is None:
                self.rejected[name] += 1
                continue
            try:
                candidate = self.validate(mutator.apply(current.variant, params), mutator, current)
            except Rejected:
                self.rejected[name] += 1
                continue
            except Exception as e:  # noqa: BLE001 - a pass that breaks on this graph costs its draw, not the seed
                log.warning("mutator %s failed on %s: %s: %s", name, params, type(e).__name__, str(e)[:200])
                self.rejected[name] += 1
                continue
            return candidate, [name, params]
        return current, None

    def meant_to_mutate(self, index: int) -> bool:
        return bool(self.gen.mutators) and not (index == 0 and self.gen.include_seed)

    def variant(self, seed_id: str, index: int) -> tuple[Recipe, Evaluation]:
        """The variant's recipe and evaluation; a variant meant to be mutated whose recipe is still empty
        carries no mutation (the caller skips it rather than run its seed again)."""
        rng_seed = variant_rng_seed(self.campaign_seed, seed_id, index)
        recipe, current = Recipe(seed_id, [], rng_seed), self.base
        if not self.meant_to_mutate(index) or not self.mutators:
            return recipe, current
        rng = random.Random(rng_seed)
        for k in range(self.gen.mutations + EXTRA_ROUNDS):
            if k >= self.gen.mutations and recipe.mutations:
                break  # the extra rounds are for a variant still carrying none, until one lands
            current, step = self.mutate_once(current, rng)
            if step is not None:
                recipe.mutations.append(step)
        return recipe, current


def _failure(seed_id: str, stage: Stage, exc: BaseException, info: dict | None = None,
             error_type: str | None = None) -> SeedBuild:
    """A seed that failed; one that cannot be rebuilt at the size asked for, or that eager cannot
    train, is skipped, not failed."""
    status = Status.SKIPPED if isinstance(exc, (SizeError, NotTrainable)) else Status.ERROR
    failure = Failure.from_exception(exc, stage, status)
    if error_type:
        failure = dataclasses.replace(failure, error_type=error_type)
    return SeedBuild(seed_id=seed_id, failure=failure, seed=SeedInfo(**info) if info else None)


def metamorphic(outputs: list, seed_outputs: list, seed_oracle, tol: Tolerances) -> tuple[float, bool]:
    """A semantics-preserving variant against its seed on the reference: the tolerance ratio at the
    campaign's tolerances (the judge's too), and whether it agrees (within tolerance, or no further from the
    fp64 seed than the seed itself). ``seed_oracle`` is called only when the outputs differ beyond tolerance."""
    close = compare(outputs, seed_outputs, tol)
    if close.passed:
        return close.tol_ratio, True
    v = attribute(outputs, seed_outputs, seed_oracle(), tol)
    return v.closeness.tol_ratio, v.verdict == Verdict.AGREE


def captured(seed_id: str, max_params: int | None, use_cache: bool = True,
             train_layers: bool = False) -> tuple[dict, Captured]:
    """The seed's facts and its capture (its layers as in training, with ``train_layers``), from the
    capture cache when it holds them. Raises ``CaptureError`` (stage build, budget or capture)."""
    cache = CaptureCache() if use_cache else None
    key = f"{seed_id}|train-layers" if train_layers else seed_id
    hit = cache.get(key, max_params) if cache else None
    if hit is not None:
        return hit
    try:
        check_budget(width_params(seed_id) or 0, max_params)  # before a wide seed's weights
        built = create_seed(seed_id)
    except CaptureError:
        raise
    except Exception as e:
        raise CaptureError(Stage.BUILD, describe(e)["message"]) from e
    info = built.info.to_dict()
    cap = capture(built, max_params, train_layers)
    if cache:
        cache.put(key, info, cap)
    return info, cap


def build_seed_variants(request: BuildRequest) -> SeedBuild:
    t0 = time.perf_counter()
    seed_id = request.seed_id
    backward = request.mode.backward  # training: each variant must train on eager
    try:
        info, cap = captured(seed_id, request.max_params, request.use_cache, backward and request.train_layers)
    except CaptureError as e:
        if e.stage == Stage.BUILD:
            return _failure(seed_id, Stage.BUILD, e.__cause__ or e)
        return _failure(seed_id, Stage(e.stage), e, e.info, type(e.__cause__ or e).__name__)
    base = cap.variant
    try:
        base_eval = evaluate(base)
    except Exception as e:  # noqa: BLE001 - the captured graph does not run on the reference
        return _failure(seed_id, Stage.RUN, e, info)
    seed_outputs = base_eval.outputs
    settings = request.variants
    if backward:  # mutators whose graphs leave backward nothing to test are left out
        settings = dataclasses.replace(settings, mutators=[m for m in settings.mutators
                                                           if get_mutator(m).differentiable])
        try:
            check_trains(base)
        except NotTrainable as e:
            return _failure(seed_id, Stage.RUN, e, info)
    generator = Generator(base_eval, settings, request.campaign_seed, request.guidance, backward)
    oracle: list = []

    def seed_oracle() -> list:
        if not oracle:
            run, _ = prepare_eager_fp64(base.gm, base.inputs, "cpu", {})
            oracle.extend(flatten_outputs(run(*base.inputs)))
        return oracle

    build = SeedBuild(seed_id=seed_id, seed=SeedInfo(**info), capture_s=cap.capture_s, node_count=base.node_count,
                      op_counts=dict(Counter(target_name(n.target) for n in base.gm.graph.nodes
                                             if n.op == "call_function")),
                      output_names=list(base.output_names))
    for index in request.indices:
        t1 = time.perf_counter()
        recipe, ev = generator.variant(seed_id, index)
        recipe.mode, recipe.train_layers = request.mode, backward and request.train_layers
        v = dataclasses.replace(ev.variant, mode=request.mode)
        unmutated = generator.meant_to_mutate(index) and not recipe.mutations
        preserving = all(get_mutator(m).preserves_semantics for m in recipe.mutator_names)
        meta_err = meta_ok = None
        if preserving and recipe.mutations:
            meta_err, meta_ok = metamorphic(ev.outputs, seed_outputs, seed_oracle, request.tolerances or Tolerances())
        vid = variant_id(seed_id, index, request.mode)
        names = list(output_names(v))  # in training the loss and gradients too
        if not unmutated:  # a copy of the seed is not run again; the seed's outputs are the forward's
            # alone: no metamorphic oracle for a run that goes backward
            oracle_outputs = seed_outputs if preserving and recipe.mutations and not backward else None
            build.payloads[vid] = _payload(v, oracle_outputs)
        build.variants.append(BuiltVariant(unmutated=unmutated,
            index=index, variant_id=vid, recipe=recipe, semantics_preserving=preserving, graph_hash=v.graph_hash,
            node_count=v.node_count, ops=v.ops, output_names=names, metamorphic_err=meta_err,
            metamorphic_ok=meta_ok, gen_s=time.perf_counter() - t1, mode=request.mode))
    build.tried, build.rejected = dict(generator.tried), dict(generator.rejected)
    build.build_s = time.perf_counter() - t0
    return build


def _payload(v: Variant, seed_outputs: list | None) -> dict:
    """The variant's payload; a semantics-preserving one carries its seed's reference outputs,
    a further oracle for every backend."""
    payload = v.to_payload()
    if seed_outputs is not None:
        payload["seed_outputs"] = [tensor_to_wire(t) for t in seed_outputs if isinstance(t, torch.Tensor)]
    return payload


def replay(recipe: Recipe, max_params: int | None = None) -> Variant:
    """The variant a recipe describes (same graph hash, weights, inputs and mode), rebuilt from its
    seed's capture."""
    current = captured(recipe.seed, max_params, train_layers=recipe.train_layers)[1].variant
    run_reference(current)
    for name, params in recipe.mutations:
        current = get_mutator(name).apply(current, params)
        run_reference(current)
    return dataclasses.replace(current, mode=recipe.mode)

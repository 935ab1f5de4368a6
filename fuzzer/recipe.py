"""Recipes: a variant is reproducible from its seed id, mutation list and rng seed alone."""
from __future__ import annotations

import json
from dataclasses import dataclass, field

from gapfuzz.core.ids import VariantId
from gapfuzz.core.modes import DEFAULT_MODE, ModeField, RunMode, mode_of
from gapfuzz.core.seeding import stable_int


@dataclass
class Recipe:
    seed: str
    mutations: list = field(default_factory=list)  # [[mutator name, params dict], ...]
    rng: int = 0
    mode: RunMode = ModeField()  # written only when it is not the default
    train_layers: bool = False  # training: dropout and batch norm as in training; written only when set

    def to_json(self) -> str:
        d = {"seed": self.seed, "mutations": self.mutations, "rng": self.rng, **self.mode.entry()}
        if self.train_layers:
            d["train_layers"] = True
        return json.dumps(d, sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Recipe:
        d = json.loads(text)
        try:
            mode = mode_of(d.get("mode", DEFAULT_MODE))
        except ValueError as e:
            raise ValueError(f"recipe: {e}") from None
        return cls(d["seed"], [list(m) for m in d.get("mutations", [])], int(d.get("rng", 0)), mode,
                   d.get("train_layers") is True)

    @property
    def mutator_names(self) -> list[str]:
        return [m[0] for m in self.mutations]


def variant_id(seed_id: str, index, mode=DEFAULT_MODE) -> str:
    """Stable within a campaign: the seed, the variant's index among that seed's variants, and its
    mode's suffix (``:train`` for a training variant)."""
    return str(VariantId(seed_id, index, train=mode_of(mode).backward))


def variant_rng_seed(campaign_seed: int, seed_id: str, index: int) -> int:
    return stable_int(f"{campaign_seed}/{seed_id}/{index}")

"""Recipes: a variant is reproducible from its seed id, mutation list and rng seed alone."""
from __future__ import annotations

import json
from dataclasses import dataclass, field

from core.seeding import stable_int


@dataclass
class Recipe:
    seed: str
    mutations: list = field(default_factory=list)  # [[mutator name, params dict], ...]
    rng: int = 0

    def to_json(self) -> str:
        return json.dumps({"seed": self.seed, "mutations": self.mutations, "rng": self.rng},
                          sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Recipe:
        d = json.loads(text)
        return cls(d["seed"], [list(m) for m in d.get("mutations", [])], int(d.get("rng", 0)))

    @property
    def mutator_names(self) -> list[str]:
        return [m[0] for m in self.mutations]


def variant_id(seed_id: str, index: int) -> str:
    """Stable within a campaign: the seed and the variant's index among that seed's variants."""
    return f"{seed_id}#{index}"


def variant_rng_seed(campaign_seed: int, seed_id: str, index: int) -> int:
    return stable_int(f"{campaign_seed}/{seed_id}/{index}")

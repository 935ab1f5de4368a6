"""The size axis: a seed rebuilt at another size is a seed of its own, ``<id>@<n>``.

Kernels change code path at sizes (a vector width, a reduction block, a tile, zero elements), so a
defect that depends on size is found only where a size past the threshold is tried. A rebuilt seed
gets its own id because then it is captured, cached, planned, resumed, clustered and reproduced as
any other seed: nothing after the seed loader needs to know that sizes exist. What ``n`` means is
the source's to say (operator seeds: the length of the sample's main dimension; timm: the image
side; transformers: the sequence length); ``SeedSource.size_points`` says which sizes a seed can
be rebuilt at. A seed that cannot be rebuilt at a size it was asked for raises ``SizeError``, which
the campaign records as skipped, not as a failure of any stack.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

from .registry import SeedError

MARK = "@"

# Sizes along one dimension around the thresholds kernels switch at: tiny and prime lengths,
# 2^k-1, 2^k and 2^k+1 (vector widths, tiles, reduction blocks) and lengths past a 1024-element
# block. Sorted, and split into as many equal bands as sizes are drawn (see ``choose``).
DIMENSION_SIZES = (0, 1, 2, 3, 5, 7, 13, 17,
                   31, 32, 33, 127, 128, 129, 1023, 1024,
                   1025, 1031, 2047, 2048, 2049, 4095, 4096, 4097)

# Image sides around the native 160-299 of vision models: small (deep strides run out), odd and
# 2^k+-1; models built for a fixed size (patch grids, windows) get multiples of 16 only.
IMAGE_SIDES = (32, 33, 47, 48, 63, 64, 65, 96, 127, 128, 129, 192, 255, 256, 257)
PATCH_GRID_SIDES = (32, 48, 64, 96, 128, 192, 256)


class SizeError(SeedError):
    """A seed that cannot be rebuilt at the size asked for (recorded as skipped)."""


@dataclass(frozen=True)
class SizedId:
    base: str
    size: int | None = None

    @classmethod
    def parse(cls, seed_id: str) -> SizedId:
        base, mark, size = seed_id.rpartition(MARK)
        if not mark:
            return cls(seed_id)
        if not size.isdigit():
            raise SeedError(f"seed id {seed_id!r}: the size after {MARK!r} must be a whole number")
        return cls(base, int(size))

    def __str__(self) -> str:
        return self.base if self.size is None else f"{self.base}{MARK}{self.size}"


def choose(points: list[int] | tuple[int, ...], count: int, key: str) -> list[int]:
    """``count`` sizes out of ``points``, one from each of ``count`` equal bands of the sorted
    points (so every draw holds a small, a middle and a large size), seeded by ``key``."""
    points = sorted(set(points))
    if count <= 0 or not points:
        return []
    if count >= len(points):
        return points
    rng, chosen = random.Random(key), []
    for band in range(count):
        lo, hi = band * len(points) // count, (band + 1) * len(points) // count
        chosen.append(rng.choice(points[lo:hi]))
    return chosen


def check_runs(built, size: int):
    """The built seed, after one eager forward at its new size; ``SizeError`` if that fails
    (a model whose layers do not fit the size is not a finding of any stack)."""
    import torch

    try:
        with torch.no_grad():
            built.model(*built.args, **built.kwargs)
    except Exception as e:  # noqa: BLE001 - any failure means: not at this size
        first = (str(e).strip().splitlines() or [""])[0][:200]
        raise SizeError(f"{built.info.id}: does not run at size {size}: {type(e).__name__}: {first}") from e
    return built

"""The size and width axes: a seed rebuilt at another size is a seed of its own, ``<id>@<n>``, and
one rebuilt at another width is ``<id>@w<n>``.

Kernels change code path at sizes (a vector width, a reduction block, a tile, zero elements), so a
defect that depends on size is found only where a size past the threshold is tried. A rebuilt seed
gets its own id because then it is captured, cached, planned, resumed, clustered and reproduced as
any other seed: nothing after the seed loader needs to know that sizes exist. What ``n`` means is
the source's to say (operator seeds: the length of the sample's main dimension; timm: the image
side; transformers: the sequence length); ``SeedSource.size_points`` says which sizes a seed can
be rebuilt at. A seed that cannot be rebuilt at a size it was asked for raises ``SizeError``, which
the campaign records as skipped, not as a failure of any stack.

A kernel goes wrong past a block length along the dimension it reduces, scans or normalises, which
is often not the main one (``sum(x, dim=0)``, a softmax over rows, the contraction of ``addmm``):
``<id>@d<n>`` rebuilds a seed with that dimension at ``n`` (``SeedSource.along_points`` says which
seeds have one). Its draw always holds the largest size (4097 by default: past every block length).

Widths are where kernels meet tiles, vector limits, split reductions and workspaces: hidden sizes
and channel counts past 1024 and 4096, which tiny seeds never reach. ``SeedSource.width_points``
says which widths a seed takes (transformers: the hidden size, one layer; timm and torchvision: the
features before the classifier, channels scaled, few blocks; operators: the second-to-last
dimension, and the contraction of a matrix product); the parameter cap still applies and its refusal
says so. Widths are handed out over a campaign in ``width_order``: the first seed of a source takes a
tail past 2048 (2050), the next its multiple (2048), and so on, so one width per seed reaches the
tails of a wide matrix product's reduction even in a campaign of one seed. A seed that is a matrix
product itself (``SeedSource.contracts``) takes a tail past 2048 as its first width, whatever its turn
(``product_widths``): a kernel that drops the contraction's tail is found only there.
"""
from __future__ import annotations

import random

from .errors import SeedError

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

# Widths (hidden sizes, channels) at and past the 1024- and 4096-wide limits of kernels: powers of
# two, and two more (a tail after the last full tile or vector; even, so rotary embeddings fit).
WIDTHS = (768, 1024, 1026, 2048, 2050, 4096, 4098)
TILE = 32  # a width that is not a multiple of this leaves a tail after the last full tile of any size
WIDE = 2048  # past this, a tail is past the largest block a product's kernel reduces in one piece


def tail_past_wide(width: int) -> bool:
    """Whether ``width`` leaves a tail (not a multiple of ``TILE``) past ``WIDE``."""
    return width > WIDE and width % TILE != 0


def product_widths(order: list[int], points: set[int], count: int, start: int,
                   tails_at: int) -> tuple[list[int], int, int]:
    """The ``count`` widths of a seed out of ``order`` (``width_order``) it can take (``points``), taken
    in turn from ``start``; for a matrix product (``tails_at`` not negative) the first is a tail past
    ``WIDE``, taken in turn from ``tails_at``, when the seed can take one. Returns the widths and where
    the two turns go on from."""
    taken: list[int] = []
    tails = [w for w in order if tail_past_wide(w) and w in points]
    if tails_at >= 0 and tails and count:
        taken.append(tails[tails_at % len(tails)])
        tails_at += 1
    ks = [k for k in range(start, start + len(order)) if order[k % len(order)] in points - set(taken)]
    ks = ks[: count - len(taken)]
    return taken + [order[k % len(order)] for k in ks], (ks[-1] + 1 if ks else start), tails_at


class SizeError(SeedError):
    """A seed that cannot be rebuilt at the size asked for (recorded as skipped)."""


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


def choose_along(points: list[int] | tuple[int, ...], count: int, key: str) -> list[int]:
    """``count`` sizes along an operator's own dimension: the largest of ``points`` (past every block
    length), then ``count - 1`` drawn in bands of the rest (``choose``)."""
    points = sorted(set(points))
    if count <= 0 or not points:
        return []
    return choose(points[:-1], count - 1, key) + [points[-1]]


def width_order(widths: list[int] | tuple[int, ...]) -> list[int]:
    """The order a campaign hands widths out in: each tail past 2048 (not a multiple of ``TILE``)
    followed by its multiple, smallest first; then the other tails with theirs, largest first; then
    the rest, largest first (2050, 2048, 4098, 4096, 1026, 1024, 768 for ``WIDTHS``)."""
    left, order = sorted(set(widths)), []
    tails = [w for w in left if w % TILE]
    for t in [w for w in tails if w > 2048] + sorted((w for w in tails if w <= 2048), reverse=True):
        order += [w for w in (t, t - t % TILE) if w in left and w not in order]
    return order + sorted((w for w in left if w not in order), reverse=True)


def check_runs(built, shown: str):
    """The built seed, after one eager forward at its new size (``shown``: ``SeedId.shown``);
    ``SizeError`` if that fails (a model whose layers do not fit the size is not a finding of any stack)."""
    import torch

    try:
        with torch.no_grad():
            built.model(*built.args, **built.kwargs)
    except Exception as e:
        first = (str(e).strip().splitlines() or [""])[0][:200]
        raise SizeError(f"{built.info.id}: does not run at {shown}: {type(e).__name__}: {first}") from e
    return built

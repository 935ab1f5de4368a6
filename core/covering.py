"""Option sets that cover a stack's option space: every pair of values, not one random draw.

A fault behind one option value, or behind two values together, shows only on a run that has them.
One random draw per variant reaches a given value in a given mode by chance; a pairwise covering
array reaches every pair of values in a number of rows near the product of the two largest option
sizes (PyTorch's ConfigFuzzer sweeps pairs for the same reason). Built here greedily, AETG-style:
each row is the best of a few candidates, each started from a pair not yet covered and filled one
option at a time with the value that completes the most uncovered pairs. Deterministic in a seed
string; no dependency.

Rows come in blocks of ``block_length`` rows (the most values one option has), and each block holds
every value of every option. Which rows a seed's variants get (``row_index``): whole blocks, from a
block its id picks, in an order within each block its id picks too; its next mode starts one block
further on. So, exactly:

- a seed with at least ``block_length`` variants in a mode runs every value of every option in that
  mode; one with as many variants as the array has rows runs every pair in every mode it runs;
- a seed with fewer covers the pairs of the rows it gets, and its modes get rows of different blocks
  (when the array has two blocks or more);
- over a campaign, seeds' ids spread them over the blocks (a block is missed by S seeds of one mode
  with chance (1 - 1/B)^S, B blocks) and a seed of one variant may get any row, so the campaign's
  seeds together cover every pair in each mode with a chance that grows with their number; nothing
  is certain across seeds, since a seed's rows may not depend on which other seeds a campaign has.

The mode is crossed with the array rather than made one more factor of it: each mode runs the whole
array, so each value and each pair is run in every mode (a fault behind one value in training alone
is reached by every seed of ``block_length`` variants or more).

Every choice is a pure function of the campaign seed, the stack, the seed id, the variant index and
the mode: a resumed campaign gets the same option sets.
"""
from __future__ import annotations

import random
from functools import lru_cache
from itertools import combinations, product
from math import prod

from gapfuzz.core.modes import MODES, mode_of
from gapfuzz.core.seeding import stable_int

PAIRS, ALL, DRAW = "pairs", "all", "draw"
COVERS = (PAIRS, ALL, DRAW)
CANDIDATES = 24  # candidate rows tried for each row kept
BUILDS = 4  # greedy builds, the shortest kept
SMALL = 2000  # interactions up to which every build tries every candidate; a larger space gets one build, few tries
MAX_COMBINATIONS = 1024  # of the options covered in every combination (``all``): more is a typo, or years of runs
# An option space's bounds, checked from its sizes alone (nothing enumerated) before any array is built; within
# them a build takes seconds: values of one option, the array's least length (the two largest factors' product)
# and the value pairs it must hold
MAX_VALUES = 32
MAX_ROWS = 2048
MAX_PAIRS = 50_000


def block_length(levels) -> int:
    """Rows per block: the most values one option has (each block holds every value of every option)."""
    return max(levels, default=1)


@lru_cache(maxsize=256)
def covering_array(levels: tuple[int, ...], together: tuple[int, ...] = (), seed: str = "") -> tuple[tuple, ...]:
    """Rows of value indices (option ``i`` has ``levels[i]`` values) that hold every pair of values of
    two options, and every combination of the options in ``together`` with every value of each other
    option (all of them together: every combination). Blocks of ``block_length`` rows each hold every
    value of every option. The shortest of a few greedy builds; deterministic in ``seed``."""
    n = len(levels)
    if n == 0:
        return ((),)
    factors = _factors(levels, together)
    interactions = _interactions([prod(levels[o] for o in f) for f in factors])
    small = len(factors) > 1 and interactions <= SMALL
    builds = [_build(levels, factors, random.Random(f"{seed}/{k}"), CANDIDATES if small else 2)
              for k in range(BUILDS if small else 1)]
    return min(builds, key=len)


def _factors(levels, together) -> list[tuple]:
    """The array's factors: the options covered together as one (every combination), each other alone."""
    grouped = tuple(sorted(set(together)))
    return ([grouped] if grouped else []) + [(i,) for i in range(len(levels)) if i not in grouped]


def _interactions(sizes: list[int]) -> int:
    """What an array of factors of ``sizes`` values must hold: every pair of two factors' values (one
    factor: its values); counted from the sums, in linear time."""
    if len(sizes) == 1:
        return sizes[0]
    return (sum(sizes) ** 2 - sum(s * s for s in sizes)) // 2


def space_problem(space: dict, cover) -> tuple[str, str] | None:
    """Why the array of ``space`` (option -> its values) under ``cover`` would be too large to build or run:
    the option at fault (``""``: the space) and one phrase; None when it is within the bounds. From the
    sizes alone: nothing is enumerated."""
    for name, values in space.items():
        if len(values) > MAX_VALUES:
            return name, f"{len(values)} values, more than {MAX_VALUES} for one option"
    if cover == DRAW or not space:
        return None
    names = sorted(space)
    levels = [len(space[k]) for k in names]
    chosen = cover.get(ALL, names) if isinstance(cover, dict) else names if cover == ALL else ()
    sizes = sorted(prod(levels[o] for o in f) for f in _factors(levels, [names.index(k) for k in chosen]))
    rows = sizes[-1] * (sizes[-2] if len(sizes) > 1 else 1)
    if rows > MAX_ROWS:
        return "", (f"its {'combinations' if len(sizes) == 1 else 'pairs'} need at least {rows} option sets, more "
                    f"than {MAX_ROWS}; give the options fewer values (or cover fewer in every combination)")
    if _interactions(sizes) > MAX_PAIRS:
        return "", (f"{len(names)} options make {_interactions(sizes)} pairs of values to cover, more than "
                    f"{MAX_PAIRS}; give fewer options or values")
    return None


def _build(levels: tuple, factors: list, rng, tries: int) -> tuple[tuple, ...]:
    """One greedy build: rows until every interaction is covered and the last block is whole."""
    n = len(levels)
    values = [list(product(*(range(levels[o]) for o in f))) for f in factors]
    if len(factors) == 1:  # one factor: its every combination
        uncovered = {(0,): set(product(range(len(values[0]))))}
    else:
        uncovered = {(a, b): set(product(range(len(values[a])), range(len(values[b]))))
                     for a, b in combinations(range(len(factors)), 2)}
    block = block_length(levels)
    rows: list[tuple] = []
    used: list[set] = [set() for _ in range(n)]  # values of each option in the current block
    while any(uncovered.values()) or len(rows) % block:
        if len(rows) % block == 0:
            used = [set() for _ in range(n)]
        left = block - len(rows) % block  # rows left in this block, this one included
        allowed = [_allowed(f, values[i], used, levels, left) for i, f in enumerate(factors)]
        ok = [set(a) for a in allowed]
        best, best_gain, fits = None, -1, {}
        for _ in range(1 if len(factors) == 1 else tries):
            choice, gain = _candidate(len(factors), allowed, _start(uncovered, ok, rng, fits), uncovered, rng)
            if gain > best_gain:
                best, best_gain = choice, gain
        for key, done in uncovered.items():
            done.discard(tuple(best[f] for f in key))
        row = [0] * n
        for f, opts in enumerate(factors):
            for o, v in zip(opts, values[f][best[f]]):
                row[o] = v
                used[o].add(v)
        rows.append(tuple(row))
    return tuple(rows)


def _allowed(factor: tuple, values: list, used: list, levels, left: int) -> list[int]:
    """A factor's values that keep the block able to hold every value of each of its options: an option
    with as many values still missing as the block has rows left must take one of them."""
    every = [set(range(levels[o])) for o in factor]
    fresh = [all_ - used[o] if len(all_ - used[o]) >= left else all_ for o, all_ in zip(factor, every)]
    if fresh == every:
        return list(range(len(values)))
    return [i for i, v in enumerate(values) if all(x in ok for x, ok in zip(v, fresh))]


def _start(uncovered: dict, ok: list, rng, fits: dict) -> tuple | None:
    """An interaction not yet covered that the block allows: a factor pair drawn by how many it has left,
    then one of its own; None when the block allows none. ``fits`` keeps each pair's allowed interactions
    for the candidates of one row (the same for all of them)."""
    keys = [k for k in sorted(uncovered) if uncovered[k]]
    while keys:
        key = rng.choices(keys, weights=[len(uncovered[k]) for k in keys])[0]
        if key not in fits:
            fits[key] = sorted(v for v in uncovered[key] if all(x in ok[f] for f, x in zip(key, v)))
        here = fits[key]
        if here:
            return key, here[rng.randrange(len(here))]
        keys.remove(key)
    return None


def _candidate(n: int, allowed: list, start: tuple | None, uncovered: dict, rng) -> tuple[list, int]:
    """One candidate row (a value index per factor), from ``start`` (an interaction not yet covered), and
    how many uncovered interactions it covers."""
    choice: list = [None] * n
    if start is not None:
        key, vals = start
        for f, v in zip(key, vals):
            choice[f] = v
    rest = [f for f in range(n) if choice[f] is None]
    rng.shuffle(rest)
    for f in rest:
        def gain(v, f=f):
            return sum((v, choice[g]) in uncovered.get((f, g), ()) or (choice[g], v) in uncovered.get((g, f), ())
                       for g in range(n) if choice[g] is not None)
        scores = [gain(v) for v in allowed[f]]
        top = max(scores)
        choice[f] = rng.choice([v for v, s in zip(allowed[f], scores) if s == top])
    covered = sum(tuple(choice[f] for f in key) in done for key, done in uncovered.items())
    return choice, covered


def row_index(rows: int, block: int, start: str, mode: str, index: int) -> int:
    """The row of a seed's variant ``index`` in ``mode``: whole blocks from the one that ``start`` (the
    campaign seed, stack and seed id) picks, one block further on for the next mode, each block's rows
    from a place ``start`` picks too (so a seed of one variant may get any row)."""
    blocks, h = max(1, rows // block), stable_int(start)
    first, turn = h % blocks + MODES.index(mode_of(mode)), (h // blocks) % block
    return ((first + index // block) % blocks) * block + (index + turn) % block


def option_set(space: dict, cover, key: str, seed_id: str, index: int, mode: str) -> dict:
    """The option values (``None``: the stack's default) of variant ``index`` of ``seed_id`` in ``mode``
    under ``cover`` (``pairs``, or ``{all: [options]}``) of ``space``; ``key`` names the campaign seed
    and the stack, whose array it is."""
    names = sorted(space)
    levels = tuple(len(space[k]) for k in names)
    chosen = cover.get(ALL, names) if isinstance(cover, dict) else names if cover == ALL else ()
    rows = covering_array(levels, tuple(sorted(names.index(k) for k in chosen)), key)
    row = rows[row_index(len(rows), block_length(levels), f"{key}|{seed_id}", mode, index)]
    return {k: list(space[k])[v] for k, v in zip(names, row)}

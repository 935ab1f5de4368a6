"""Shrinking passes over a variant (and one over its recipe); each proposes candidates through ``Shrinker.consider``.

Removing a node never changes what its consumers see: the node becomes a graph input that
carries its value on the reference (PyTorch's minifier does the same in delta debugging), so
a pass can cut away everything upstream of the bug while the bug's own inputs stay real. A
tensor a pass rebuilds keeps its layout (dimension order, gaps, storage offset): a bug that
needs a strided input survives its input being made smaller.
"""
from __future__ import annotations

import inspect

import torch
import torch.fx as fx

from gapfuzz.core.bugs import INPUT, MISSING, kernel_op
from gapfuzz.core.ir import Variant, clone_exact, target_name
from gapfuzz.fuzzer.generate import replay
from gapfuzz.fuzzer.recipe import Recipe
from gapfuzz.fuzzer.repro.shrink.core import Shrinker
from gapfuzz.workers.judge.interpret import node_values, prefix_graph
from gapfuzz.workers.run.probes import Probe, probed


def _calls(v: Variant, values: dict) -> list[fx.Node]:
    return [n for n in v.gm.graph.nodes if n.op == "call_function" and isinstance(values.get(n.name), torch.Tensor)]


def drop_dead(graph: fx.Graph) -> None:
    """Dead-code elimination that also drops a dead random op (an LSTM, for its dropout argument): FX keeps
    those for their draw from the RNG, which a reproducer does not need; the predicate still decides
    whether the bug stays."""
    graph.eliminate_dead_code(is_impure_node=_impure_beyond_rng)


def _impure_beyond_rng(n: fx.Node) -> bool:
    return n.is_impure(impure_random=False) if _RANDOM_IS_A_CHOICE else n.is_impure()


# torch releases before ``impure_random`` keep random ops
_RANDOM_IS_A_CHOICE = "impure_random" in inspect.signature(fx.Node.is_impure).parameters


def drop_unused_inputs(graph: fx.Graph, inputs: list) -> list:
    for i, n in reversed(list(enumerate(n for n in graph.nodes if n.op == "placeholder"))):
        if not n.users:
            graph.erase_node(n)
            del inputs[i]
    return inputs


def as_inputs(v: Variant, names: set, values: dict) -> Variant:
    """The variant with nodes ``names`` turned into inputs holding their reference values."""
    graph, env, inputs = fx.Graph(), {}, list(v.inputs)
    old = list(v.gm.graph.nodes)
    for n in old:
        if n.op == "placeholder":
            env[n] = graph.placeholder(n.name)
    for n in old:
        if n.name in names:
            env[n] = graph.placeholder(f"{n.name}_value")
            inputs.append(clone_exact(values[n.name]))
    for n in old:
        if n.op == "output":
            graph.output(fx.map_arg(n.args[0], lambda a: env[a]))
        elif n.op != "placeholder" and n.name not in names:
            env[n] = graph.node_copy(n, lambda a: env[a])
    drop_dead(graph)
    inputs = drop_unused_inputs(graph, inputs)
    graph.lint()
    return Variant(fx.GraphModule(v.gm, graph), tuple(inputs), v.output_names, mode=v.mode)


def cut_after(v: Variant, name: str) -> Variant:
    gm = prefix_graph(v.gm, name, [])
    drop_dead(gm.graph)
    inputs = drop_unused_inputs(gm.graph, list(v.inputs))
    gm.recompile()
    return Variant(gm, tuple(inputs), ("out",), mode=v.mode)


def _eager_values(v: Variant) -> dict | None:
    """Every call node's eager value; None where eager raises (a missing check: eager's error is the bug)."""
    try:
        return node_values(v.gm, v.inputs)
    except Exception:  # noqa: BLE001 - the passes that need the values are skipped
        return None


ISOLATED = 3  # calls of the keyed op tried alone, first ones first, when the record names no node


def isolating(op: str | None, located: str | None = None):
    """A pass that first tries the op the bug key names (``first_div_op``, ``failing_op``) alone: the graph
    cut after its located call ``located`` (else each of its first calls), every other call made an input. When
    the op is the bug, one check takes a model to one call, before the passes that halve it step by step."""
    def isolate(sh: Shrinker) -> None:
        if not op or op == MISSING or op.startswith(INPUT):
            return
        values = _eager_values(sh.current)
        if values is None:
            return
        calls = {n.name for n in _calls(sh.current, values)}
        named = [n for n in sh.current.gm.graph.nodes if n.name in calls and _is(n, op)]
        for call in [n for n in named if n.name == located] or named[:ISOLATED]:
            try:
                alone = as_inputs(cut_after(sh.current, call.name), calls - {call.name}, values)
            except Exception:  # noqa: BLE001 - a node whose prefix is no graph of its own
                continue
            if sh.consider(alone):
                return
    return isolate


def _is(node: fx.Node, op: str) -> bool:
    """Whether ``node`` calls ``op``: a key's located op (with its overload) or a failure's (without)."""
    name = target_name(node.target)
    return op in (kernel_op(name), name.rsplit(".", 1)[0])


def truncate(sh: Shrinker) -> None:
    """Binary search for the shortest prefix whose last node still shows the bug."""
    values = _eager_values(sh.current)
    if values is None:
        return
    nodes = _calls(sh.current, values)
    lo, hi = 0, len(nodes) - 1
    base = sh.current
    while lo < hi:
        mid = (lo + hi) // 2
        if sh.consider(cut_after(base, nodes[mid].name)):
            hi = mid
        else:
            lo = mid + 1


def delta_debug(sh: Shrinker) -> None:
    """ddmin over call nodes: keep one chunk (the rest become inputs), else drop one chunk."""
    n = 2
    while True:
        values = _eager_values(sh.current)
        if values is None:
            return
        nodes = [x.name for x in _calls(sh.current, values)]
        if len(nodes) < 2:
            return
        n = min(n, len(nodes))
        chunks = [nodes[i * len(nodes) // n:(i + 1) * len(nodes) // n] for i in range(n)]
        done = False
        for chunk in chunks:  # keep only this chunk: everything else becomes an input
            if sh.consider(as_inputs(sh.current, set(nodes) - set(chunk), values)):
                n, done = 2, True
                break
        if not done:
            for chunk in chunks:  # drop this chunk
                if sh.consider(as_inputs(sh.current, set(chunk), values)):
                    n, done = max(n - 1, 2), True
                    break
        if not done:
            if n >= len(nodes) or sh.calls >= sh.max_calls:
                return
            n = min(2 * n, len(nodes))


def drop_outputs(sh: Shrinker) -> None:
    """Keep a single output when several remain."""
    out = next(n for n in sh.current.gm.graph.nodes if n.op == "output")
    leaves = [a for a in torch.utils._pytree.tree_leaves(out.args[0]) if isinstance(a, fx.Node)]
    for leaf in leaves if len(leaves) > 1 else []:
        if sh.consider(cut_output(sh.current, leaf.name)):
            return


def cut_output(v: Variant, name: str) -> Variant:
    graph = fx.Graph()
    env = {}
    for n in v.gm.graph.nodes:
        if n.op == "output":
            graph.output((env[next(m for m in v.gm.graph.nodes if m.name == name)],))
        else:
            env[n] = graph.node_copy(n, lambda a: env[a])
    drop_dead(graph)
    inputs = drop_unused_inputs(graph, list(v.inputs))
    return Variant(fx.GraphModule(v.gm, graph), tuple(inputs), ("out",), mode=v.mode)


def laid_out_like(values: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """A copy of ``values`` laid out as ``like`` is, whatever the sizes: the same dimension order, each
    dimension as many times further apart than dense as there (a gapped view's step), broadcast (stride 0)
    dimensions kept, the same storage offset. ``like``'s layout at ``values``' sizes."""
    if values.dim() != like.dim() or values.numel() == 0:
        return clone_exact(values)
    strides, reach_old, reach_new = [0] * like.dim(), 1, 1
    for d in sorted(range(like.dim()), key=lambda d: (like.stride(d), like.shape[d])):
        if like.stride(d) == 0:
            continue
        gap = like.stride(d) // reach_old if like.stride(d) % reach_old == 0 and like.stride(d) >= reach_old else 1
        strides[d] = reach_new * gap
        reach_old, reach_new = like.stride(d) * like.shape[d], strides[d] * values.shape[d]
    span = like.storage_offset() + 1 + sum((n - 1) * s for n, s in zip(values.shape, strides))
    out = torch.empty(span, dtype=values.dtype, device=values.device).as_strided(values.shape, strides,
                                                                                   like.storage_offset())
    once = [1 if s == 0 else n for n, s in zip(values.shape, strides)]  # a broadcast dimension is written once
    out.as_strided(once, strides, like.storage_offset()).copy_(values[tuple(slice(0, n) for n in once)])
    return out


def _narrowed(v: Variant, i: int, d: int, length: int, start: int = 0) -> Variant:
    inputs = tuple(laid_out_like(t.narrow(d, start, length), t) if k == i else t for k, t in enumerate(v.inputs))
    return v.with_graph(v.gm, inputs)


def _specials(t: torch.Tensor) -> torch.Tensor:
    """Where a floating tensor holds a NaN, an infinity or -0.0: what a symptom of special values needs kept."""
    return ~torch.isfinite(t) | ((t == 0) & torch.signbit(t))


def _special_at(t: torch.Tensor, d: int) -> int | None:
    """Where along dimension ``d`` the first special value (NaN, an infinity, -0.0) of ``t`` is, if any: a
    symptom of special values needs one kept when the input is cut."""
    if not t.is_floating_point() or t.numel() == 0:
        return None
    found = _specials(t).nonzero()
    return int(found[0, d]) if len(found) else None


def shrink_inputs(sh: Shrinker) -> None:
    """Inputs cut to length 1 along each dimension (batch first), at the first special value where the input
    holds one (else at the start), else halved around it while that works."""
    for i in range(len(sh.current.inputs)):
        for d in range(sh.current.inputs[i].dim()):
            t = sh.current.inputs[i]
            at = _special_at(t, d)
            starts = [at, 0] if at else [0]
            if t.shape[d] <= 1 or any(sh.consider(_narrowed(sh.current, i, d, 1, s)) for s in starts):
                continue
            while sh.current.inputs[i].shape[d] > 2:
                n = sh.current.inputs[i].shape[d]
                at = _special_at(sh.current.inputs[i], d) or 0
                start = min(max(0, at - n // 4), n - n // 2)  # the special value inside the kept half
                if not sh.consider(_narrowed(sh.current, i, d, n // 2, start)):
                    break


def simplify_inputs(sh: Shrinker) -> None:
    """Each floating input's ordinary values as 0, else 1, its special values (NaN, infinities, -0.0) kept."""
    for i, t in enumerate(sh.current.inputs):
        if not isinstance(t, torch.Tensor) or not t.is_floating_point():
            continue
        keep = _specials(t)
        for fill in (0.0, 1.0):
            simple = laid_out_like(torch.where(keep, t, torch.full_like(t, fill)), t)
            inputs = tuple(simple if k == i else x for k, x in enumerate(sh.current.inputs))
            if sh.consider(sh.current.with_graph(sh.current.gm, inputs)):
                break


def simplify_weights(sh: Shrinker) -> None:
    """Weights as ones, then as small integers, while the bug stays."""
    for name, t in sorted(sh.current.tensors().items(), key=lambda kv: -kv[1].numel()):
        if not t.is_floating_point():
            continue
        for simple in (torch.ones_like(t), t.round().clamp(-3, 3), t.sign()):
            if sh.consider(with_tensor(sh.current, name, simple)):
                break


def with_tensor(v: Variant, name: str, value: torch.Tensor) -> Variant:
    root = torch.nn.Module()
    for k, t in v.tensors().items():
        root.register_buffer(k, laid_out_like(value, t) if k == name else t)
    graph = fx.Graph()
    graph.output(graph.graph_copy(v.gm.graph, {}))
    return Variant(fx.GraphModule(root, graph), v.inputs, v.output_names, mode=v.mode)


def dropping_mutations(recipe: Recipe, max_params, probe: Probe):
    """A recipe-level pass: remove mutations one at a time (last first) while the bug stays; the recipe keeps
    what is left (its count is the pass's accepted candidates). Each candidate is the recipe replayed without
    one mutation on the bug's probe, considered as not larger than the current variant: a mutation that only
    lays an input out differently changes no size, and stays if the bug needs it."""
    def drop_mutations(sh: Shrinker) -> None:
        for i in reversed(range(len(recipe.mutations))):
            fewer = Recipe(recipe.seed, recipe.mutations[:i] + recipe.mutations[i + 1:], recipe.rng, recipe.mode,
                           recipe.train_layers)
            try:
                candidate = probed(replay(fewer, max_params), probe)
            except Exception:  # noqa: BLE001 - later mutations may need earlier ones; keep them then
                candidate = None
            if sh.consider(candidate, no_larger=True):
                recipe.mutations = fewer.mutations
    return drop_mutations


STRUCTURE = [truncate, delta_debug, drop_outputs]  # fewer calls
VALUES = [shrink_inputs, simplify_inputs, simplify_weights]  # smaller, simpler tensors
DEFAULT_PASSES = [*STRUCTURE, *VALUES]

"""Capture a built seed with torch.export into the one IR (core.ir.Variant).

The exported program is lowered to functional ATen with high-level ops kept
(``run_decompositions({})``: no in-place ops, ``linear``/``conv2d``/``layer_norm``
stay recognisable), then *unlifted* into a flat GraphModule: user inputs are the
only placeholders, weights are get_attr targets, outputs are a flat tuple whose
names come from the model's output structure (``logits``, ``[0]``, ...).
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import torch
import torch.fx as fx
import torch.fx._pytree as fx_pytree
import torch.utils._pytree as pytree
from torch.export.graph_signature import InputKind, OutputKind

from gapfuzz.core.bugs import Stage
from gapfuzz.core.ir import Variant

from .spec import BuiltSeed, count_params

# Nodes that only assert export-time facts; they would veto legitimate mutations.
_DROP = {torch.ops.aten._assert_tensor_metadata.default, torch.ops.aten._assert_scalar.default}


class CaptureError(RuntimeError):
    """A seed that could not be captured; ``stage`` is build, budget or capture; ``info`` the
    seed's facts when it was built."""

    def __init__(self, stage: Stage, message: str, info: dict | None = None):
        super().__init__(message)
        self.stage, self.info = stage, info


def check_budget(params: int, max_params: int | None, info: dict | None = None) -> None:
    if max_params is not None and params > max_params:
        raise CaptureError(Stage.BUDGET, f"{params:,} parameters exceed the cap of {max_params:,}", info)


@dataclass
class Captured:
    variant: Variant
    params: int
    capture_s: float


def _key_name(k) -> str:
    for attr in ("key", "idx", "name"):
        if hasattr(k, attr):
            return str(getattr(k, attr))
    return str(k)


def output_names(out_spec) -> tuple[str, ...]:
    """``logits``, ``out``, ``0``, ``hidden_states.1``: one name per flat output, from its path."""
    if out_spec is None:
        return ()
    skeleton = pytree.tree_unflatten(list(range(out_spec.num_leaves)), out_spec)
    paths, _ = pytree.tree_flatten_with_path(skeleton)
    return tuple(".".join(_key_name(k) for k in p) or "out" for p, _ in paths)


RUNNING = "running:"  # the prefix of a buffer's new value, output by a layer that trains (batch norm's statistics)


def unlift(ep: torch.export.ExportedProgram, user_values: list, mutations: bool = False) -> fx.GraphModule:
    """The exported graph with weights as attributes and a flat tuple output.

    ``user_values`` are the flat user inputs; non-tensor ones are folded in as constants. With
    ``mutations``, the new values of mutated buffers (batch norm's running statistics in training)
    follow the user outputs; the buffers themselves are left as they were."""
    sig = ep.graph_signature
    user = iter(user_values)
    state = {**ep.state_dict, **ep.constants}
    specs = {s.arg.name: s for s in sig.input_specs if hasattr(s.arg, "name")}
    root, graph, env = torch.nn.Module(), fx.Graph(), {}
    for node in ep.graph.nodes:
        if node.op == "placeholder":
            spec = specs[node.name]
            if spec.kind == InputKind.USER_INPUT:
                value = next(user)
                if not isinstance(value, torch.Tensor):
                    env[node] = value
                    continue
                env[node] = graph.placeholder(node.name)
            else:
                t = state[spec.target].detach()
                if spec.kind == InputKind.PARAMETER:
                    root.register_parameter(node.name, torch.nn.Parameter(t, requires_grad=False))
                else:
                    root.register_buffer(node.name, t)
                env[node] = graph.get_attr(node.name)
            env[node].meta = dict(node.meta)
        elif node.op == "output":
            outs = [o for o, s in zip(node.args[0], sig.output_specs) if s.kind == OutputKind.USER_OUTPUT]
            if mutations:
                outs += [o for o, s in zip(node.args[0], sig.output_specs) if s.kind == OutputKind.BUFFER_MUTATION]
            graph.output(tuple(env[o] if isinstance(o, fx.Node) else o for o in outs))
        elif node.op == "call_function" and node.target in _DROP:
            continue
        else:
            env[node] = graph.node_copy(node, lambda a: env[a])
    graph.eliminate_dead_code()
    graph.lint()
    return fx.GraphModule(root, graph)


def capture(seed: BuiltSeed, max_params: int | None = None, train_layers: bool = False) -> Captured:
    """The seed as an ATen graph, its layers as in evaluation; with ``train_layers``, as in training
    (dropout draws, batch norm uses the batch's statistics and outputs its new running ones)."""
    params = seed.info.params if seed.info.params is not None else count_params(seed.model)
    check_budget(params, max_params, seed.info.to_dict())
    for p in seed.model.parameters():
        p.requires_grad_(False)
    seed.model.train(train_layers)
    t0 = time.perf_counter()
    try:
        ep = torch.export.export(seed.model, seed.args, seed.kwargs or None, strict=False)
        ep = ep.run_decompositions({})
        flat = fx_pytree.tree_flatten_spec((seed.args, seed.kwargs or {}), ep.call_spec.in_spec)
        gm = unlift(ep, flat, mutations=train_layers)
    except Exception as e:
        raise CaptureError(Stage.CAPTURE, f"{type(e).__name__}: {e}", seed.info.to_dict()) from e
    inputs = tuple(t for t in flat if isinstance(t, torch.Tensor))
    names = output_names(ep.call_spec.out_spec)
    if train_layers:
        names += tuple(RUNNING + s.target for s in ep.graph_signature.output_specs
                       if s.kind == OutputKind.BUFFER_MUTATION)
    variant = Variant(gm, inputs, names)
    return Captured(variant, params, time.perf_counter() - t0)

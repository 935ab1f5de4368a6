"""Training mode: a variant run forward, through a loss every output element reaches, and backward.

The pool, not the backend, makes a training run, so that every stack that trains is tested the
same way: the graph's parameters become its first inputs (``lift_parameters``), the backend
prepares that graph as it would any other (``torch.compile`` then builds AOTAutograd's joint
graph, its partition and the backward kernels), and ``train_step`` calls it on leaves that require
grad, makes the loss and runs backward. The loss is a fixed, seeded random projection of each
floating output, summed: ``out.sum()`` would send a gradient of all ones, which hides a backward
that mixes up its elements. What is compared is the forward outputs, the loss and the gradient of
every parameter and of every floating input, each a named output (``grad:<parameter>``,
``grad:input:<name>``), with the same tolerances, oracle and attribution as any output.

A reproducer copies ``train_step`` and what it calls, so it decides as the campaign did.
"""
from __future__ import annotations

import contextlib

import torch
import torch.fx as fx

from gapfuzz.core.bugs import GRAD_OUTPUT as GRAD  # the prefix of every gradient output's name

LOSS = "loss"
PROJECTION_SEED = 20261201


def trainable_parameters(gm: fx.GraphModule) -> list[str]:
    """The graph's floating parameters (get_attr targets), in graph order: what training updates."""
    params = dict(gm.named_parameters())
    seen = []
    for n in gm.graph.nodes:
        if n.op == "get_attr" and n.target in params and params[n.target].is_floating_point() \
                and n.target not in seen:
            seen.append(n.target)
    return seen


def lift_parameters(gm: fx.GraphModule, names: list) -> fx.GraphModule:
    """A copy of ``gm`` whose parameters ``names`` are its first placeholders, in that order: a
    function of (parameters, inputs) that autograd differentiates in both."""
    graph = fx.Graph()
    env = {}
    for name in names:
        env[name] = graph.placeholder("param_" + name.replace(".", "_"))
    for n in gm.graph.nodes:
        if n.op == "get_attr" and n.target in env:
            env[n.name] = env[n.target]
            continue
        env[n.name] = graph.node_copy(n, lambda a: env[a.name])
    graph.lint()
    return fx.GraphModule(gm, graph)


def projection(index: int, out: torch.Tensor) -> torch.Tensor:
    """The fixed random weights of output ``index`` in the loss, as exact float32 values in the
    output's own precision (float64 on the oracle: the same numbers)."""
    g = torch.Generator().manual_seed(PROJECTION_SEED + index)
    dtype = torch.promote_types(out.dtype, torch.float32)
    return torch.randn(tuple(out.shape), generator=g, dtype=torch.float32).to(device=out.device, dtype=dtype)


def loss_of(outputs: list):
    """Sum over floating outputs of <projection, output>, each term in at least float32."""
    terms = [(o.to(torch.promote_types(o.dtype, torch.float32)) * projection(i, o)).sum()
             for i, o in enumerate(outputs) if isinstance(o, torch.Tensor) and o.is_floating_point()]
    return sum(terms[1:], terms[0]) if terms else None


def train_step(fn, params: list, inputs: tuple) -> list:
    """``fn(*params, *inputs)``, its loss and backward: the forward outputs, the loss and the gradient
    of every parameter and floating input (zeros for one the loss does not reach), as plain
    tensors. The parameters are copied; the inputs are taken as views, with their strides (the
    caller gives each call its own copy)."""
    torch.manual_seed(PROJECTION_SEED)  # random ops (dropout in training) draw the same on every stack
    params = [p.detach().clone().requires_grad_(True) for p in params]
    fed = [t.detach().requires_grad_(True) if isinstance(t, torch.Tensor) and t.is_floating_point()
           else t for t in inputs]
    leaves = params + [t for t in fed if isinstance(t, torch.Tensor) and t.requires_grad]
    with torch.enable_grad():
        out = torch.utils._pytree.tree_leaves(fn(*params, *fed))
        loss = loss_of(out)
        grads = [None] * len(leaves)
        if loss is not None and loss.requires_grad:
            grads = torch.autograd.grad(loss, leaves, allow_unused=True)
    grads = [torch.zeros_like(leaf) if g is None else g for g, leaf in zip(grads, leaves)]
    detached = [o.detach() if isinstance(o, torch.Tensor) else o for o in out]
    return detached + [torch.zeros(()) if loss is None else loss.detach()] + [g.detach() for g in grads]


def training_output_names(gm: fx.GraphModule, inputs: tuple, forward_names) -> tuple:
    """The names of a training run's outputs, in ``train_step``'s order."""
    placeholders = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
    floating = [name for name, t in zip(placeholders, inputs) if isinstance(t, torch.Tensor) and t.is_floating_point()]
    return (*forward_names, LOSS, *(GRAD + p for p in trainable_parameters(gm)),
            *(GRAD + "input:" + name for name in floating))


def output_names(variant) -> tuple:
    """A variant's run outputs' names: its own, and in training the loss and gradients too."""
    if variant.mode.backward:
        return training_output_names(variant.gm, variant.inputs, variant.output_names)
    return tuple(variant.output_names)


def autograd_for(variant):
    """A context with autograd on for a run that goes backward (``core.modes``), off for a forward alone."""
    return torch.enable_grad() if variant.mode.backward else torch.no_grad()


def forward_count(names) -> int:
    """How many of a training run's outputs are the forward's and the loss (the rest are gradients)."""
    return sum(1 for n in names if not str(n).startswith(GRAD))


RANDOM_OPS = ("native_dropout", "bernoulli", "rand", "randn", "randint", "rand_like", "randn_like", "randint_like",
              "normal", "uniform", "randperm", "multinomial", "exponential", "geometric", "cauchy", "log_normal")


def draws_randomly(gm: fx.GraphModule) -> bool:
    """Whether the graph calls a random operator (dropout when its layers train)."""
    return any(n.op == "call_function" and getattr(n.target, "_opname", None) in RANDOM_OPS for n in gm.graph.nodes)


class Trainer:
    """A backend's training run of one variant: ``prepare`` the lifted graph once, then call it
    on any inputs (the example, each probe); the parameters are the variant's own. A graph that
    draws random numbers is seeded the same before every call, and Inductor then draws with eager's
    generator (its ``fallback_random``), so both sides drop the same elements."""

    def __init__(self, gm: fx.GraphModule, device: str):
        self.names = trainable_parameters(gm)
        tensors = dict(gm.named_parameters())
        self.params = [tensors[n].detach().to(device) for n in self.names]
        self.gm = lift_parameters(gm, self.names)
        self.random = draws_randomly(gm)

    def _same_draws(self):
        import torch._inductor.config as inductor_config

        return inductor_config.patch(fallback_random=True) if self.random else contextlib.nullcontext()

    def prepare(self, backend, example_inputs: tuple, device: str):
        with self._same_draws():
            fn = backend.prepare(self.gm, (*self.params, *example_inputs), device)

        def call(*inputs):
            with self._same_draws():
                return train_step(fn, self.params, inputs)
        return call

"""A test-only compiler whose passes miscompile, loaded by ``tests.stacks.planted_passes:MiscompilingInductor``.

It is Inductor with three of its own graph passes, each wrong for one pattern, planted in the
places Inductor gives custom passes (its pre-grad, joint-graph and post-grad hooks):

- ``pre_grad_custom_pass`` turns a ``relu`` into a ``leaky_relu`` (slope 0.1);
- ``joint_custom_pre_pass`` turns a ``sub`` into an ``add``;
- ``post_grad_custom_post_pass`` multiplies by 0.5 more than a ``mul`` asks for.

Each shows at an ordinary op of any graph that has it; CompilerBisector should name each pass.
"""
from __future__ import annotations

import torch

from gapfuzz.workers.backends.inductor import prepare_inductor
from gapfuzz.workers.run.backend import Backend

aten = torch.ops.aten


def relu_to_leaky(graph):
    for n in graph.nodes:
        if n.op == "call_function" and n.target is aten.relu.default:
            n.target, n.args = aten.leaky_relu.default, (n.args[0], 0.1)


def sub_to_add(graph):
    for n in graph.nodes:
        if n.op == "call_function" and n.target is aten.sub.Tensor:
            n.target = aten.add.Tensor


def halve_mul(graph):
    for n in list(graph.nodes):
        if n.op == "call_function" and n.target is aten.mul.Tensor and not n.meta.get("planted"):
            with graph.inserting_after(n):
                half = graph.call_function(aten.mul.Tensor, (n, 0.5))
            half.meta.update(n.meta, planted=True)
            n.replace_all_uses_with(half, delete_user_cb=lambda user: user is not half)


PASSES = {"pre_grad_custom_pass": relu_to_leaky, "joint_custom_pre_pass": sub_to_add,
          "post_grad_custom_post_pass": halve_mul}


class MiscompilingInductor(Backend):
    name = "miscompiling-inductor"
    trains = True
    compile_error_modules = ("torch._dynamo", "torch._inductor")
    any_strides = False  # Inductor: compiles again for new strides

    def prepare(self, gm, example_inputs, device):
        run, self.info = prepare_inductor(gm, example_inputs, device, {**PASSES, **self.options})
        return run


class FastMathEager(Backend):
    """Eager, but with ``fast: true`` (its default) ``tanh`` is computed by a rational approximation
    that is wrong for |x| > 1: a defect of its "optimiser" that the unoptimised option set lacks."""

    name = "fast-math-eager"
    unoptimised = (("fast_math", {"fast": False}),)

    def prepare(self, gm, example_inputs, device):
        if not self.options.get("fast", True):
            return gm
        from .numeric_backends import _retargeted

        return _retargeted(gm, (aten.tanh.default,), lambda x: x * (27 + x * x) / (27 + 9 * x * x))


def _swap_sub(gm):
    for n in gm.graph.nodes:
        if n.op == "call_function" and n.target is aten.sub.Tensor and len(n.args) == 2:
            n.args = (n.args[1], n.args[0])


def _drop_neg_zero(gm):  # a correct pass: x * 1 -> x is left alone; it only renames nothing
    return None


class OwnPassCompiler(Backend):
    """A compiler of its own: an FX graph rewritten by named passes, then run by eager. ``swap_sub``
    swaps a ``sub``'s operands (wrong); ``tidy`` does nothing. It honours ``disabled_passes``."""

    name = "own-pass-compiler"
    passes = ("tidy", "swap_sub")

    def prepare(self, gm, example_inputs, device):
        import copy

        gm = copy.deepcopy(gm)
        skip = set(self.options.get("disabled_passes", ()))
        for name, fn in (("tidy", _drop_neg_zero), ("swap_sub", _swap_sub)):
            if name not in skip:
                fn(gm)
        gm.recompile()
        return gm

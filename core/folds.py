"""What a located divergence's key folds together, so that one defect is one cluster.

A key names the kernel a located op runs (``KERNEL_OF``): ``linear``, ``addmm``, ``matmul``, ``bmm``,
``baddbmm`` and ``addbmm`` are ``mm`` (with a bias, batched, or both) on every stack (eager's kernels,
Inductor's lowering), as are ``einsum`` and ``tensordot`` (they decompose to it), and a reduction's
min is its max (argmin, amin, min), so one kernel's defect is one cluster whichever of its ops a
graph held. Ops that only look alike (``neg`` and ``abs``, two sign-bit ops; ``minimum`` and ``min``,
elementwise and reduction) are not one kernel and stay apart.

A located node's symptom is what the node showed on one input: the same wrong kernel gives NaN on
one probe and a numeric error on another, and bits exact by contract (``strict``) where its error is
under tolerance. So a key reads the node's symptom *class* (``SYMPTOM_CLASS``): the forward value
classes are one (``numeric``), the gradient ones another (``grad``: the node's backward kernel, its
forward right), and the classes that say the output's form is wrong (structure, shape, dtype) or that
a check is missing stay themselves. A run keeps its own symptom (the reducer holds a reproducer to
it); the cluster lists its runs' symptoms. Unlocated divergences have no node to fold at: their
symptom stays identity. The error's decade (``error_band``) is severity, never identity.
"""
from __future__ import annotations

from .vocabulary import MISSING, Symptom

# graph ops that run another op's kernel on every stack (eager's kernels, Inductor's lowering): keyed by that kernel
KERNEL_OF = {**{f"aten.{op}.default": "aten.mm.default" for op in ("linear", "addmm", "matmul", "bmm", "baddbmm",
                                                                      "addbmm", "einsum", "tensordot")},
             "aten.argmin.default": "aten.argmax.default", "aten.amin.default": "aten.amax.default",
             "aten.min.dim": "aten.max.dim", "aten.min.default": "aten.max.default"}

# a located node's symptom -> the class its key reads (the mildest of the class, so a numeric key keeps its id)
SYMPTOM_CLASS = {**{s: Symptom.NUMERIC for s in (Symptom.NUMERIC, Symptom.NONFINITE, Symptom.VALUE, Symptom.INTEGER,
                                                  Symptom.TASK, Symptom.STRICT)},
                 Symptom.GRAD: Symptom.GRAD, Symptom.GRAD_NONFINITE: Symptom.GRAD}


def kernel_op(op: str) -> str:
    """The op a key names for a located op: the kernel it runs (``KERNEL_OF``), else itself."""
    return KERNEL_OF.get(op, op)


def symptom_class(symptom: str) -> str:
    """The class a located node's symptom is keyed as (``SYMPTOM_CLASS``), else the symptom itself."""
    return str(SYMPTOM_CLASS.get(symptom, symptom))


def kernel_ops(ops):
    """``kernel_op`` of every op of a string array."""
    import pyarrow.compute as pc

    for op, kernel in KERNEL_OF.items():
        ops = pc.if_else(pc.equal(ops, op), kernel, ops)
    return ops


def symptom_classes(symptoms):
    """``symptom_class`` of every symptom of a string array."""
    import pyarrow as pa
    import pyarrow.compute as pc

    folded = pc.is_in(symptoms, value_set=pa.array([str(s) for s, c in SYMPTOM_CLASS.items() if s != c]))
    grad = pc.is_in(symptoms, value_set=pa.array([str(s) for s, c in SYMPTOM_CLASS.items() if c == Symptom.GRAD]))
    return pc.if_else(pc.fill_null(folded, False),
                      pc.if_else(grad, str(Symptom.GRAD), str(Symptom.NUMERIC)), symptoms)


def error_band(tol_ratio):
    """``<1``, ``1e0`` .. ``1e5`` (the decade of tol_ratio), ``1e6+``; ``-`` when unknown (an Arrow array)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    r = pc.cast(tol_ratio, pa.float64())
    unknown = pc.fill_null(pc.or_kleene(pc.is_null(r), pc.is_nan(r)), True)
    safe = pc.if_else(unknown, 1.0, r)
    decade = pc.min_element_wise(pc.floor(pc.log10(pc.max_element_wise(safe, 1.0))), 6.0)
    index = pc.if_else(unknown, 8.0, pc.if_else(pc.less(safe, 1.0), 0.0, pc.add(decade, 1.0)))
    labels = pa.array(["<1", *[f"1e{i}" for i in range(6)], "1e6+", MISSING])
    return pc.take(labels, pc.cast(index, pa.int64()))

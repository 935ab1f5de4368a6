"""How each part of a bug key is read from a run's record columns, vectorised over Arrow arrays.

``core.bugs`` says which parts make a key and joins them into an id; these functions compute each part
for a whole column set at once (a million records in seconds): where a run happened, its failure
template, its symptom (the located node's, and the class a key folds it to, ``core.folds``) and its
explanation. ``key_table`` turns records held as mappings into the columns a key reads.
Nothing here imports torch; pyarrow is imported by the functions that need it.
"""
from __future__ import annotations

import math
from typing import Mapping

from .folds import symptom_classes
from .vocabulary import (
    COMPLETED,
    DIVERGENT_VERDICTS,
    FAILED,
    LIMITS,
    MISSING,
    OVERFLOW_EDGES,
    REFERENCE_STACK,
    Status,
    Symptom,
    Verdict,
)

KEY_COLUMNS = ("backend", "stack", "device", "status", "stage", "error_type", "message", "cause", "verdict",
               "symptom", "first_div_op", "output_dtype", "explanation", "tol_ratio", "task_agree",
               "culprit", "node_symptom", "dtype_specific", "probe")  # what a key reads
FLOATS, BOOLS = ("tol_ratio", "task_agree"), ("dtype_specific",)


class Columns:
    """A table's columns as a key reads them: absent ones as nulls of their type."""

    def __init__(self, table):
        self.table, self.n = table, table.num_rows

    def __call__(self, name: str, kind=None):
        import pyarrow as pa
        import pyarrow.compute as pc

        kind = kind or pa.string()
        return pc.cast(self.table[name], kind) if name in self.table.column_names else pa.nulls(self.n, kind)


def text(a):
    """A string column with nulls and empty strings as ``MISSING``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    a = pc.cast(a, pa.string())
    return pc.if_else(pc.or_kleene(pc.is_null(a), pc.equal(a, "")), MISSING, a)


def among(a, values):
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.is_in(a, value_set=pa.array([str(v) for v in values]))


def place(col: Columns):
    """``stack@device`` (the backend label where no stack is recorded; PyTorch's for a reference-suspect
    divergence, one cluster for PyTorch rather than one per vendor), and the reference-suspect mask."""
    import pyarrow.compute as pc

    stack = text(col("stack"))
    where = pc.if_else(pc.not_equal(stack, MISSING), pc.binary_join_element_wise(stack, text(col("device")), "@"),
                       text(col("backend")))
    suspect = pc.fill_null(pc.equal(col("verdict"), str(Verdict.REFERENCE_SUSPECT)), False)
    return pc.if_else(suspect, REFERENCE_STACK, where), suspect


def template(col: Columns):
    """The failure template (a limit's or a silent death's: its cause, the printed tail being incidental),
    and the mask of runs ended by a limit."""
    import pyarrow.compute as pc

    from .templates import template_unique

    status, cause = col("status"), col("cause")
    tpl = template_unique(col("message"))
    limit = pc.and_(among(status, LIMITS), pc.fill_null(pc.starts_with(cause, "limit:"), False))
    limit = pc.or_(limit, pc.and_(pc.equal(tpl, ""), pc.is_valid(cause)))  # died silently: its signal or exit
    return pc.if_else(limit, template_unique(cause), tpl), limit


def outcome(col: Columns):
    """Masks of the runs that failed, and of those that completed with a divergence (a verdict that says so,
    or a task answer that changed)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    status = col("status")
    task = pc.fill_null(pc.less(col("task_agree", pa.float64()), 1.0), False)
    diverged = pc.or_(pc.or_(pc.fill_null(pc.equal(status, str(Status.MISMATCH)), False),
                             among(col("verdict"), DIVERGENT_VERDICTS)), task)
    return among(status, FAILED), pc.and_(among(status, COMPLETED), diverged), task


def symptoms(col: Columns, tpl, task, named):
    """Each run's symptom as its key names it (the located node's, else the output's; a NaN/Inf at an
    overflow edge as the numeric error it is; a missing check with the reference's message), and the
    class a located one is keyed as (``core.folds.symptom_classes``; where a culprit pass is ``named``,
    the pass is the defect, forward or backward: one class); an unlocated one is its own class."""
    import pyarrow.compute as pc

    located = pc.not_equal(text(col("first_div_op")), MISSING)
    own = text(col("symptom"))  # the model output's: severity, not identity, once the node is known
    at_node = pc.if_else(located, text(col("node_symptom")), MISSING)  # a gradient's: its node's forward, if wrong
    symptom = pc.if_else(pc.not_equal(at_node, MISSING), at_node,
                         pc.if_else(pc.and_(pc.equal(own, MISSING), task), str(Symptom.TASK), own))
    at_overflow = pc.fill_null(among(col("probe"), [f"edge:{e}" for e in OVERFLOW_EDGES]), False)
    symptom = pc.if_else(pc.and_(at_overflow, pc.equal(symptom, str(Symptom.NONFINITE))), str(Symptom.NUMERIC), symptom)
    missing_check = pc.equal(symptom, str(Symptom.MISSING_ERROR))  # which check: the reference's message
    check = pc.replace_substring_regex(text(tpl), r"-?<(?:num|hex|hash)>", "<num>")  # any index past either end
    symptom = pc.if_else(missing_check, pc.binary_join_element_wise(symptom, check, ": "), symptom)
    symptom = pc.if_else(pc.equal(symptom, MISSING), str(Symptom.NUMERIC), symptom)
    keyed = symptom_classes(symptom)
    keyed = pc.if_else(pc.and_(named, pc.equal(keyed, str(Symptom.GRAD))), str(Symptom.NUMERIC), keyed)
    return symptom, pc.if_else(located, keyed, symptom)


def explanation(col: Columns):
    """The explanation a run's divergence has (a tested hypothesis, or a verdict that is one: ill-conditioned,
    amplified); ``MISSING`` for none."""
    import pyarrow as pa
    import pyarrow.compute as pc

    verdict = col("verdict")
    explains = among(verdict, (Verdict.ILL_CONDITIONED, Verdict.AMPLIFIED))
    return text(pc.coalesce(col("explanation"), pc.if_else(explains, verdict, pa.scalar(None, pa.string()))))


def _present(v):
    """None for a missing value, whichever kind of missing (None, NaN, pandas NA) a caller holds."""
    if v is None or (isinstance(v, float) and math.isnan(v)) or type(v).__name__ in ("NAType", "NaTType"):
        return None
    return v


def key_table(records: list[Mapping]):
    """The columns a key reads (``KEY_COLUMNS``) of records held as mappings, as one Arrow table."""
    import pyarrow as pa

    types = {**{c: pa.float64() for c in FLOATS}, **{c: pa.bool_() for c in BOOLS}}
    schema = pa.schema([(c, types.get(c, pa.string())) for c in KEY_COLUMNS])
    rows = []
    for record in records:
        row = {c: _present(record.get(c)) for c in KEY_COLUMNS}
        for c, v in row.items():
            if v is not None:
                row[c] = float(v) if c in FLOATS else bool(v) if c in BOOLS else str(v)
        rows.append(row)
    return pa.Table.from_pylist(rows, schema=schema)

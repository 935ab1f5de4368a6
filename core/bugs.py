"""What a bug is, defined once: the key that says "the same bug".

``bug_key(record)`` (one run) and ``bug_keys(table)`` (a whole column set, vectorised) are the one
definition of which runs show the same bug; guidance counts new keys, triage makes one cluster per
key, the tier-2 ledger locates one divergence per seed and key, and the reducer keeps a candidate
only while it shows its cluster's key (``BugKey.shown_by``). The words records use (statuses,
stages, verdicts, symptoms, explanations) are ``core.vocabulary``'s, named here too.

A failure's key is structure first: where it happened (``stack@device``: one converter defect seen
under two option sets is one bug), its status, stage and exception type, the graph operator its
message names; then the message template. A divergence's key is where it happened too (the
grid_sample disagreement Inductor shows with static and with dynamic shapes is one bug; the labels
it was seen under are listed), the oracle's verdict, the symptom, the operator where it starts and
the output dtype; how far off it is (the error's decade) is severity, a column, not identity.

Once the divergence is located, the node is the defect (``core.folds``): its op is keyed as the
kernel it runs (``linear``, ``matmul``, ``bmm`` are ``mm``; ``argmin`` is ``argmax``), and its symptom
as its class: one wrong kernel that gives NaN on one probe, a numeric error on another and, under
tolerance, a NaN of the wrong sign (``strict``) is one cluster that lists those symptoms; its
backward (a gradient wrong where the node's forward is right) is another kernel and another key. The
node's symptom (``node_symptom``) stands for the model's output's (one NaN defect of ``relu`` is one
bug whether the model's top-1 changed or only its NaN pattern). A key keeps the run's own symptom
among its ``parts`` (the reducer holds a reproducer to it) and hashes the class (``identity``).
The output dtype joins the key only where the same op on the same stack passes at another dtype of
the same seed and probe (``dtype_specific``, derived by ``analysis.causes``); otherwise the cluster
lists its dtypes. In training, a gradient divergence located at a node whose forward value diverges
too is that forward defect: its symptom is the node's forward one (from ``workers.judge.grad_align``
on the same run, or from the forward runs of the same seed, ``analysis.causes.join_forward``).

When independent targets agree with each other and eager is apart (``reference-suspect``) the key is
filed against PyTorch (``REFERENCE_STACK``), not each vendor. A divergence that eager reproduces when
made to compute the way a hypothesis says the stack does (``Explanation``: bfloat16, float16, TF32,
float32, another option set, reduction order) is a *behaviour*: its key is the stack and the
explanation alone, so one precision default is one cluster that lists its ops, seeds and dtypes.
Explanations that name no defect at all (reduction order, an ill-conditioned reference, amplified
rounding) make ``benign`` clusters, kept apart. A compiler finding whose cause was bisected to a pass
(``culprit``: backend, subsystem and pass, ``workers.judge.culprit``) is keyed by that pass in place of
its op: one pass that breaks two ops is one bug, one op that two passes break is two; a key without a
culprit keeps the id it always had. What keeps two defects apart: another stack, another located
node (kernel), another verdict or culprit, another failure template.

Nothing here imports torch; pyarrow is imported by the functions that need it.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping

from .folds import KERNEL_OF, SYMPTOM_CLASS, error_band, kernel_op, kernel_ops, symptom_class
from .key_parts import KEY_COLUMNS, Columns, explanation, key_table, outcome, place, symptoms, template, text
from .vocabulary import (
    BENIGN,
    COMPLETED,
    DEFAULT_ORACLE,
    DEFAULT_REFERENCE,
    DIVERGENT,
    DIVERGENT_VERDICTS,
    EXAMPLE_PROBE,
    FAILED,
    GRAD_OUTPUT,
    GRADIENT_SYMPTOMS,
    INPUT,
    LIMITS,
    MISSING,
    OVERFLOW_EDGES,
    REFERENCE_STACK,
    VENDOR_STAGES,
    Explanation,
    Kind,
    ReproStatus,
    Stage,
    Status,
    StrEnum,
    Symptom,
    Verdict,
)

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["BENIGN", "COMPLETED", "DEFAULT_ORACLE", "DEFAULT_REFERENCE", "DIVERGENCE_FIELDS", "DIVERGENT",
           "DIVERGENT_VERDICTS", "EXAMPLE_PROBE", "FAILED", "FAILURE_FIELDS", "GRADIENT_SYMPTOMS", "GRAD_OUTPUT",
           "INPUT", "KERNEL_OF", "KEY_COLUMNS", "LIMITS", "MISSING", "OVERFLOW_EDGES", "REFERENCE_STACK",
           "SYMPTOM_CLASS", "VENDOR_STAGES", "BugKey", "Explanation", "Kind", "ReproStatus", "Stage", "Status",
           "StrEnum", "Symptom", "Verdict", "bug_key", "bug_key_list", "bug_keys", "error_band", "kernel_op",
           "kernel_ops", "key_id", "symptom_class"]


FAILURE_FIELDS = ("stack_device", "status", "stage", "error_type", "failing_op", "template", "culprit")
DIVERGENCE_FIELDS = ("stack_device", "verdict", "symptom", "first_div_op", "output_dtype", "explanation", "culprit")


def key_id(*parts: str | None) -> str:
    """A stable short id for a key: the same key has the same id in every campaign (``gapfuzz diff``)."""
    return hashlib.sha256("\x1f".join(p or "" for p in parts).encode()).hexdigest()[:10]


@dataclass(frozen=True, eq=False)
class BugKey:
    """The bug a run shows: its kind and the parts named by FAILURE_FIELDS or DIVERGENCE_FIELDS (the run's
    own symptom among them), and ``identity``: the parts its id hashes and equality compares (a located
    node's symptom as its class, ``core.folds``); the parts themselves where it is not given."""

    kind: Kind
    parts: tuple[str, ...]
    identity: tuple[str, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        return FAILURE_FIELDS if self.kind == Kind.FAILURE else DIVERGENCE_FIELDS

    def __getitem__(self, name: str) -> str:
        return self.parts[self.names.index(name)]

    def keyed(self, name: str) -> str:
        """A part as the key's identity has it (a located node's symptom: its class)."""
        return (self.identity or self.parts)[self.names.index(name)]

    def __eq__(self, other) -> bool:
        return isinstance(other, BugKey) and (self.kind, self.identity or self.parts) == \
            (other.kind, other.identity or other.parts)

    def __hash__(self) -> int:
        return hash((self.kind, self.identity or self.parts))

    @property
    def op(self) -> str:
        """The operator the key names: a divergence's first divergent op (with its overload, or an
        ``input:``), a failure's failing op (without); ``-`` or "" when none."""
        return self["failing_op" if self.kind == Kind.FAILURE else "first_div_op"]

    @property
    def id(self) -> str:
        """The cluster id: ``c-`` or ``d-`` and the identity's hash (a key with no culprit hashes as it
        did before culprits were part of keys)."""
        parts = self.identity or self.parts
        parts = parts[:-1] if parts[-1] == MISSING else parts
        return f"{self.kind[0]}-{key_id(self.kind, *parts)}"

    def shown_by(self, other: BugKey | None, ops: list[str] = ()) -> bool:
        """Whether a run with key ``other`` on a graph holding ``ops`` shows this bug (the reducer's
        test). Every part must agree, but the first divergent op, which the candidate's run does
        not locate (tier 2 is a dozen compiles): it must still be in the graph. The symptom is the
        run's own, not its class: the candidate's outputs must show what the located node showed
        (a NaN-pattern bug stays one; the reducer starts from the graph cut at that node). A
        behaviour (an explained divergence) is shown by any divergence on its backend; an
        unexplained one by no explained divergence."""
        if other is None or other.kind != self.kind:
            return False
        if self.kind == Kind.FAILURE:
            return other.parts[:-1] == self.parts[:-1]  # a candidate's run is not bisected
        if self["explanation"] != MISSING:
            return other["stack_device"] == self["stack_device"]
        if other["explanation"] != MISSING:  # what triage explains (a precision, an option) is not this defect
            return False
        op = self["first_div_op"]
        skip = {"first_div_op", "explanation", "culprit"}
        if self["output_dtype"] == MISSING:
            skip.add("output_dtype")
        if self["verdict"] == Verdict.REFERENCE_SUSPECT:  # a candidate runs one target: no consensus to find
            skip |= {"stack_device", "verdict"}
            if other["verdict"] not in (Verdict.TARGET_DIVERGENT, Verdict.REFERENCE_SUSPECT):
                return False
        same = all(a == b for n, a, b in zip(self.names, self.parts, other.parts) if n not in skip)
        kernels = {kernel_op(str(o)) for o in ops}
        return same and (op == MISSING or op in kernels or op.startswith(INPUT))  # an input is in every graph


def bug_keys(table: pa.Table) -> pa.Table:
    """Every row's bug key, vectorised (a million records in seconds): columns ``kind`` (null for a
    run that passed), ``cluster`` (the key's id), each part of both kinds of key, ``symptom_class`` (the
    symptom as the id has it) and ``band`` (severity, not key)."""
    parts = key_columns(Columns(table))
    return _with_ids(kinds(Columns(table), parts["explanation"]), parts)


def key_columns(col: Columns) -> dict:
    """Each part of both kinds of key, by name (``FAILURE_FIELDS``, ``DIVERGENCE_FIELDS``), and ``symptom_class``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from .templates import failing_op_unique

    stack_device, suspect = place(col)
    tpl, limit = template(col)
    culprit = pc.if_else(suspect, MISSING, text(col("culprit")))  # the pass behind a compiler finding; PyTorch's: none
    named = pc.not_equal(culprit, MISSING)
    symptom, keyed = symptoms(col, tpl, outcome(col)[2], named)
    why = explanation(col)
    explained = pc.not_equal(why, MISSING)

    def unless_explained(a):  # a behaviour's key is its backend and explanation alone
        return pc.if_else(explained, MISSING, a)

    dtype = pc.if_else(pc.fill_null(col("dtype_specific", pa.bool_()), False), text(col("output_dtype")), MISSING)
    return {"stack_device": stack_device, "status": text(col("status")), "stage": text(col("stage")),
            "error_type": text(col("error_type")),
            "failing_op": pc.if_else(limit, MISSING, text(failing_op_unique(col("message")))),  # a limit's: incidental
            "template": text(tpl), "verdict": unless_explained(text(col("verdict"))),
            "symptom": unless_explained(symptom), "symptom_class": unless_explained(keyed),
            "first_div_op": unless_explained(pc.if_else(named, MISSING, kernel_ops(text(col("first_div_op"))))),
            "output_dtype": unless_explained(dtype), "explanation": why,
            "culprit": culprit, "band": error_band(col("tol_ratio", pa.float64()))}


def kinds(col: Columns, why):
    """Each run's kind of key: a failure, a benign difference, a discrepancy; null for a run that passed."""
    import pyarrow as pa
    import pyarrow.compute as pc

    failed, discrepancy, _ = outcome(col)
    benign = pc.and_(discrepancy, pc.is_in(why, value_set=pa.array([str(e) for e in BENIGN])))
    none = pa.scalar(None, pa.string())
    return pc.if_else(failed, str(Kind.FAILURE), pc.if_else(benign, str(Kind.BENIGN),
                                                          pc.if_else(discrepancy, str(Kind.DISCREPANCY), none)))


def _with_ids(kind, parts: dict):
    """The key table: ``kind``, ``cluster`` (the id of the key's identity: a divergence's symptom as its
    class; a culprit only where one is named, so ids without one stay as they were) and the parts."""
    import pyarrow as pa
    import pyarrow.compute as pc

    sep, failed = "\x1f", pc.equal(kind, str(Kind.FAILURE))
    identity = [parts["symptom_class" if f == "symptom" else f] for f in DIVERGENCE_FIELDS[:-1]]
    joined = pc.if_else(failed, pc.binary_join_element_wise(kind, *(parts[f] for f in FAILURE_FIELDS[:-1]), sep),
                        pc.binary_join_element_wise(kind, *identity, sep))
    named = pc.not_equal(parts["culprit"], MISSING)
    joined = pc.if_else(named, pc.binary_join_element_wise(joined, parts["culprit"], sep), joined)
    encoded = pc.dictionary_encode(joined)
    if isinstance(encoded, pa.ChunkedArray):
        encoded = encoded.combine_chunks()
    ids = pa.array([f"{s[0]}-{hashlib.sha256(s.encode()).hexdigest()[:10]}" if s else None
                    for s in encoded.dictionary.to_pylist()], pa.string())
    return pa.table({"kind": kind, "cluster": pc.take(ids, encoded.indices), **parts})


def bug_key_list(records: list[Mapping]) -> list[BugKey | None]:
    """The bug each run shows (None when it passed); each record maps record columns to values."""
    out = []
    for keys in bug_keys(key_table(records)).to_pylist():
        kind = None if keys["kind"] is None else Kind(keys["kind"])
        if kind is None:
            out.append(None)
            continue
        fields = FAILURE_FIELDS if kind == Kind.FAILURE else DIVERGENCE_FIELDS
        parts = tuple(keys[f] for f in fields)
        identity = tuple(keys["symptom_class" if f == "symptom" else f] for f in fields)
        out.append(BugKey(kind, parts, identity if identity != parts else ()))
    return out


def bug_key(record: Mapping) -> BugKey | None:
    """The bug one run shows (None when it passed); ``record`` maps record columns to values."""
    return bug_key_list([record])[0]

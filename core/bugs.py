"""What a bug is, defined once: the vocabulary of records and the key that says "the same bug".

Statuses, stages, verdicts, symptoms and explanations are string-valued enums, so records, Parquet
columns and JSON keep plain strings while code names each value once. ``bug_key(record)`` (one
run) and ``bug_keys(table)`` (a whole column set, vectorised) are the one definition of which runs
show the same bug; guidance counts new keys, triage makes one cluster per key, the tier-2 ledger
locates one divergence per seed and key, and the reducer keeps a candidate only while it shows
its cluster's key (``BugKey.shown_by``).

A failure's key is structure first: where it happened (``stack@device``: one converter defect seen
under two option sets is one bug), its status, stage and exception type, the graph operator its
message names; then the message template. A divergence's key is where it happened too (the
grid_sample disagreement Inductor shows with static and with dynamic shapes is one bug; the labels
it was seen under are listed), the oracle's verdict, the symptom, the operator where it starts and
the output dtype; how far off it is (the error's decade) is severity, a column, not identity. Once
the divergence is located, its symptom is the located node's (``node_symptom``: one NaN defect of
``relu`` is one bug whether the model's top-1 changed or only its NaN pattern), and the output
dtype joins the key only where the same op on the same stack passes at another dtype of the same
seed and probe (``dtype_specific``, derived by ``analysis.causes``); otherwise the cluster lists
its dtypes. When independent targets agree with each other and eager is apart
(``reference-suspect``) the key is filed against PyTorch (``REFERENCE_STACK``), not each vendor. A
divergence that eager reproduces when made to compute the way a hypothesis says the stack does
(``Explanation``: bfloat16, float16, TF32, float32, another option set, reduction order) is a
*behaviour*: its key is the stack and the explanation alone, so one precision default is one
cluster that lists its ops, seeds and dtypes. Explanations that name no defect at all (reduction
order, an ill-conditioned reference, amplified rounding) make ``benign`` clusters, kept apart.
A compiler finding whose cause was bisected to a pass (``culprit``: backend, subsystem and pass,
``workers.judge.culprit``) is keyed by that pass in place of its op: one pass that breaks two ops is one
bug, one op that two passes break is two; a key without a culprit keeps the id it always had.
An op is keyed by the kernel it runs (``KERNEL_OF``): ``linear``, ``addmm``, ``matmul`` and ``bmm`` are
``mm`` (with a bias, or batched) on every stack (eager's kernels, Inductor's lowering), and a reduction's
min and max (argmin, amin, min) are its max's, so one kernel's defect is one cluster whichever of its ops a
graph held; the cluster lists the ops it was located at. In
training, a gradient divergence located at a node whose forward value diverges too is that forward
defect: its symptom is the node's forward one (``node_symptom``, from ``workers.judge.grad_align`` on the
same run, or from the forward runs of the same seed, ``analysis.clusters.join_forward``), so its key
is the forward divergence's, and the cluster lists its modes and the gradients it was seen at.

Nothing here imports torch; pyarrow is imported by the functions that need it.
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Mapping

if TYPE_CHECKING:
    import pyarrow as pa

try:
    from enum import StrEnum
except ImportError:  # Python 3.10
    class StrEnum(str, Enum):
        def __str__(self) -> str:
            return self.value

        def __format__(self, spec: str) -> str:
            return format(self.value, spec)


class Status(StrEnum):
    """How a run (or a seed's build) ended."""

    OK = "ok"
    MISMATCH = "mismatch"  # ran, and the comparison found a divergence
    CRASH = "crash"  # the process died (signal or exit)
    ERROR = "error"  # the stack raised
    TIMEOUT = "timeout"
    OOM = "oom"
    UNSUPPORTED = "unsupported"  # the stack said it cannot do this (not implemented, no kernel)
    INVALID = "invalid"
    # Not a finding, in the seed catalog and in run records alike. Catalog: a seed over the parameter
    # cap. Runs: a seed whose build, capture or reference run raised, or that cannot be rebuilt at a
    # size or trained (``fuzzer.records``, ``fuzzer.generate``); a probe the reference refuses, on the
    # reference and on a target that fails it too (``workers.run.runner``, ``workers.judge.verdict``).
    SKIPPED = "skipped"


class Stage(StrEnum):
    """Where in the flow a run ended; the order is the flow's."""

    BUILD = "build"
    BUDGET = "budget"
    CAPTURE = "capture"
    MUTATE = "mutate"
    CONVERT = "convert"
    COMPILE = "compile"
    RUN = "run"
    COMPARE = "compare"


class Verdict(StrEnum):
    """A target's outputs against the reference, attributed with the float64 oracle."""

    AGREE = "agree"
    TARGET_DIVERGENT = "target-divergent"  # the target is much further from the oracle: its bug
    REFERENCE_DIVERGENT = "reference-divergent"  # the reference is: eager's bug
    ILL_CONDITIONED = "ill-conditioned"  # both are far: the variant, not a stack
    AMPLIFIED = "amplified"  # rounding-level inputs blown up by a discontinuous op (tier 2)
    NO_ORACLE = "no-oracle"
    ORACLE = "oracle"  # the oracle's own run
    NO_REFERENCE = "no-reference"
    REFERENCE_SUSPECT = "reference-suspect"  # independent targets agree with each other, eager is apart: PyTorch's


class Symptom(StrEnum):
    """What differs, worst first."""

    STRUCTURE = "structure"
    SHAPE = "shape"
    DTYPE = "dtype"
    NONFINITE = "nonfinite"
    INTEGER = "integer"
    VALUE = "value"
    NUMERIC = "numeric"
    TASK = "task"  # tier 3: the task-level answer differs (top-1, argmax token, detections)
    GRAD_NONFINITE = "grad-nonfinite"  # training: the forward agrees, a gradient's NaN/Inf pattern does not
    GRAD = "grad"  # training: the forward outputs agree and a gradient's values do not (workers.run.training)
    MISSING_ERROR = "missing-error"  # eager raises on the input (a check of it); the target returns without a word
    STRICT = "strict"  # within tolerance, but bits differ where they are exact by contract (NaN sign, signed zero)


GRADIENT_SYMPTOMS = (Symptom.GRAD_NONFINITE, Symptom.GRAD)
GRAD_OUTPUT = "grad:"  # a training run's gradient outputs are named grad:<parameter>, grad:input:<name>


class ReproStatus(StrEnum):
    """How a minimised reproducer did in fresh processes (``gapfuzz repro``, ``fuzzer.repro.minimise``)."""

    REPRODUCIBLE = "reproducible"  # failed in every try
    FLAKY = "flaky"  # failed in some tries only
    NOT_REPRODUCED = "not-reproduced"  # failed in none, or the representative itself did not show the bug


class Kind(StrEnum):
    """The kinds of cluster."""

    FAILURE = "crash"  # a run that raised, died, hung or ran out of memory (its clusters keep the name "crash")
    DISCREPANCY = "discrepancy"  # a run that completed with a different answer
    BENIGN = "benign"  # a difference explained without a defect (reduction order, ill-conditioning)


class Explanation(StrEnum):
    """Why a divergence happens, when a hypothesis tested on eager holds (``workers.judge.explain``)."""

    BFLOAT16 = "bfloat16"  # eager computing float32 ops in bfloat16 is as far off
    FLOAT16 = "float16"
    TF32 = "tf32"  # matmul and convolution inputs rounded to TF32's 10 mantissa bits
    FLOAT32 = "float32"  # float16 and bfloat16 ops computed in float32: the reference is the less exact
    OPTIONS = "options"  # the same stack under another option set of the campaign agrees
    REDUCTION_ORDER = "reduction-order"  # eager summing in another order differs as much
    ILL_CONDITIONED = "ill-conditioned"  # the reference is as far from float64 as the target
    AMPLIFIED = "amplified"  # rounding blown up by a discontinuous op (tier 2)
    PLATFORM = "platform"  # eager on the target's own device gives the same answer: the platform's, not the stack's


BENIGN = (Explanation.REDUCTION_ORDER, Explanation.ILL_CONDITIONED, Explanation.AMPLIFIED, Explanation.PLATFORM)


DEFAULT_REFERENCE = "eager@cpu"  # a campaign's reference and oracle when it names none
DEFAULT_ORACLE = "eager-fp64@cpu"
EXAMPLE_PROBE = "example"  # the probe that feeds a variant its capture's own inputs (workers.run.probes)
# edge probes at the overflow boundary (workers.run.probes.EDGES): any error there can cross into inf, so a
# NaN/Inf divergence on one is keyed as the numeric divergence it is (one defect, one cluster)
OVERFLOW_EDGES = ("max", "sqrt-max", "log-max")

FAILED = (Status.CRASH, Status.TIMEOUT, Status.OOM, Status.ERROR, Status.UNSUPPORTED, Status.INVALID)
COMPLETED = (Status.OK, Status.MISMATCH)
LIMITS = (Status.TIMEOUT, Status.OOM)  # the sandbox ended the run for a limit
DIVERGENT = (Verdict.TARGET_DIVERGENT, Verdict.REFERENCE_DIVERGENT, Verdict.ILL_CONDITIONED)
DIVERGENT_VERDICTS = (*DIVERGENT, Verdict.AMPLIFIED, Verdict.REFERENCE_SUSPECT)
REFERENCE_STACK = "pytorch"  # where a reference-suspect cluster is filed: the reference's own stack
VENDOR_STAGES = (Stage.CONVERT, Stage.COMPILE, Stage.RUN)

FAILURE_FIELDS = ("stack_device", "status", "stage", "error_type", "failing_op", "template", "culprit")
DIVERGENCE_FIELDS = ("stack_device", "verdict", "symptom", "first_div_op", "output_dtype", "explanation", "culprit")
KEY_COLUMNS = ("backend", "stack", "device", "status", "stage", "error_type", "message", "cause", "verdict",
               "symptom", "first_div_op", "output_dtype", "explanation", "tol_ratio", "task_agree",
               "culprit", "node_symptom", "dtype_specific", "probe")  # what a key reads
MISSING = "-"
INPUT = "input:"  # a first divergent "op" that is a graph input the stack received wrong (input:<layout>)
# graph ops that run another op's kernel on every stack (eager's kernels, Inductor's lowering): keyed by that kernel
KERNEL_OF = {**{f"aten.{op}.default": "aten.mm.default" for op in ("linear", "addmm", "matmul", "bmm")},
             "aten.argmin.default": "aten.argmax.default", "aten.amin.default": "aten.amax.default",
             "aten.min.dim": "aten.max.dim", "aten.min.default": "aten.max.default"}


def kernel_op(op: str) -> str:
    """The op a key names for a located op: the kernel it runs (``KERNEL_OF``), else itself."""
    return KERNEL_OF.get(op, op)


def key_id(*parts: str | None) -> str:
    """A stable short id for a key: the same key has the same id in every campaign (``gapfuzz diff``)."""
    return hashlib.sha256("\x1f".join(p or "" for p in parts).encode()).hexdigest()[:10]


# ---------------------------------------------------------------- the bug key
@dataclass(frozen=True)
class BugKey:
    """The bug a run shows: its kind and the parts named by FAILURE_FIELDS or DIVERGENCE_FIELDS."""

    kind: Kind
    parts: tuple[str, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return FAILURE_FIELDS if self.kind == Kind.FAILURE else DIVERGENCE_FIELDS

    def __getitem__(self, name: str) -> str:
        return self.parts[self.names.index(name)]

    @property
    def op(self) -> str:
        """The operator the key names: a divergence's first divergent op (with its overload, or an
        ``input:``), a failure's failing op (without); ``-`` or "" when none."""
        return self["failing_op" if self.kind == Kind.FAILURE else "first_div_op"]

    @property
    def id(self) -> str:
        """The cluster id: ``c-`` or ``d-`` and the key's hash (a key with no culprit hashes as it
        did before culprits were part of keys)."""
        parts = self.parts[:-1] if self.parts[-1] == MISSING else self.parts
        return f"{self.kind[0]}-{key_id(self.kind, *parts)}"

    def shown_by(self, other: BugKey | None, ops: list[str] = ()) -> bool:
        """Whether a run with key ``other`` on a graph holding ``ops`` shows this bug (the reducer's
        test). Every part must agree, but the first divergent op, which the candidate's run does
        not locate (tier 2 is a dozen compiles): it must still be in the graph. The symptom the
        located node showed must be the candidate's outputs' (a NaN-pattern bug stays one; the
        reducer starts from the graph cut at that node). A behaviour (an explained divergence) is
        shown by any divergence on its backend; an unexplained one by no explained divergence."""
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


def kernel_ops(ops):
    """``kernel_op`` of every op of a string array."""
    import pyarrow.compute as pc

    for op, kernel in KERNEL_OF.items():
        ops = pc.if_else(pc.equal(ops, op), kernel, ops)
    return ops


def bug_keys(table: pa.Table) -> pa.Table:
    """Every row's bug key, vectorised (a million records in seconds): columns ``kind`` (null for a
    run that passed), ``cluster`` (the key's id) and each part of both kinds of key."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from .templates import failing_op_unique, template_unique

    n = table.num_rows

    def col(name, kind=pa.string()):
        return pc.cast(table[name], kind) if name in table.column_names else pa.nulls(n, kind)

    def text(a):
        a = pc.cast(a, pa.string())
        return pc.if_else(pc.or_kleene(pc.is_null(a), pc.equal(a, "")), MISSING, a)

    def among(a, values):
        return pc.is_in(a, value_set=pa.array([str(v) for v in values]))

    status, cause, verdict = col("status"), col("cause"), col("verdict")
    stack = text(col("stack"))
    stack_device = pc.if_else(pc.not_equal(stack, MISSING),
                              pc.binary_join_element_wise(stack, text(col("device")), "@"), text(col("backend")))
    suspect = pc.fill_null(pc.equal(verdict, str(Verdict.REFERENCE_SUSPECT)), False)
    stack_device = pc.if_else(suspect, REFERENCE_STACK, stack_device)  # one cluster for PyTorch, not one per vendor
    tpl = template_unique(col("message"))
    limit = pc.and_(among(status, LIMITS), pc.fill_null(pc.starts_with(cause, "limit:"), False))
    limit = pc.or_(limit, pc.and_(pc.equal(tpl, ""), pc.is_valid(cause)))  # died silently: its signal or exit
    tpl = pc.if_else(limit, template_unique(cause), tpl)  # a limit's printed tail is incidental
    failed = among(status, FAILED)
    task = pc.fill_null(pc.less(col("task_agree", pa.float64()), 1.0), False)
    diverged = pc.or_(pc.or_(pc.fill_null(pc.equal(status, str(Status.MISMATCH)), False),
                             among(verdict, DIVERGENT_VERDICTS)), task)
    discrepancy = pc.and_(among(status, COMPLETED), diverged)
    located = pc.not_equal(text(col("first_div_op")), MISSING)
    own = text(col("symptom"))  # the model output's: severity, not identity, once the node is known
    at_node = pc.if_else(located, text(col("node_symptom")), MISSING)  # a gradient's: its node's forward, if wrong
    symptom = pc.if_else(pc.not_equal(at_node, MISSING), at_node,
                         pc.if_else(pc.and_(pc.equal(own, MISSING), task), str(Symptom.TASK), own))
    at_overflow = pc.fill_null(among(col("probe"), [f"edge:{e}" for e in OVERFLOW_EDGES]), False)
    symptom = pc.if_else(pc.and_(at_overflow, pc.equal(symptom, str(Symptom.NONFINITE))), str(Symptom.NUMERIC), symptom)
    missing_check = pc.equal(symptom, str(Symptom.MISSING_ERROR))  # which check: the reference's message
    symptom = pc.if_else(missing_check, pc.binary_join_element_wise(symptom, text(tpl), ": "), symptom)
    dtype = pc.if_else(pc.fill_null(col("dtype_specific", pa.bool_()), False), text(col("output_dtype")), MISSING)
    verdict_explains = among(verdict, (Verdict.ILL_CONDITIONED, Verdict.AMPLIFIED))
    explanation = text(pc.coalesce(col("explanation"),
                                   pc.if_else(verdict_explains, verdict, pa.scalar(None, pa.string()))))
    explained = pc.not_equal(explanation, MISSING)

    def unless_explained(a):  # a behaviour's key is its backend and explanation alone
        return pc.if_else(explained, MISSING, a)

    culprit = pc.if_else(suspect, MISSING, text(col("culprit")))  # the pass behind a compiler finding; PyTorch's: none
    named = pc.not_equal(culprit, MISSING)

    parts = {"stack_device": stack_device, "status": text(status), "stage": text(col("stage")),
             "error_type": text(col("error_type")),
             # a limit's tail: incidental
             "failing_op": pc.if_else(limit, MISSING, text(failing_op_unique(col("message")))),
             "template": text(tpl), "verdict": unless_explained(text(verdict)),
             "symptom": unless_explained(pc.if_else(pc.equal(symptom, MISSING), str(Symptom.NUMERIC), symptom)),
             "first_div_op": unless_explained(pc.if_else(named, MISSING, kernel_ops(text(col("first_div_op"))))),
             "output_dtype": unless_explained(dtype), "explanation": explanation,
             "culprit": culprit, "band": error_band(col("tol_ratio", pa.float64()))}
    benign = pc.and_(discrepancy, among(explanation, BENIGN))
    none = pa.scalar(None, pa.string())
    kind = pc.if_else(failed, str(Kind.FAILURE), pc.if_else(benign, str(Kind.BENIGN),
                                                          pc.if_else(discrepancy, str(Kind.DISCREPANCY), none)))
    sep = "\x1f"
    joined = pc.if_else(failed, pc.binary_join_element_wise(kind, *(parts[f] for f in FAILURE_FIELDS[:-1]), sep),
                        pc.binary_join_element_wise(kind, *(parts[f] for f in DIVERGENCE_FIELDS[:-1]), sep))
    joined = pc.if_else(named, pc.binary_join_element_wise(joined, culprit, sep), joined)  # ids without one: as before
    encoded = pc.dictionary_encode(joined)
    if isinstance(encoded, pa.ChunkedArray):
        encoded = encoded.combine_chunks()
    ids = pa.array([f"{s[0]}-{hashlib.sha256(s.encode()).hexdigest()[:10]}" if s else None
                    for s in encoded.dictionary.to_pylist()], pa.string())
    return pa.table({"kind": kind, "cluster": pc.take(ids, encoded.indices), **parts})  # band: severity, not key


_KEY_SCHEMA = None


def _key_schema():
    global _KEY_SCHEMA
    if _KEY_SCHEMA is None:
        import pyarrow as pa

        types = {"tol_ratio": pa.float64(), "task_agree": pa.float64(), "dtype_specific": pa.bool_()}
        _KEY_SCHEMA = pa.schema([(c, types.get(c, pa.string())) for c in KEY_COLUMNS])
    return _KEY_SCHEMA


def _present(v):
    """None for a missing value, whichever kind of missing (None, NaN, pandas NA) a caller holds."""
    if v is None or (isinstance(v, float) and math.isnan(v)) or type(v).__name__ in ("NAType", "NaTType"):
        return None
    return v


def bug_key_list(records: list[Mapping]) -> list[BugKey | None]:
    """The bug each run shows (None when it passed); each record maps record columns to values."""
    import pyarrow as pa

    rows = []
    for record in records:
        row = {c: _present(record.get(c)) for c in KEY_COLUMNS}
        for c in KEY_COLUMNS:
            if row[c] is not None:
                row[c] = float(row[c]) if c in ("tol_ratio", "task_agree") else \
                    bool(row[c]) if c == "dtype_specific" else str(row[c])
        rows.append(row)
    out = []
    for keys in bug_keys(pa.Table.from_pylist(rows, schema=_key_schema())).to_pylist():
        kind = None if keys["kind"] is None else Kind(keys["kind"])
        out.append(None if kind is None else BugKey(kind, tuple(
            keys[f] for f in (FAILURE_FIELDS if kind == Kind.FAILURE else DIVERGENCE_FIELDS))))
    return out


def bug_key(record: Mapping) -> BugKey | None:
    """The bug one run shows (None when it passed); ``record`` maps record columns to values."""
    return bug_key_list([record])[0]

"""The run record: one row per (variant, backend, probe); its fields are the Parquet columns.

A worker fills in what ran and how it ended, the judge its comparison columns, the driver the
variant's. A field annotated with a ``results.columns`` codec is a nested column (a struct or list):
it holds a value or the JSON text gapfuzz's code builds, and is written as Parquet data, not text.
Documented column by column in docs/results.md.
Bump SCHEMA_VERSION when a column changes meaning or type; readers check it.
"""
from __future__ import annotations

import dataclasses
import datetime as dt
import typing
from dataclasses import dataclass, field
from typing import Annotated

import pyarrow as pa

from gapfuzz.core.bugs import KEY_COLUMNS, Status
from gapfuzz.core.text import MAX_FIELD_CHARS, capped

from .columns import NESTED, DivGrowthColumn, KeyValues, ProbeRecipeColumn, RecipeColumn

# 7: recipe, probe_recipe, div_growth, backend_options, versions, backend_info as structs and lists, not JSON text
# 6: the located node's symptom and dtype, reference-suspect; 5: compiler attribution and pass coverage;
# 4: mode and gradient columns; 3: explanation columns; 2: one row per (variant, backend, probe); 1: the example only
SCHEMA_VERSION = 7
READABLE_VERSIONS = (1, 2, 3, 4, 5, 6, 7)


@dataclass
class RunRecord:
    # what ran
    campaign: str
    variant_id: str
    seed_id: str
    backend: str
    probe: str | None = None  # which input set (workers.run.probes.Probe.name); None: the example, in version 1
    probe_recipe: Annotated[str | None, ProbeRecipeColumn] = None  # replays it: {"kind", ..., "seed"} (JSON text)
    mode: str | None = None  # inference, or training (forward, loss and backward); None before version 4
    seed_source: str = ""
    family: str = ""
    task: str = ""
    output_kind: str = ""
    recipe: Annotated[str, RecipeColumn] = "{}"  # {"seed", "mutations": [[name, params]], "rng"} (JSON text)
    mutations: list[str] = field(default_factory=list)
    semantics_preserving: bool | None = None
    graph_hash: str | None = None
    node_count: int | None = None
    ops: list[str] = field(default_factory=list)
    params: int | None = None
    stack: str = ""
    device: str = ""
    backend_options: Annotated[dict, KeyValues] = field(default_factory=dict)
    backend_version: str = ""
    torch_version: str = ""
    versions: Annotated[dict, KeyValues] = field(default_factory=dict)  # torch, python, os of the worker
    # how it ended
    status: str = Status.OK  # core.bugs.Status: ok mismatch crash error timeout oom unsupported invalid skipped
    stage: str | None = None  # core.bugs.Stage: build budget capture mutate convert compile run compare
    error_type: str | None = None
    message: str | None = None
    signature: str | None = None  # message with numbers, shapes, names and paths masked
    cause: str | None = None  # signal:SIGSEGV, limit:timeout 60s, limit:memory 4.0GiB
    reproducible: bool | None = None
    # tier 1 and attribution
    verdict: str | None = None  # core.bugs.Verdict: agree target-divergent reference-divergent ill-conditioned
    # amplified no-oracle oracle no-reference reference-suspect
    judged_against: str | None = None  # the backend the verdict compares with: the reference, or eager on the
    # target's own device (``backends.device_reference``)
    symptom: str | None = None  # core.bugs.Symptom: structure shape dtype nonfinite integer value numeric task grad*
    mismatched_outputs: int | None = None
    worst_output: str | None = None
    output_dtype: str | None = None
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    max_ulp: float | None = None
    tol_needed: float | None = None  # passes tolerance t (|a-b| <= t + t|b|) exactly when tol_needed <= t
    tol_ratio: float | None = None  # max |a-b| / (atol + rtol|b|) at the dtype's default tolerance
    nonfinite_mismatch: int | None = None
    signed_zero_mismatch: int | None = None
    err_vs_oracle: float | None = None
    ref_err_vs_oracle: float | None = None
    consensus: str | None = None  # reference-suspect: the stacks that agree with each other, eager apart
    numpy_agrees: bool | None = None  # and whether numpy gives their answer (a one-operator graph numpy has)
    # tier 2 and 3
    first_div_node: str | None = None
    first_div_op: str | None = None  # an ATen op, or input:<layout> when the stack received an input wrong
    node_symptom: str | None = None  # what differs at the first divergent node: the divergence's identity
    node_dtype: str | None = None  # that node's dtype
    div_growth: Annotated[str | None, DivGrowthColumn] = None  # [[node, op, tol_ratio]] on the divergent path
    amplified: bool | None = None
    amplifier_node: str | None = None
    align_prepares: int | None = None  # backend prepares (compiles) tier 2 spent on this run
    align_error: str | None = None  # why tier 2 could not locate the divergence
    align_s: float | None = None  # seconds tier 2 took (its prepares and node-by-node runs)
    grad_ops: list[str] = field(default_factory=list)  # training: the backward operators of the located node
    culprit: str | None = None  # core.ids.CulpritName of a compiler finding (workers.judge.culprit); in its key
    # the first torch.compile backend that shows it (or the stack, for a differential)
    culprit_backend: str | None = None
    culprit_subsystem: str | None = None  # e.g. post_grad_passes, lowerings, decomposition; a stack's optimisation step
    culprit_step: int | None = None  # the subsystem application after which it appears
    culprit_info: str | None = None  # that application's debug info: the pass, decomposition or node
    culprit_layer: str | None = None  # optimiser, kernel, conversion or kernel-or-conversion: whose team it goes to
    bisect_s: float | None = None  # seconds the attribution took on this run (null: inherited or not attributed)
    bisect_compiles: int | None = None  # fresh compiles the bisection made
    bisect_error: str | None = None  # why no culprit was had, or where it was inherited from
    explanation: str | None = None  # core.bugs.Explanation: the hypothesis eager shows it with (workers.judge.explain)
    explain_ratio: float | None = None  # the target's error over eager's under that hypothesis
    # a torch.compile divergence under PyTorch's own rule (torch._dynamo.utils.same against float64, default tol):
    # False it fails that too, True it passes (explained within-torch-same); null: not checked
    torch_same: bool | None = None
    task_metric: str | None = None
    task_agree: float | None = None
    top5_agree: float | None = None
    metamorphic_err: float | None = None
    # cost and provenance
    capture_s: float | None = None  # the seed's build-free capture time (torch.export and lowering)
    gen_s: float | None = None  # mutating and validating this variant on the reference
    prepare_s: float | None = None
    first_run_s: float | None = None
    latency_ms: float | None = None
    run_s: float | None = None
    runs: int | None = None
    nondeterministic: bool | None = None
    inputs_mutated: bool | None = None
    input_checksum: str | None = None
    weight_checksum: str | None = None
    backend_info: Annotated[dict, KeyValues] = field(default_factory=dict)  # what the stack reported (e.g. precision)
    compiler: str | None = None  # inductor or aot_autograd through torch.compile, inductor-aot without it
    compiler_passes: list[str] = field(default_factory=list)  # the Inductor passes that ran: pass coverage
    compiler_patterns: list[str] = field(default_factory=list)  # its pattern-matcher patterns that fired
    symbolic: bool | None = None  # a graph Dynamo compiled in the run had symbolic sizes; null: no Dynamo compile
    tf32: bool | None = None  # the platform's TF32 for matrix products and convolutions was on (workers.run.platform)
    host: str = ""
    worker: str = ""
    worker_s: float | None = None
    time: dt.datetime | None = None
    schema_version: int = SCHEMA_VERSION

    def to_row(self) -> dict:
        """The record as a Parquet row: its fields, not copied (``dataclasses.asdict`` deep-copies every list,
        a third of a campaign driver's time), a nested column as its struct or list."""
        row = self.__dict__.copy()
        for name, codec in NESTED.items():
            row[name] = codec.encode(row[name])
        for name in TEXT_COLUMNS:  # a 20 MB message is cut here, the one place every record is written
            text = row[name]
            if text is not None and len(text) > MAX_FIELD_CHARS:
                row[name] = capped(text)
        return row

    @classmethod
    def from_row(cls, row: dict) -> RunRecord:
        """A Parquet row as a record (the inverse of ``to_row``), of any schema version: a nested column as
        the record holds it (a mapping, or JSON text)."""
        fields = {k: row[k] for k in COLUMNS if k in row}
        for name, codec in NESTED.items():
            if name in fields:
                fields[name] = codec.decode(fields[name]) if _HINTS[name].__origin__ is dict \
                    else codec.text(fields[name])
        return cls(**fields)

    def key_fields(self) -> dict:
        """The columns a bug key reads (``core.bugs.bug_key``)."""
        return {k: getattr(self, k, None) for k in KEY_COLUMNS}

    def update(self, **columns) -> None:
        """Set columns by name; a name that is not a column is a bug, not a value to drop."""
        for k, v in columns.items():
            if k not in _COLUMN_SET:
                raise AttributeError(f"RunRecord has no column {k!r}")
            setattr(self, k, v)


_ARROW = {str: pa.string(), int: pa.int64(), float: pa.float64(), bool: pa.bool_(),
          dt.datetime: pa.timestamp("us", tz="UTC"), list[str]: pa.list_(pa.string())}


def _arrow_type(hint) -> pa.DataType:
    nested = [m for m in getattr(hint, "__metadata__", ()) if hasattr(m, "arrow")]
    if nested:  # Annotated[..., codec]: the codec's struct or list
        return nested[0].arrow
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    base = args[0] if typing.get_origin(hint) in (typing.Union, getattr(__import__("types"), "UnionType", None)) \
        and len(args) == 1 else hint
    return _ARROW[base]


def arrow_schema_of(cls, version: int = SCHEMA_VERSION) -> pa.Schema:
    """The Parquet schema of a record dataclass: one column per field, types from the hints."""
    hints = typing.get_type_hints(cls, include_extras=True)
    return pa.schema([pa.field(f.name, _arrow_type(hints[f.name])) for f in dataclasses.fields(cls)],
                     metadata={"gapfuzz_schema_version": str(version)})


def arrow_schema() -> pa.Schema:
    return arrow_schema_of(RunRecord)


COLUMNS = [f.name for f in dataclasses.fields(RunRecord)]
_COLUMN_SET = frozenset(COLUMNS)
_HINTS = typing.get_type_hints(RunRecord, include_extras=True)  # once: resolving them per field cost a third of a
# second at import
# the plain text columns (messages, error text, names): each cut to core.text.MAX_FIELD_CHARS when written
TEXT_COLUMNS = tuple(n for n in COLUMNS if n not in NESTED and _arrow_type(_HINTS[n]) == pa.string())


def legacy_schema() -> pa.Schema:
    """The schema of a record file before version 7: the nested columns as JSON text."""
    schema = arrow_schema()
    for name in NESTED:
        schema = schema.set(schema.get_field_index(name), pa.field(name, pa.string()))
    return schema

"""The vocabulary of run records: what a run's status, stage, verdict, symptom and explanation may be.

String-valued enums, so records, Parquet columns and JSON keep plain strings while code names each
value once, and the groups of them that the judge, triage and the reports test against. What makes two
runs the same bug is ``core.bugs``; this is only the words it is written in. Nothing here imports torch.
"""
from __future__ import annotations

from enum import Enum

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

MISSING = "-"  # a key part or column a run does not have
INPUT = "input:"  # a first divergent "op" that is a graph input the stack received wrong (input:<layout>)

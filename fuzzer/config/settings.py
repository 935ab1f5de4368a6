"""The campaign file defined once: each key a ``core.setting`` field (its type, default and schema
constraints), each section a settings class. ``fuzzer.config.schema`` derives the JSON Schema and the
defaults from ``CampaignFile``; ``fuzzer.config.campaign`` builds the sections from a filled-in file and resolves
the names (mutators, backends). The keys the workers read are defined in ``workers.run.messages`` (``JudgeRun``,
``JudgeCompare``), which ``RunSettings`` and ``CompareSettings`` extend.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property

from gapfuzz.core.bugs import DEFAULT_ORACLE, DEFAULT_REFERENCE, StrEnum
from gapfuzz.core.modes import DEFAULT_MODE, MODE_NAMES
from gapfuzz.core.setting import (
    MAX_COUNT,
    MAX_MEMORY_GB,
    MAX_PARAMS,
    MAX_PER_SEED,
    MAX_SECONDS,
    MAX_SEED,
    MAX_WORKERS,
    schema_of,
    setting,
)
from gapfuzz.core.tolerances import Tolerances
from gapfuzz.seeds.sizes import DIMENSION_SIZES, WIDTHS
from gapfuzz.workers.run.messages import JudgeCompare, JudgeRun
from gapfuzz.workers.run.probes import DEFAULT_KINDS, ProbeSettings
from gapfuzz.workers.run.registry import BackendSpec
from gapfuzz.workers.run.releases import IMAGE_PATTERN, IMAGE_RULE

# Names that become folder names (the campaign's, a backend label's): no hidden or path-like ones, no
# trailing newline (``\Z``, not ``$``), and short enough for every file system's file names.
NAME_MAX = 100
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,%d}\Z" % (NAME_MAX - 1)
NAME_RULE = f"letters, digits and . _ + -, not starting with . _ + -, at most {NAME_MAX} characters"
POOL_DEVICES = ("cpu", "cuda", "mps", "xpu", "npu")
MAX_TOLERANCE = 1e30  # a tolerance, a multiplier or a distance in units of tolerance

# Schema pieces several keys share. Enums and defaults hold plain values: the resolved campaign is written as YAML.
_STR_LIST = {"type": "array", "items": {"type": "string"}}
_GLOBS = {"oneOf": [{"type": "string"}, _STR_LIST]}
_POS_INT = {"minimum": 1, "maximum": MAX_PER_SEED}  # constraints of an int setting
_NONNEG_NUM = {"type": "number", "minimum": 0, "maximum": MAX_TOLERANCE}
_MODE_NAMES = list(MODE_NAMES)
MAX_RELEASES = 16  # releases of one stack in a campaign: each is an environment and a pool
_RELEASE = {"type": "string", "pattern": r"^[0-9][0-9A-Za-z.+!_-]{0,39}\Z"}  # as a package index spells one
_ATEN_OP = "^aten\\.[A-Za-z0-9_.]+$"
# what a value each pattern refuses is not, and what to give instead: the one line of a refusal
PATTERN_RULES = {
    NAME_PATTERN: ("cannot name a folder", f"give {NAME_RULE}"),
    _RELEASE["pattern"]: ("is not a release as a package index spells one",
                          "give a version: a digit first, then letters, digits and . + ! _ -, at most 40 characters "
                          "(e.g. 1.31.1)"),
    IMAGE_PATTERN: ("is not a container image reference", f"give {IMAGE_RULE}"),
    _ATEN_OP: ("is not an ATen operator", "give aten.<name>.<overload>, e.g. aten.sum.dim_IntList"),
}
_MODES = {"oneOf": [{"enum": _MODE_NAMES},
                    {"type": "array", "minItems": 1, "uniqueItems": True, "items": {"enum": _MODE_NAMES}}]}
_BACKEND = {"oneOf": [
    {"type": "string"},
    {"type": "object", "additionalProperties": False,
     "properties": {"backend": {"type": "string"}, "class": {"type": "string"}, "device": {"type": "string"},
                    "label": {"type": "string", "pattern": NAME_PATTERN}, "options": {"type": "object"},
                    "timeout_s": {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_SECONDS}, "mode": _MODES,
                    "option_space": {"type": "object", "additionalProperties": {"type": "array", "minItems": 1}},
                    # pairs, all, draw or {all: [options]}: names checked in fuzzer.config.campaign (did you mean)
                    "option_cover": {"type": ["string", "object"]},
                    # releases, each a backend of its own in an environment made for it (workers.run.releases)
                    "versions": {"type": "array", "minItems": 1, "maxItems": MAX_RELEASES, "uniqueItems": True,
                                 "items": _RELEASE},
                    "torch": _RELEASE,
                    "images": {"type": "object", "additionalProperties": {"type": "string", "maxLength": 500,
                                                                          "pattern": IMAGE_PATTERN}}}},
]}


class CampaignError(ValueError):
    """A campaign file that cannot be run; the message is one line."""


class GuidanceMode(StrEnum):
    """How the next mutator is drawn (``fuzzer.guidance``): ``variants.guidance`` of a campaign."""

    UNIFORM = "uniform"
    MCMC = "mcmc"  # LEMON's MCMC over mutator scores
    COVERAGE = "coverage"  # draws weighted by hit rate, and named choices towards the least used


class AlignScope(StrEnum):
    """How often tier 2 locates a divergence (``workers.judge.align``): ``compare.align_scope`` of a campaign."""

    SEED = "seed"  # once per seed and case
    RUN = "run"  # every run


@dataclass(frozen=True)
class SeedSelection:
    source: str = setting(required=True)
    include: list[str] = setting([], schema=_GLOBS)
    exclude: list[str] = setting([], schema=_GLOBS)
    limit: int | None = setting(None, minimum=0, maximum=MAX_COUNT)
    sample: int | None = setting(None, minimum=0, maximum=MAX_COUNT)
    catalog: str | None = setting(None, "a seed-scan folder: only the seeds that built, captured and ran there")


@dataclass(frozen=True)
class CaptureSettings:
    max_params: int | None = setting(100_000_000, minimum=1, maximum=MAX_PARAMS)
    timeout_s: float = setting(600, exclusiveMinimum=0, maximum=MAX_SECONDS)
    cache: bool = setting(True)


@dataclass(frozen=True)
class VariantSettings:
    per_seed: int = setting(3, **_POS_INT)
    include_seed: bool = setting(True)
    mutations: int = setting(1, minimum=0, maximum=MAX_PER_SEED)
    mutators: list[str] = setting(["*"], "globs; resolved names, in order, once resolved", schema=_GLOBS)
    exclude_mutators: list[str] = setting([], schema=_GLOBS)
    guidance: GuidanceMode = setting(GuidanceMode.UNIFORM.value)
    max_tries: int = setting(8, **_POS_INT)

    def __post_init__(self):
        object.__setattr__(self, "guidance", GuidanceMode(self.guidance))  # the campaign file's string


@dataclass(frozen=True)
class ProbesSection:
    per_variant: int = setting(8, "the example and the value kinds; relations and layouts come beside them",
                               **_POS_INT)
    kinds: list[str] = setting(list(DEFAULT_KINDS), schema=_GLOBS)

    def settings(self, campaign_seed: int) -> ProbeSettings:
        return ProbeSettings(self.per_variant, tuple(self.kinds), campaign_seed)


@dataclass(frozen=True)
class SizeSettings:
    """The size and width axes (``seeds.sizes``): ``per_seed`` rebuilt sizes of each seed that can be
    rebuilt, drawn from ``values`` (lengths along a dimension, for operator seeds), and ``widths``
    rebuilt widths drawn from ``width_values``, ``variants`` each."""

    per_seed: int = setting(3, minimum=0, maximum=100)
    variants: int = setting(1, **_POS_INT)
    values: tuple[int, ...] = setting(list(DIMENSION_SIZES), schema={
        "type": "array", "minItems": 1, "items": {"type": "integer", "minimum": 0, "maximum": 2**31 - 1}})
    widths: int = setting(1, minimum=0, maximum=100)
    width_values: tuple[int, ...] = setting(list(WIDTHS), schema={
        "type": "array", "minItems": 1, "items": {"type": "integer", "minimum": 1, "maximum": 2**31 - 1}})

    def __post_init__(self):  # sorted, without repeats
        for name in ("values", "width_values"):
            object.__setattr__(self, name, tuple(sorted(set(getattr(self, name)))))


@dataclass(frozen=True)
class BackendsSection:
    """The ``backends:`` entries as written; ``fuzzer.config.campaign`` resolves them into a ``BackendSet``."""

    reference: str | dict = setting(DEFAULT_REFERENCE, schema=_BACKEND)
    oracle: str | dict | None = setting(DEFAULT_ORACLE, schema={"oneOf": [_BACKEND, {"type": "null"}]})
    targets: list = setting([], schema={"type": "array", "items": _BACKEND}, required=True)
    skip_unavailable: bool = setting(False)
    device_reference: bool = setting(True, "judge a target on another device against the reference there")


# a pool's ``env`` reaches every sandbox process, so any variable but these (thread counts, each a whole number)
# could make one load code (PYTHONPATH, PYTHONSTARTUP, LD_PRELOAD, an Inductor cache dir of compiled code, ...):
# those are set only when the command line says --allow-exec-options
SAFE_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "TORCHINDUCTOR_COMPILE_THREADS")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}\Z")


def pool_env_problem(env: dict, allow_exec: bool) -> str | None:
    """What is wrong with a pool's ``env`` (``.KEY: why``, after ``pools.<device>.env``), None when nothing is;
    ``allow_exec``: the command line's ``--allow-exec-options``."""
    for key, value in env.items():
        if not isinstance(key, str) or not _ENV_NAME.match(key):
            return f": {str(key)[:60]!r} is not a variable name (letters, digits and _, not starting with a digit)"
        if "\0" in value:
            return f".{key}: its value holds a NUL character"
        if allow_exec:
            continue
        if key not in SAFE_ENV:
            return (f".{key}: a pool's env reaches every sandbox process and can make it load code; gapfuzz sets "
                    f"{key} only with --allow-exec-options (without it: {', '.join(SAFE_ENV)}, as whole numbers)")
        if not re.fullmatch(r"[0-9]{1,4}", value) or not 1 <= int(value) <= MAX_WORKERS:
            return f".{key}: {value[:60]!r} is not a number of threads (a whole number, 1 to {MAX_WORKERS})"
    return None


@dataclass(frozen=True)
class PoolSection:
    """One device's pool as written (``workers.run.pool.PoolSettings`` adds the device)."""

    workers: int | str = setting(1, schema={"oneOf": [{"type": "integer", "minimum": 1, "maximum": MAX_WORKERS},
                                                      {"const": "auto"}]})
    cpus_per_worker: float = setting(1, minimum=0, maximum=MAX_WORKERS)
    threads: int = setting(1, minimum=1, maximum=MAX_WORKERS)
    gpus_per_worker: float = setting(1, exclusiveMinimum=0, maximum=1)
    memory_gb: float | None = setting(None, exclusiveMinimum=0, maximum=MAX_MEMORY_GB)
    accelerator_type: str | None = setting(None, "Ray's accelerator type its nodes must have (A100, "
                                                 "Intel-GPU-Max-1100; xpu's default: Intel-GPU-Max-1550)",
                                           pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
    env: dict = setting({}, "variables of its sandbox processes: thread counts; any other only with "
                            "--allow-exec-options", schema={"type": "object",
                                                            "additionalProperties": {"type": "string"}})


@dataclass(frozen=True)
class BackendSet:
    reference: BackendSpec
    oracle: BackendSpec | None
    targets: list[BackendSpec]
    skip_unavailable: bool
    # device -> the reference's stack on it: what a target on that device is judged against (the reference
    # itself judges that one: the platform's comparison); added to the targets where the campaign names none
    device_references: dict = field(default_factory=dict)

    def all(self) -> list[BackendSpec]:
        """Reference first, then the oracle, then the targets; duplicates dropped."""
        out, seen = [], set()
        for spec in [self.reference, self.oracle, *self.targets]:
            if spec is not None and spec.name not in seen:
                seen.add(spec.name)
                out.append(spec)
        return out


@dataclass(frozen=True, kw_only=True)
class RunSettings(JudgeRun):
    flush_every: int = setting(1000, "records per file written", minimum=1, maximum=MAX_COUNT)
    budget_s: float | None = setting(None, "wall seconds after which no new pair starts; --resume goes on",
                                     exclusiveMinimum=0, maximum=MAX_SECONDS)


@dataclass(frozen=True, kw_only=True)
class CompareSettings(JudgeCompare):
    tolerances: dict = setting({}, "dtype -> [rtol, atol] over the built-in ones", schema={
        "type": "object", "additionalProperties": {"type": "array", "items": _NONNEG_NUM, "minItems": 2,
                                                   "maxItems": 2}})
    sweep: list[float] = setting([1e-6, 1e-5, 1e-4, 1e-3, 1e-2], schema={"type": "array", "items": _NONNEG_NUM})
    multiplier: float = setting(3.0, exclusiveMinimum=0, maximum=MAX_TOLERANCE)
    far: float = setting(1000.0, exclusiveMinimum=0, maximum=MAX_TOLERANCE)
    dtype_bound_ops: list[str] = setting([], schema={
        "type": "array", "items": {"type": "string", "pattern": _ATEN_OP}, "maxItems": 1000})
    align_scope: AlignScope = setting(AlignScope.SEED.value)

    def __post_init__(self):
        object.__setattr__(self, "align_scope", AlignScope(self.align_scope))  # the campaign file's string

    @cached_property
    def settings(self) -> Tolerances:
        """Tolerances, multiplier, far and the dtype-bound ops: what every verdict is judged with."""
        return Tolerances.from_dict({"tolerances": self.tolerances, "multiplier": self.multiplier, "far": self.far,
                                     "dtype_bound_ops": self.dtype_bound_ops})


@dataclass(frozen=True)
class RaySection:
    address: str | None = setting(None, "the Ray cluster to join; none: an embedded one")
    num_cpus: int | None = setting(None, minimum=1, maximum=1 << 20)


@dataclass(frozen=True)
class CampaignFile:
    """A campaign file, every key of it; ``fuzzer.config.campaign.Campaign`` is it resolved."""

    name: str = setting("campaign", "the run folder's name (default: the file's)", pattern=NAME_PATTERN)
    description: str = setting("")
    seed: int = setting(0, "the seed of every random choice", minimum=0, maximum=MAX_SEED)
    mode: list = setting(DEFAULT_MODE, "the modes the targets run in", schema=_MODES)
    train_layers: bool = setting(False, "training variants: dropout and batch norm as in training")
    output: str = setting("runs", "the folder the run folder goes in")
    seeds: list[SeedSelection] = setting(minItems=1)
    capture: CaptureSettings
    variants: VariantSettings
    probes: ProbesSection
    sizes: SizeSettings
    backends: BackendsSection
    pools: dict = setting({}, "device -> its pool", schema={
        "type": "object", "additionalProperties": False, "properties": {d: schema_of(PoolSection)
                                                                        for d in POOL_DEVICES}})
    run: RunSettings
    compare: CompareSettings
    ray: RaySection

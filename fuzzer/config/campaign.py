"""Campaign files: load, validate before any work starts, fill defaults, resolve names.

Every problem is one line naming the file and the key or value, e.g.
``campaigns/x.yaml: unknown key 'sedes' at the top level (did you mean 'seeds'?)``.
"""
from __future__ import annotations

import copy
import fnmatch
import json
import math
import os
import re
from dataclasses import asdict, dataclass, fields, replace
from importlib import resources
from pathlib import Path

import jsonschema
import yaml

from gapfuzz.core.modes import Mode
from gapfuzz.core.registry import did_you_mean
from gapfuzz.core.setting import build
from gapfuzz.core.strict_yaml import CAMPAIGN_MAX_BYTES, MAX_BYTES, YamlError, key_problem, load, non_finite, read_file
from gapfuzz.core.tolerances import DEFAULT_TOLERANCES
from gapfuzz.fuzzer.config.backends import (
    EXEC_OPTIONS,
    as_list,
    backend_spec,
    check_backends,
    check_training,
    device_references,
    with_releases,
)
from gapfuzz.fuzzer.config.schema import DEFAULTS, NAME_PATTERN, NAME_RULE, POOL_DEFAULTS, SCHEMA, SELECTION_DEFAULTS
from gapfuzz.fuzzer.config.settings import (
    PATTERN_RULES,
    BackendSet,
    CampaignError,
    CampaignFile,
    VariantSettings,
    pool_env_problem,
)
from gapfuzz.results.folder import ResultsError
from gapfuzz.results.manifest import RunManifest
from gapfuzz.workers.run.messages import JudgeCompare, JudgeRun, JudgeSettings
from gapfuzz.workers.run.pool import PoolSettings
from gapfuzz.workers.run.probes import COUNTED, KINDS, ProbeSettings
from gapfuzz.workers.run.registry import BackendSpec
from gapfuzz.workers.run.releases import Release


def _is_integer(checker, instance) -> bool:
    """An int, and not a float that happens to be whole: JSON Schema calls ``2.0`` an integer, and a
    count written ``2.0`` would reach ``range()`` and Ray as a float."""
    return isinstance(instance, int) and not isinstance(instance, bool)


_Validator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine("integer", _is_integer))


def _types(schema) -> set:
    t = schema.get("type") if isinstance(schema, dict) else None
    return {t} if isinstance(t, str) else set(t or [])


def _short(value, n: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= n else f"{text[:n]}... ({len(value) if isinstance(value, str) else '?'} characters)"


def default_campaign_path() -> Path:
    return Path(str(resources.files("gapfuzz.fuzzer") / "campaigns" / "default.yaml"))


def _where(path) -> str:
    parts = [f"[{p}]" if isinstance(p, int) else f".{p}" for p in path]
    return "".join(parts).lstrip(".") or "the top level"


def _schema_error(source: str, err: jsonschema.ValidationError) -> str:
    where = _where(err.absolute_path)
    inst = err.instance
    wanted = _types(err.schema) | {t for c in (err.context or []) for t in _types(c.schema)}
    if isinstance(inst, float) and inst.is_integer() and "integer" in wanted and err.validator in ("type", "oneOf"):
        return f"{source}: {where}: expected a whole number, got {inst!r} (did you mean {int(inst)}?)"
    if isinstance(inst, float) and not math.isfinite(inst):  # past a maximum: said as non_finite says it
        return f"{source}: {where}: a finite number is needed here, not NaN or infinity"
    if err.validator == "pattern":  # said as what the value fails to be, not as the pattern
        what, rule = PATTERN_RULES.get(err.validator_value, ("does not match", f"give a value matching "
                                                                               f"{err.validator_value}"))
        return f"{source}: {where}: {_short(inst)} {what}; {rule}"
    if err.validator == "additionalProperties":
        allowed = sorted(err.schema.get("properties", {}))
        extra = sorted(set(err.instance) - set(allowed))
        key = extra[0] if extra else "?"
        return f"{source}: unknown key '{key}' at {where}{did_you_mean(key, allowed)}"
    if err.validator == "required":
        return f"{source}: {where}: {err.message}"
    if err.validator in ("type", "oneOf", "anyOf") and err.context:
        enums = [str(v) for c in err.context for v in c.schema.get("enum", ())]
        if isinstance(inst, str) and enums:
            return f"{source}: {where}: {inst!r} is not one of {', '.join(enums)}{did_you_mean(inst, enums)}"
        deeper = [c for c in err.context if len(c.absolute_path) > len(err.absolute_path)]
        if deeper:  # the value is of a right type, wrong inside (a list item past its minimum): say that
            return _schema_error(source, max(deeper, key=lambda c: len(c.absolute_path)))
        types = sorted({c.schema.get("type") if isinstance(c.schema.get("type"), str) else "value"
                        for c in err.context})
        return f"{source}: {where}: expected {' or '.join(types)}, got {err.instance!r}"
    return f"{source}: {where}: {err.message}"


def _merge(defaults: dict, given: dict) -> dict:
    out = copy.deepcopy(defaults)
    for k, v in given.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) and k != "options" else v
    return out


def first_difference(a, b, where: str = "", ignore: tuple[str, ...] = ()) -> str | None:
    """The first dotted key at which two resolved configs differ (keys in ``ignore`` and below them
    left out), None when they are the same."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in [*a, *(k for k in b if k not in a)]:
            key = f"{where}.{k}" if where else str(k)
            if key in ignore:
                continue
            found = first_difference(a.get(k), b.get(k), key, ignore)
            if found:
                return found
        return None
    return None if a == b else (where or "(the whole file)")


def plugin_classes(given: dict) -> list[str]:
    """The ``class:`` paths a campaign's backend entries name (read as data, nothing imported)."""
    b = given.get("backends") if isinstance(given, dict) else None
    b = b if isinstance(b, dict) else {}
    entries = [b.get("reference"), b.get("oracle"), *(b.get("targets") or [] if isinstance(b.get("targets"), list)
                                                       else [])]
    return [str(e["class"]) for e in entries if isinstance(e, dict) and "class" in e]


@dataclass
class Campaign:
    """A validated campaign: every default filled in (``config``, as saved with the run), its sections
    built (``file``, ``fuzzer.config.settings.CampaignFile``) and the names in them resolved."""

    config: dict
    source: str
    file: CampaignFile
    variants: VariantSettings  # the mutators resolved to names
    backends: BackendSet
    probes: ProbeSettings

    # the sections and keys resolution leaves as written
    name = property(lambda self: self.file.name)
    seed = property(lambda self: self.file.seed)
    output = property(lambda self: self.file.output)
    train_layers = property(lambda self: self.file.train_layers)  # training variants: dropout and batch norm
    seeds = property(lambda self: self.file.seeds)
    capture = property(lambda self: self.file.capture)
    sizes = property(lambda self: self.file.sizes)
    run = property(lambda self: self.file.run)
    compare = property(lambda self: self.file.compare)
    address = property(lambda self: self.file.ray.address)
    num_cpus = property(lambda self: self.file.ray.num_cpus)

    def judge_settings(self, reference: str, oracle: str | None, *, ledger, device_references: dict,
                       **overrides) -> JudgeSettings:
        """The workers' settings: every ``JudgeRun`` and ``JudgeCompare`` key as this campaign has it, the
        tolerances and the probes, then ``overrides`` (a repro's candidates: once, never bisected). The one
        place they are built, so a key added to the definition reaches every worker."""
        given = {f.name: getattr(self.run, f.name) for f in fields(JudgeRun)}
        given |= {f.name: getattr(self.compare, f.name) for f in fields(JudgeCompare)}
        given |= dict(reference=reference, oracle=oracle, compare=self.compare.settings, ledger=ledger,
                      probes=self.probes, device_references=device_references)
        return JudgeSettings(**(given | overrides))

    @property
    def reference(self) -> BackendSpec:
        return self.backends.reference

    @property
    def oracle(self) -> BackendSpec | None:
        return self.backends.oracle

    @property
    def modes(self) -> tuple[str, ...]:
        """The modes some target runs in, inference first (the reference runs in each)."""
        return self.backends.reference.modes

    def pool(self, device: str) -> PoolSettings:
        """The pool of one device kind, defaults filled in (one worker per core for the CPU)."""
        given = self.config["pools"].get(device, {})
        base = dict(POOL_DEFAULTS, workers=max(1, os.cpu_count() or 1) if device == "cpu" else 1)
        return PoolSettings(device=device, **{**base, **given})

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.config, sort_keys=False)


def load_campaign(path: str | Path | None = None, overrides: dict | None = None) -> Campaign:
    """Read and check a campaign file (the embedded default when ``path`` is None)."""
    p = Path(path) if path is not None else default_campaign_path()
    source = str(path) if path is not None else "default campaign"
    campaign = from_dict(_merge(read_campaign_file(p, source, limit=CAMPAIGN_MAX_BYTES), overrides or {}), source,
                         p.stem)
    check_written_sizes(campaign)
    return campaign


def check_written_sizes(campaign: Campaign) -> None:
    """What a run writes of ``campaign`` it reads back: campaign.yaml (every default filled in) and run.json
    (every backend spelled out) within their readers' limits, said at load before anything is written."""
    stored = len(campaign.to_yaml().encode())
    if stored > MAX_BYTES:
        raise CampaignError(f"{campaign.source}: the campaign.yaml a run stores would be {stored} bytes; at most "
                            f"{MAX_BYTES} bytes are read back (write fewer values, or fewer aliases)")
    try:
        manifest_of(campaign).encoded()
    except ResultsError as e:
        raise CampaignError(f"{campaign.source}: {e}") from None


def read_campaign_file(path: Path, source: str | None = None, data: bytes | None = None,
                       limit: int = MAX_BYTES) -> dict:
    """The mapping a campaign file holds (``data``, when already read), read strictly
    (``core.strict_yaml``), of at most ``limit`` bytes; one line on any problem."""
    source = source or str(path)
    try:
        data = read_file(path, "campaign file", limit) if data is None else data
        given = load(data, source)
    except OSError as e:
        raise CampaignError(f"{path}: cannot read campaign file: {e.strerror or e}") from None
    except YamlError as e:
        raise CampaignError(str(e)) from None
    given = {} if given is None else given
    if not isinstance(given, dict):
        raise CampaignError(f"{source}: a campaign file is a mapping of keys, got {type(given).__name__}")
    return given


def from_dict(given: dict, source: str = "campaign", default_name: str = "campaign") -> Campaign:
    return _resolve(fill(given, source, default_name), source)


def fill(given: dict, source: str = "campaign", default_name: str = "campaign") -> dict:
    """The campaign checked against the schema, every default filled in; names are not resolved, so
    nothing is imported (a stored campaign is compared this way on --resume)."""
    bad_key = key_problem(given)
    if bad_key:
        raise CampaignError(f"{source}: {bad_key}")
    errors = sorted(_Validator(SCHEMA).iter_errors(given), key=lambda e: e.path)
    if errors:
        raise CampaignError(_schema_error(source, jsonschema.exceptions.best_match(errors)))
    bad = non_finite(given)
    if bad:
        raise CampaignError(f"{source}: {bad}: a finite number is needed here, not NaN or infinity")
    config = _merge(dict(DEFAULTS, name=default_name), given)
    if not re.fullmatch(NAME_PATTERN, config["name"]):
        raise CampaignError(f"{source}: name: {_short(config['name'])} (from the file name) cannot name a run "
                            f"folder; give a 'name' of {NAME_RULE}")
    config["seeds"] = [dict(SELECTION_DEFAULTS, **s) for s in config.get("seeds") or []]
    if not config["seeds"]:
        raise CampaignError(f"{source}: seeds: at least one seed selection is needed")
    for key in ("mutators", "exclude_mutators"):
        config["variants"][key] = as_list(config["variants"][key])
    config["probes"]["kinds"] = as_list(config["probes"]["kinds"])
    config["mode"] = as_list(config["mode"])
    for pattern in config["probes"]["kinds"]:
        if not fnmatch.filter(KINDS, pattern):
            raise CampaignError(f"{source}: probes.kinds: no probe kind matches {pattern!r}"
                                f"{did_you_mean(pattern, list(KINDS))}")
    _check_kinds(config["probes"]["kinds"], source)
    for s in config["seeds"]:
        s["include"], s["exclude"] = as_list(s["include"]), as_list(s["exclude"])
    unknown = sorted(set(config["compare"]["tolerances"]) - set(DEFAULT_TOLERANCES))
    if unknown:
        raise CampaignError(f"{source}: compare.tolerances: unknown dtype {unknown[0]!r}"
                            f"{did_you_mean(unknown[0], list(DEFAULT_TOLERANCES))}")
    return config


def _check_kinds(kinds: list[str], source: str) -> None:
    """Probe kinds that judge every graph: the example, or a value kind beside which it is kept where none
    applies (``workers.run.probes.choose``); relations, layouts, edges and resizes alone apply to some graphs
    only, and a graph none applies to would be run by no probe and judged by nothing."""
    if not kinds:
        raise CampaignError(f"{source}: probes.kinds: [] names no probe kind, so no target would be judged; name "
                            f"'example' (the capture's own inputs) and any of {', '.join(KINDS[1:])}")
    named = [k for k in KINDS if any(fnmatch.fnmatchcase(k, p) for p in kinds)]
    if not set(named) & set(COUNTED):
        raise CampaignError(f"{source}: probes.kinds: [{', '.join(named)}] judge only the graphs they fit (a graph "
                            f"they do not fit would be judged by nothing); add 'example' or a value kind "
                            f"({', '.join(COUNTED[1:])})")


def _resolve(config: dict, source: str) -> Campaign:
    """Every section of a filled-in config as typed settings; names checked on the way."""
    from gapfuzz.fuzzer.mutators import MutatorError, resolve_mutators
    from gapfuzz.seeds import source_names

    known = source_names()
    for i, s in enumerate(config["seeds"]):
        if s["source"] not in known:
            raise CampaignError(f"{source}: seeds[{i}].source: unknown seed source '{s['source']}'"
                                f"{did_you_mean(s['source'], known)}")
    for device, pool in config["pools"].items():  # read by every sandbox process: data, unless the user says
        problem = pool_env_problem(pool.get("env") or {}, EXEC_OPTIONS.get())
        if problem:
            raise CampaignError(f"{source}: pools.{device}.env{problem}")
    b, v = config["backends"], config["variants"]
    targets, entries = [], []
    for i, entry in enumerate(b["targets"]):
        spec = backend_spec(entry, source, f"backends.targets[{i}]")
        if not (isinstance(entry, dict) and "mode" in entry):
            spec.modes = tuple(config["mode"])
        released = with_releases(spec, entry, source, f"backends.targets[{i}]")
        targets += released
        entries += [entry] * len(released)
    modes = tuple(m for m in Mode if any(m in t.modes for t in targets))
    reference = with_releases(backend_spec(b["reference"], source, "backends.reference"), b["reference"], source,
                              "backends.reference", one=True)[0]
    oracle = None if b["oracle"] is None else with_releases(
        backend_spec(b["oracle"], source, "backends.oracle"), _under(b["oracle"], reference), source,
        "backends.oracle", one=True)[0]
    backends = BackendSet(
        reference=reference, oracle=oracle, targets=targets, skip_unavailable=b["skip_unavailable"],
        device_references=device_references(reference, targets) if b["device_reference"] else {})
    for spec in (backends.reference, backends.oracle):
        if spec is not None:
            spec.modes = modes
    for where in ("reference", "oracle"):
        if isinstance(b[where], dict) and "mode" in b[where]:
            raise CampaignError(f"{source}: backends.{where}.mode: the {where} runs in every mode a target runs in; "
                                f"give 'mode' on the targets")
    check_training(backends, modes, source, entries)
    check_backends(backends, source)
    try:
        mutators = resolve_mutators(v["mutators"], v["exclude_mutators"])
    except MutatorError as e:
        raise CampaignError(f"{source}: variants.mutators: {e}") from None
    if not mutators and (v["per_seed"] > 1 or not v["include_seed"]):
        raise CampaignError(f"{source}: variants.mutators: no mutator is left, so every variant would be the "
                            f"seed itself (for the seeds alone: per_seed: 1)")
    file = build(CampaignFile, config)
    return Campaign(config, source, file, variants=replace(file.variants, mutators=mutators), backends=backends,
                    probes=file.probes.settings(file.seed))


def release_lines(specs: list[BackendSpec]) -> dict[str, dict]:
    """Per backend of a stack that runs in several releases: its ``line`` (its name without the release) and
    its ``release`` ({distribution: version}; the installed ones for a backend that names none)."""
    lines: dict[str, list[BackendSpec]] = {}
    for s in specs:
        lines.setdefault(s.line, []).append(s)
    out = {}
    for line, members in lines.items():
        pinned = [s for s in members if s.release is not None]
        if len(members) < 2 or not pinned:
            continue
        here = Release.installed({d for s in pinned for d, _ in s.release.pins})
        for s in members:
            out[s.name] = {"line": line, "release": {**dict(here.pins), **dict(s.release.pins if s.release else ())}}
    return out


def _under(oracle, reference: BackendSpec):
    """The oracle's entry, under the reference's torch when the reference names one and the oracle does not
    (the oracle runs beside the reference, in its pool)."""
    torch_release = dict(reference.release.pins).get("torch") if reference.release else None
    if torch_release is None or (isinstance(oracle, dict) and "torch" in oracle):
        return oracle
    return {**(oracle if isinstance(oracle, dict) else {"backend": oracle}), "torch": torch_release}


def manifest_of(campaign: Campaign, backends: list[BackendSpec] | None = None) -> RunManifest:
    """What a run folder's readers are told of the campaign (``run.json``, ``results.manifest``):
    ``backends`` those that run (all the campaign's by default), by their record names."""
    specs = campaign.backends.all() if backends is None else list(backends)
    reference, oracle = campaign.reference.name, campaign.oracle.name if campaign.oracle else None
    releases = release_lines(specs)
    as_json = lambda value: json.loads(json.dumps(value, default=str))  # noqa: E731 (tuples to lists)
    return RunManifest(
        campaign=campaign.name, reference=reference, oracle=oracle,
        targets=[s.name for s in specs if s.name not in (reference, oracle)],
        backends={s.name: {"stack": s.stack, "device": s.device, "options": as_json(dict(s.options)),
                           "option_space": as_json(dict(s.option_space)), "modes": [str(m) for m in s.modes],
                           "class": s.cls_path, **({"option_cover": s.option_cover} if s.option_space else {}),
                           **releases.get(s.name, {})}
                  for s in specs},
        compare=as_json({**asdict(campaign.compare.settings), "sweep": list(campaign.compare.sweep)}),
        modes=[str(m) for m in campaign.modes])

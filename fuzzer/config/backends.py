"""A campaign's backends: each entry of ``backends:`` as a checked spec, its option cover, the reference
each device's runs are judged against, and the checks that need every backend at once."""
from __future__ import annotations

import math
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import replace

from gapfuzz.core.covering import ALL, COVERS, MAX_COMBINATIONS, space_problem
from gapfuzz.core.modes import Mode, mode_of
from gapfuzz.core.registry import did_you_mean
from gapfuzz.fuzzer.config.settings import BackendSet, CampaignError
from gapfuzz.workers.run.registry import BackendError, BackendSpec, parse_backend
from gapfuzz.workers.run.releases import Release


def as_list(v) -> list:
    return [v] if isinstance(v, str) else list(v or [])


# whether options that name a program may be given: the command line's --allow-exec-options, for the
# campaigns loaded inside ``exec_options_allowed`` (a campaign's data is never code unless its user says so)
EXEC_OPTIONS: ContextVar[bool] = ContextVar("gapfuzz_exec_options", default=False)


@contextmanager
def exec_options_allowed(allowed: bool):
    """Campaigns loaded inside may give options that name a program, a library, a path or compiler flags."""
    token = EXEC_OPTIONS.set(bool(allowed))
    try:
        yield
    finally:
        EXEC_OPTIONS.reset(token)


def backend_spec(entry, source: str, where: str) -> BackendSpec:
    """A campaign's backend entry as a checked spec, options included (an unknown option of a
    built-in stack is a typo; a value of the wrong type, or one that names a program without
    ``exec_options_allowed``, is refused), its option space bounded before its values are checked."""
    try:
        if isinstance(entry, str):
            spec = parse_backend(entry)
        elif "class" in entry:
            spec = parse_backend(f"x@{entry.get('device', 'cpu')}", entry.get("options"), entry.get("label"),
                                 entry["class"], entry.get("timeout_s"))
        elif "backend" in entry:
            spec = parse_backend(entry["backend"], entry.get("options"), entry.get("label"), None,
                                 entry.get("timeout_s"))
        else:
            raise BackendError("a backend entry needs 'backend: stack@device' or 'class: module:Class'")
    except BackendError as e:
        raise CampaignError(f"{source}: {where}: {e}") from None
    if isinstance(entry, dict) and "mode" in entry:
        spec.modes = tuple(as_list(entry["mode"]))
    cls, allow_exec = spec.backend_cls(), EXEC_OPTIONS.get()
    problem = cls.check_options(spec.options, allow_exec)
    if problem:
        raise CampaignError(f"{source}: {where}.options: {problem}")
    spec.option_space = dict((entry.get("option_space") if isinstance(entry, dict) else None) or {})
    if isinstance(entry, dict) and "option_cover" in entry:
        spec.option_cover = _option_cover(entry["option_cover"], spec.option_space, f"{source}: {where}.option_cover")
    too_large = space_problem(spec.option_space, spec.option_cover)  # from its sizes: before a value is read
    if too_large:
        key, phrase = too_large
        raise CampaignError(f"{source}: {where}.option_space{'.' + key if key else ''}: {phrase}")
    for key, values in spec.option_space.items():
        for value in (v for v in values if v is not None):  # null: the stack's default, left unset
            problem = cls.check_options({**spec.options, key: value}, allow_exec)
            if problem:
                raise CampaignError(f"{source}: {where}.option_space.{key}: {problem.removeprefix(f'{key}: ')}")
    return spec


def with_releases(spec: BackendSpec, entry, source: str, where: str, one: bool = False) -> list[BackendSpec]:
    """``spec`` once per release its entry names: ``versions`` (its stack's own distribution's, torch's for a
    PyTorch stack) and ``torch`` (the torch under it), each labelled with its release (``onnxruntime-1.31.1``,
    ``inductor-torch2.13.0``). ``one``: a reference or oracle, which runs in one release."""
    if not isinstance(entry, dict) or not {"versions", "torch"} & set(entry):
        return [spec]
    dist = spec.backend_cls().release_distribution()
    versions, torch_release, images = entry.get("versions"), entry.get("torch"), dict(entry.get("images") or {})
    if versions is not None and dist is None:
        raise CampaignError(f"{source}: {where}.versions: {spec.stack} has no releases to choose (a plug-in stack "
                            f"names its package in 'distribution' or 'module')")
    if versions is not None and one:
        raise CampaignError(f"{source}: {where}.versions: the {where.rsplit('.', 1)[-1]} runs in one release; "
                            f"give it 'torch: <release>', and name several releases on targets")
    if versions is not None and torch_release is not None and dist == "torch":
        raise CampaignError(f"{source}: {where}: {spec.stack} is torch's: name its releases in 'versions' or "
                            f"'torch', not both")
    unknown = sorted(set(images) - set(versions or []))
    if unknown:
        raise CampaignError(f"{source}: {where}.images: {unknown[0]!r} is not one of its versions"
                            f"{did_you_mean(unknown[0], list(versions or []))}")
    out = []
    for version in versions or [None]:
        pins = {**({dist: version} if version is not None else {}),
                **({"torch": torch_release} if torch_release is not None else {})}
        release = Release.of(pins)
        out.append(replace(spec, label=f"{spec.label or spec.stack}-{release.tag(spec.stack)}", release=release,
                           image=images.get(version), options=dict(spec.options)))
    return out


def _option_cover(cover, space: dict, where: str) -> str | dict:
    """A target's ``option_cover`` checked against its option space: ``pairs``, ``all``, ``draw``, or
    ``{all: [options]}`` (every combination of those, each with every pair of the others)."""
    if not space:
        raise CampaignError(f"{where}: there is no option_space to cover")
    if isinstance(cover, str):
        if cover not in COVERS:
            raise CampaignError(f"{where}: unknown cover {cover!r}{did_you_mean(cover, list(COVERS))}")
        names = list(space) if cover == ALL else []
    else:
        unknown = sorted(set(cover) - {ALL})
        if unknown:
            raise CampaignError(f"{where}: unknown key {unknown[0]!r}{did_you_mean(unknown[0], [ALL])}")
        names = cover.get(ALL)
        if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
            raise CampaignError(f"{where}.all: a list of option names from the option_space is expected")
        for name in names:
            if name not in space:
                raise CampaignError(f"{where}.all: {name!r} is not in the option_space"
                                    f"{did_you_mean(name, list(space))}")
        cover = {ALL: sorted(set(names))}
    combinations = math.prod(len(space[n]) for n in set(names))
    if combinations > MAX_COMBINATIONS:
        raise CampaignError(f"{where}: all of {', '.join(sorted(set(names)))} is {combinations} combinations, more "
                            f"than {MAX_COMBINATIONS}; cover fewer in every combination, the rest in pairs")
    return cover


def device_references(reference: BackendSpec, targets: list[BackendSpec]) -> dict[str, str]:
    """For each device other than the reference's where another stack runs, the reference's stack on
    that device (device -> its name), appended to ``targets`` in the modes of that device's targets when
    the campaign does not name it: a compiler on a GPU is judged against eager on the GPU, and eager on
    the GPU against eager on the host (the platform's comparison)."""
    found = {}
    for device in dict.fromkeys(t.device for t in targets if t.device != reference.device):
        here = [t for t in targets if t.device == device]
        if all(t.stack == reference.stack and t.cls_path == reference.cls_path for t in here):
            continue  # eager alone on that device: the platform's comparison only
        ref = replace(reference, device=device, options=dict(reference.options), option_space={})
        if device not in ref.backend_cls().devices:
            continue  # that stack does not run there: the host's reference judges
        named = next((t for t in here if t.name == ref.name), None)
        if named is None and ref.unavailable_reason() is not None:
            continue  # not here (a device torch does not see, a cluster's): name it among the targets to have it
        modes = tuple(m for m in Mode if any(m in t.modes for t in here))
        if named is None:
            targets.append(replace(ref, modes=modes))
        else:
            named.modes = tuple(m for m in Mode if m in named.modes or m in modes)
        found[device] = ref.name
    return found


def check_training(b: BackendSet, modes: tuple, source: str, entries: list | None = None) -> None:
    """Training runs need a reference (and oracle) that train, and at least one target that does; a target
    entry (of ``entries``, the campaign's ``backends.targets``) whose own ``mode`` names training must train
    (the campaign's ``mode`` is each stack's where it can: one that cannot train gets no training run)."""
    for i, (spec, entry) in enumerate(zip(b.targets, entries or [])):
        named = as_list(entry.get("mode")) if isinstance(entry, dict) else []
        backward = [m for m in named if mode_of(m).backward]
        if backward and not spec.backend_cls().trains:
            raise CampaignError(f"{source}: backends.targets[{i}].mode: {spec.name} cannot train, so it has no "
                                f"{backward[0]} runs (stacks that train: gapfuzz backends); give it mode: inference")
    backward = [m for m in modes if mode_of(m).backward]
    if not backward:
        return
    for where, spec in (("reference", b.reference), ("oracle", b.oracle)):
        if spec is not None and not spec.backend_cls().trains:
            raise CampaignError(f"{source}: backends.{where}: {spec.name} cannot train, and a target runs in "
                                f"training mode (stacks that train: gapfuzz backends)")
    if not any(t.runs_in(m) for m in backward for t in b.targets):
        raise CampaignError(f"{source}: mode: training is asked for, but no target stack trains "
                            f"({', '.join(t.name for t in b.targets)}; stacks that train: gapfuzz backends)")


def check_backends(b: BackendSet, source: str) -> None:
    if not b.targets:
        raise CampaignError(f"{source}: backends.targets: name at least one target backend")
    if b.oracle is not None and b.oracle.device != b.reference.device:
        raise CampaignError(f"{source}: backends.oracle: the oracle must run on the reference's device "
                            f"({b.reference.device})")
    if b.oracle is not None and b.oracle.release != b.reference.release:
        raise CampaignError(f"{source}: backends.oracle: the oracle runs beside the reference, so under its "
                            f"release ({b.reference.release or 'the installed one'}); give both the same 'torch'")
    labels = [s.name for s in [b.reference, b.oracle, *b.targets] if s is not None]
    fixed = (b.reference.name, b.oracle.name if b.oracle else None)
    dup = {n for n in labels if labels.count(n) > 1 and n not in fixed}
    if dup:
        raise CampaignError(f"{source}: backends: {sorted(dup)[0]} is named twice; give one a 'label'")

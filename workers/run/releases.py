"""Releases of a stack, each in an environment of its own, made once and cached by what it pins.

A backend may name releases (``onnxruntime==1.31.1``, ``torch==2.13.0``) other than those installed. Its
pool then runs in an environment made for them: a virtual environment whose own site-packages hold the
pinned distributions and, behind them, this interpreter's (``gapfuzz``, Ray, numpy and the rest), so a
pin costs only its own wheels. Its Ray workers start in that environment's interpreter (Ray's
``py_executable``), so everything they run, the sandbox included, sees the release; what crosses is
data (the graph IR, weights, inputs, records). On a cluster, Ray makes the environment on each node
from the same pins (its ``pip`` runtime environment) or takes a container image per release.
Environments live under ``<cache>/envs`` (``core.files.cache_dir``), one folder per set of pins and
Python; a folder is used only once its ``ready.json`` is written, so a half-made one is made again, and only
while it holds its pins (checked at each use: a pin lost from it would run the installed release under its name).
"""
from __future__ import annotations

import fcntl
import hashlib
import importlib.metadata as metadata
import json
import os
import platform
import re
import shlex
import shutil
import site
import subprocess
import sys
import time
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from gapfuzz.core.files import cache_dir, write_whole
from gapfuzz.core.registry import did_you_mean
from gapfuzz.workers.run import pip_runs
from gapfuzz.workers.run.pip_runs import Stages, index_options

VERSION_PATTERN = re.compile(r"[0-9][0-9A-Za-z.+!_-]{0,39}\Z")  # a release as a package index spells it
READY = "ready.json"
# a container image reference, ``[registry[:port]/]name[:tag][@digest]`` as Docker's reference grammar spells one:
# Ray puts it on a shell command line (podman's), so nothing else may reach it
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_DOMAIN = r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*(?::[0-9]{1,5})?"
IMAGE_PATTERN = (rf"^(?:{_DOMAIN}/)?{_COMPONENT}(?:/{_COMPONENT})*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{{0,127}})?"
                 r"(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?\Z")
IMAGE_RULE = "[registry/]name[:tag][@digest], e.g. registry.example.com/ort:1.31.1"
# what is asked of an environment's interpreter at each use: each pinned distribution's version, and whether its
# modules are imported from where that distribution is installed (its metadata left, its module gone, the module
# of the release behind it would be imported under the pinned version's name)
_HOLDS = """
import importlib.metadata as m, importlib.util as u, json, os, sys
out = {}
for d in sys.argv[1:]:
    try:
        dist = m.distribution(d)
    except m.PackageNotFoundError:
        out[d] = [None, None]
        continue
    home = os.path.realpath(str(dist.locate_file(""))) + os.sep
    tops = {f.parts[0].split(".")[0] for f in dist.files or () if f.parts and not f.parts[0].startswith(".")}
    away = None
    for name in sorted(t for t in tops if t.isidentifier() and t != "__pycache__"):
        try:
            spec = u.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        where = ([spec.origin] if spec.origin else list(spec.submodule_search_locations or ())) if spec else []
        if where and not any(os.path.realpath(w).startswith(home) for w in where if w):
            away = away or where[0]
    out[d] = [dist.version, away]
print(json.dumps(out))
"""


class ReleaseError(RuntimeError):
    """A release that cannot be had here (no such release, no network, a wheel that does not fit): one line."""


@dataclass(frozen=True)
class Release:
    """The distributions a backend's environment pins, ``(distribution, version)`` sorted by name."""

    pins: tuple[tuple[str, str], ...]

    @classmethod
    def of(cls, pins: dict[str, str]) -> Release:
        return cls(tuple(sorted((d.lower(), str(v)) for d, v in pins.items())))

    def tag(self, stack: str) -> str:
        """The release in a backend's label: ``1.31.1`` for a distribution named as the stack is, ``torch2.13.0``
        for another (``onnxruntime-1.31.1``, ``inductor-torch2.13.0``)."""
        return "-".join(v if d == stack else f"{d}{v}" for d, v in self.pins)

    @property
    def requirements(self) -> list[str]:
        return [f"{d}=={v}" for d, v in self.pins]

    def __str__(self) -> str:
        return ", ".join(f"{d} {v}" for d, v in self.pins)

    @classmethod
    def installed(cls, distributions) -> Release:
        """What this interpreter has of ``distributions`` (``unknown`` for one it lacks): the release a backend
        that names none runs beside those that do."""
        return cls.of({d: installed_version(d) or "unknown" for d in distributions})

    @cached_property
    def installed_here(self) -> bool:
        """Whether this interpreter already has every pinned release (then no environment is made)."""
        return all(matches(installed_version(d), v) for d, v in self.pins)

    @property
    def folder(self) -> Path:
        """Its environment's folder: one per set of pins and Python (a wheel is built for one)."""
        key = json.dumps([self.pins, sys.version, platform.machine(), sys.prefix])
        name = "-".join(f"{d}-{v}" for d, v in self.pins)
        return cache_dir() / "envs" / f"{name}-{hashlib.sha256(key.encode()).hexdigest()[:10]}"


def matches(installed: str | None, pinned: str) -> bool:
    """Whether an installed version is the pinned release (``2.13.0+cpu`` is ``2.13.0``, as pip's ``==`` says)."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    if installed is None:
        return False
    try:
        return SpecifierSet(f"=={pinned}").contains(installed, prereleases=True)
    except InvalidSpecifier:
        return installed == pinned


def installed_version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


@dataclass
class Environment:
    release: Release
    python: str  # its interpreter
    made_s: float | None  # how long making it took; None when it was cached


def environment(release: Release, say=None) -> Environment:
    """The release's environment, made if no earlier campaign made it, made again if it no longer holds its
    pins (``say``: a line of progress, e.g. ``print`` to stderr); a ``ReleaseError`` naming the release, or
    the cache folder, when it cannot be made."""
    folder = release.folder
    try:
        return _environment(release, folder, say)
    except OSError as e:  # the cache's disk, not the run folder's: say which file
        why = "a file stands where a folder is needed" if isinstance(e, (FileExistsError, NotADirectoryError)) \
            else e.strerror or str(e)
        raise ReleaseError(f"environment cache {folder.parent}: cannot make the environment of {release} there "
                           f"({e.filename or folder}: {why}); set GAPFUZZ_CACHE_DIR elsewhere") from None


def _environment(release: Release, folder: Path, say) -> Environment:
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another campaign making the same one: wait for it, then use it
        python = folder / "bin" / "python"
        if (folder / READY).exists() and python.exists():
            wrong = lacks(release, python)
            if not wrong:
                if say:
                    say(f"environment for {release}: {folder} (made by an earlier campaign)")
                return Environment(release, str(python), None)
            if say:
                say(f"environment for {release}: {folder} holds {wrong} instead of its pins; making it again")
        t0 = time.monotonic()
        if say:
            say(f"environment for {release}: making it in {folder} (once; later campaigns reuse it)")
        shutil.rmtree(folder, ignore_errors=True)
        try:
            _make(release, folder, say)
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        made = time.monotonic() - t0
        write_whole(folder / READY, lambda f: f.write(json.dumps(
            {"pins": dict(release.pins), "python": sys.version, "made_s": round(made, 1)}).encode()))
        if say:
            say(f"environment for {release}: ready in {made:.0f} s")
        return Environment(release, str(python), made)


def lacks(release: Release, python: str | Path) -> str | None:
    """What the environment of ``python`` holds instead of ``release``'s pins (``onnxruntime 1.32.0``, or a
    pinned release whose module is imported from elsewhere); None when it holds every pin."""
    try:
        done = subprocess.run([str(python), "-c", _HOLDS, *(d for d, _ in release.pins)], capture_output=True,
                              text=True, timeout=120)
        got = json.loads(done.stdout) if done.returncode == 0 else None
    except (OSError, ValueError, subprocess.TimeoutExpired):
        got = None
    if not isinstance(got, dict):
        return "an interpreter that does not start"
    wrong = []
    for d, v in release.pins:
        version, away = (got.get(d) or [None, None])[:2]
        if not matches(version, v):
            wrong.append(f"{d} {version or 'missing'}")
        elif away:
            wrong.append(f"{d} {version} whose module is imported from {away}, not where {d} is installed")
    return ", ".join(wrong) or None


def state(release: Release) -> tuple[str, str | None]:
    """Its environment in the cache: ``cached`` (made, holding its pins), ``broken`` (made, but no longer
    holding them: it is made again at its next use; with what it holds instead) or ``absent``."""
    python = release.folder / "bin" / "python"
    try:
        if not ((release.folder / READY).exists() and python.exists()):
            return "absent", None
    except OSError:  # a cache folder that cannot be read: the run says so, naming it
        return "absent", None
    wrong = lacks(release, python)
    return ("broken", wrong) if wrong else ("cached", None)


def _make(release: Release, folder: Path, say) -> None:
    """A virtual environment without pip, this interpreter's site-packages behind its own (a ``.pth`` line),
    the pins installed by this interpreter's pip with pip's own configuration (index, find-links)."""
    _run([sys.executable, "-m", "venv", "--without-pip", str(folder)], release, folder / "venv.log")
    python = folder / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    parents = [*site.getsitepackages(), *([site.getusersitepackages()] if site.ENABLE_USER_SITE else [])]
    lines = [f"import site; site.addsitedir({p!r})" for p in parents if os.path.isdir(p)]
    Path(purelib, "_gapfuzz_parent.pth").write_text("\n".join(lines) + "\n")
    if say:
        say(f"environment for {release}: pip install {' '.join(release.requirements)}")
    _run([str(python), "-m", "pip", "install", "--no-input", "--disable-pip-version-check", "--progress-bar", "off",
          *release.requirements], release, folder / "pip.log", timeout_s=1800,
         stages=Stages(say, f"environment for {release}") if say else None)
    wrong = lacks(release, python)
    if wrong:
        raise ReleaseError(f"{release}: the environment made for it holds {wrong} instead")


def _run(command: list[str], release: Release, log: Path, timeout_s: float = 300, stages: Stages | None = None) -> None:
    """``command``, its output kept in ``log``; with ``stages``, its stages said as they come (workers.run.pip_runs)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    try:
        status, output = pip_runs.run(command, timeout_s, stages.feed if stages else lambda line: None)
    except subprocess.TimeoutExpired:
        raise ReleaseError(f"{release}: making its environment took over {timeout_s:.0f} s "
                           f"({' '.join(command[2:4])})") from None
    log.write_text(output)
    if status != 0:
        raise ReleaseError(why_not(output, release))


def why_not(pip_output: str, release: Release) -> str:
    """pip's failure in one phrase: no such release (with those the index has, and the nearest), no index
    to ask, or pip's own last error line."""
    found = re.search(r"satisfies the requirement (\S+?)==(\S+) \(from versions: ([^)]*)\)", pip_output)
    if found:
        dist, version, versions = found.groups()
        have = [v.strip() for v in versions.split(",") if v.strip() and v.strip() != "none"]
        if not have:
            return f"the package index has no release of {dist} (is it reachable? pip's configuration names it)"
        shown = ", ".join(have[-8:]) + (f" and {len(have) - 8} older" if len(have) > 8 else "")
        return f"the package index has no {dist} {version}{did_you_mean(version, have)} (it has {shown})"
    conflict = re.search(r"The conflict is caused by:\n((?:[ \t]+\S.*\n?)+)", pip_output)
    if conflict:
        causes = "; ".join(" ".join(line.split()) for line in conflict.group(1).splitlines() if line.strip())
        return f"pip cannot install it beside what it must keep: {causes[:240]}"
    errors = [line.strip() for line in pip_output.splitlines() if line.strip().startswith("ERROR")]
    last = errors[-1] if errors else (pip_output.strip().splitlines() or ["pip failed"])[-1]
    return f"the environment of {release} cannot be made: {' '.join(last.split())[:240]}"


def runtime_env(release: Release, python: str | None, image: str | None = None, device: str = "cpu") -> dict:
    """Ray's runtime environment for a pool of ``release``: this machine's environment (``python``), a
    container image (Ray's ``image_uri``: nodes with podman), or, on a cluster, Ray's own pip environment that
    each node makes from the same pins with the indexes they come from (``index_options``): the route a
    KubeRay cluster takes, its pods having pip and no podman."""
    if image:
        if not re.match(IMAGE_PATTERN, image):  # checked in the campaign file too: Ray puts it on a command line
            raise ReleaseError(f"{release}: image {image[:80]!r} is not an image reference; give {IMAGE_RULE}")
        return {"image_uri": image}
    if python:
        return {"py_executable": shlex.quote(python)}  # Ray runs it through a shell: one word, whatever the path
    options = index_options(release, device)
    return {"pip": {"packages": release.requirements, **({"pip_install_options": options} if options else {})}}

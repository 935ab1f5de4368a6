"""gapfuzz's cluster images: one registry prefix, one Dockerfile per device kind, Ray as the driver has it.

Ray refuses a node whose Ray or Python version differs from the driver's, so each image is built with
the versions of the environment that runs this script (the driver's) as build arguments; the
manifests name ``<registry>/gapfuzz:<kind>``, the registry read from ``scripts/cluster/registry``.

    python scripts/cluster/images.py set-registry ghcr.io/me    # the prefix, in the file and the manifests
    python scripts/cluster/images.py build cpu --push            # or cuda; --dry-run prints the command
    python scripts/cluster/images.py context                     # the files docker build would send
"""
from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
REGISTRY_FILE = HERE / "registry"
LAUNCHER = HERE / "ray-cluster-aws.yaml"
MANIFESTS = [HERE / "rayjob.yaml", LAUNCHER]  # the files that name the images
KINDS = {"cpu": HERE / "Dockerfile.cpu", "cuda": HERE / "Dockerfile.cuda"}
# Kinds the manifest names whose images come from the vendor's own base (ROCm, oneAPI, CANN): built by
# the user from one of these Dockerfiles with that base, under the same name (docs/cluster.md).
VENDOR_KINDS = ("rocm", "xpu", "npu")
IMAGE = re.compile(r"(?P<lead>\b(?:head_|worker_)?image:\s*)(?P<name>\S*?)(?P<tail>gapfuzz:(?P<kind>[a-z0-9]+))\b")
# a registry host (with an optional port) and path, as a Docker image reference allows them
REGISTRY = re.compile(r"^[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[0-9]+)?(/[a-z0-9]+([._-][a-z0-9]+)*)*$")


def registry() -> str:
    return REGISTRY_FILE.read_text().strip()


def image(kind: str, prefix: str | None = None) -> str:
    return f"{prefix or registry()}/gapfuzz:{kind}"


def driver_versions() -> dict[str, str]:
    """The build arguments that must equal the driver's: Ray exactly, Python's minor version, torch's release."""
    return {"RAY_VERSION": version("ray"), "PYTHON_VERSION": "%d.%d" % sys.version_info[:2],
            "TORCH_VERSION": version("torch").split("+")[0]}


def set_registry(prefix: str) -> list[Path]:
    if not REGISTRY.match(prefix):
        raise ValueError(f"registry {prefix!r}: expected a host[:port][/path] in lower case, e.g. ghcr.io/me")
    REGISTRY_FILE.write_text(prefix + "\n")
    changed = []
    for path in MANIFESTS:
        text = path.read_text()
        new = IMAGE.sub(lambda m: m["lead"] + prefix + "/" + m["tail"], text)
        if new != text:
            path.write_text(new)
            changed.append(path)
    return changed


def manifest_ray_versions() -> dict[str, str]:
    """The Ray version each launch file that pins one pins (KubeRay's rayVersion), by file name; the launcher
    file runs the images, whose Ray is the build's."""
    out = {}
    for path in MANIFESTS:
        found = re.search(r'rayVersion:\s*"?([0-9][^"\s]*)', path.read_text())
        if found:
            out[path.name] = found[1]
    return out


def build_command(kind: str, extra: list[str] = ()) -> list[str]:
    """``extra``: more KEY=VALUE build arguments (another base image or wheel index), never the versions."""
    pinned = driver_versions()
    overridden = [e for e in extra if e.split("=", 1)[0] in pinned]
    if overridden:
        raise ValueError(f"--build-arg {overridden[0]}: {', '.join(pinned)} come from the driver's environment")
    args = [f"--build-arg={k}={v}" for k, v in pinned.items()] + [f"--build-arg={e}" for e in extra]
    return ["docker", "build", "-f", str(KINDS[kind].relative_to(ROOT)), *args, "-t", image(kind), "."]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("registry", help="print the registry prefix")
    p = sub.add_parser("set-registry", help="set the registry prefix in scripts/cluster/registry and the manifests")
    p.add_argument("prefix")
    p = sub.add_parser("build", help="build one device kind's image with the driver's Ray and Python")
    p.add_argument("kind", choices=sorted(KINDS))
    p.add_argument("--push", action="store_true")
    p.add_argument("--build-arg", action="append", default=[], metavar="KEY=VALUE", help="e.g. CUDA_IMAGE=...")
    p.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    sub.add_parser("context", help="list the files docker build would send (.dockerignore applied)")
    args = parser.parse_args(argv)
    if args.command == "registry":
        print(registry())
    elif args.command == "set-registry":
        try:
            changed = set_registry(args.prefix)
        except ValueError as e:
            print(f"images.py: {e}", file=sys.stderr)
            return 2
        print(f"registry {args.prefix}: {', '.join(p.name for p in changed) or 'manifests already named it'}")
    elif args.command == "context":
        from dockerignore import context_files  # beside this file

        for rel in context_files(ROOT):
            print(rel)
    else:
        ray = driver_versions()["RAY_VERSION"]
        stale = {name: v for name, v in manifest_ray_versions().items() if v != ray}
        if stale:
            print(f"images.py: the driver has Ray {ray} but {stale} pin another: set them to {ray}", file=sys.stderr)
            return 2
        try:
            commands = [build_command(args.kind, args.build_arg)]
        except ValueError as e:
            print(f"images.py: {e}", file=sys.stderr)
            return 2
        commands += [["docker", "push", image(args.kind)]] if args.push else []
        for command in commands:
            print(shlex.join(command))
            if not args.dry_run and subprocess.run(command, cwd=ROOT).returncode:
                return 1
    return 0


if __name__ == "__main__":
    sys.path.insert(0, os.fspath(HERE))
    sys.exit(main())

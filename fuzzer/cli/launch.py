"""What ``gapfuzz run`` checks before it writes anything, and how it says to continue.

A campaign fails early or not at all for the reasons a user can fix: a run folder that is a file,
cannot be created or holds another campaign; a ``--resume`` with nothing to resume; a cluster
address nothing answers at; a cache directory that is a file. Each is one line, and nothing has
been written when it is said. The stored campaign of a folder being resumed is compared as data
(defaults filled in, no names resolved), so a ``class:`` it names is never imported.
"""
from __future__ import annotations

import os
import shlex
import socket
from pathlib import Path

from gapfuzz.fuzzer.config.campaign import Campaign, CampaignError, fill, first_difference, read_campaign_file
from gapfuzz.fuzzer.config.schema import OPERATIONAL_KEYS
from gapfuzz.results.folder import Folder, FolderError
from gapfuzz.seeds.spec import cache_dir

CONNECT_TIMEOUT_S = 10.0


class LaunchError(ValueError):
    """A run that cannot start, for a reason named in one line."""


def check_run_dir(folder: Folder, campaign: Campaign, resume: bool) -> None:
    run_dir, stored = folder.uri, f"{folder.uri}/campaign.yaml"
    try:
        exists, is_dir, has_campaign = folder.exists(), folder.is_dir(), folder.exists("campaign.yaml")
    except FolderError as e:
        raise LaunchError(str(e)) from None
    if exists and not is_dir:
        raise LaunchError(f"{run_dir}: exists and is not a folder; give --out a folder")
    if resume and not has_campaign:
        raise LaunchError(f"{run_dir}: holds no campaign to resume; start it without --resume")
    if has_campaign and not resume:
        raise LaunchError(f"{run_dir} already holds a campaign: add --resume to continue it, "
                          f"or --out DIR to write elsewhere")
    if has_campaign:
        # filled in again, so that keys added to gapfuzz since the run began take their defaults; how it
        # runs (pools, cluster, flush size) may change, what it runs may not
        given = read_campaign_file(Path(stored), stored, folder.read_bytes("campaign.yaml"))
        key = first_difference(fill(given, stored), campaign.config, ignore=OPERATIONAL_KEYS)
        if key:
            raise CampaignError(f"{campaign.source}: {key} differs from the campaign in {stored}; "
                                f"resume with that file or use --out DIR")
    if folder.local_path is None:
        return  # an object store says whether it may be written when it is
    run_dir = folder.local_path
    parent = next((p for p in [run_dir, *run_dir.parents] if p.exists()), Path("."))
    if not os.access(parent, os.W_OK | os.X_OK):
        raise LaunchError(f"{run_dir}: cannot write there ({parent} is not writable)")


def check_cache(campaign: Campaign) -> None:
    """The capture cache must be a folder (or creatable): a file there is an environment error, not
    every seed's capture failure."""
    if not campaign.capture.cache:
        return
    root = cache_dir()
    existing = next((p for p in [root, *root.parents] if p.exists()), None)
    if existing is not None and not existing.is_dir():
        raise LaunchError(f"capture cache {root}: {existing} is a file, not a folder (set GAPFUZZ_CACHE_DIR "
                          f"elsewhere, or capture: {{cache: false}})")
    if existing is not None and not os.access(existing, os.W_OK | os.X_OK):
        raise LaunchError(f"capture cache {root}: {existing} is not writable (set GAPFUZZ_CACHE_DIR elsewhere)")


def check_address(address: str | None) -> None:
    """A ``host:port`` (or ``ray://host:port``) address must answer within CONNECT_TIMEOUT_S, and
    ``auto`` must find a running cluster."""
    if not address:
        return
    hostport = address.split("://", 1)[-1]
    if address == "auto":
        try:
            from ray._private.services import canonicalize_bootstrap_address
        except ImportError:  # a Ray without it: ray.init will say
            return
        try:
            hostport = canonicalize_bootstrap_address("auto")
        except ConnectionError:
            raise LaunchError("--address auto: no running Ray cluster was found on this machine "
                              "(start one with 'ray start --head', or leave --address out)") from None
        if not hostport:
            return
    host, sep, port = hostport.rpartition(":")
    if not sep or not port.isdigit():
        raise LaunchError(f"--address {address!r}: expected host:port, ray://host:port or auto")
    try:
        socket.create_connection((host or "127.0.0.1", int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as e:
        raise LaunchError(f"--address {address}: no Ray cluster answers there ({e.strerror or e})") from None


def resume_command(campaign_arg: str | None, run_dir: Path, address: str | None, settings: tuple = ()) -> str:
    """The exact command that continues this campaign (``settings``: its KEY=VALUE words, as given)."""
    words = ["gapfuzz", "run", *([campaign_arg] if campaign_arg else []), *settings, "--resume", "--out",
             str(run_dir)]
    if address:
        words += ["--address", address]
    return " ".join(shlex.quote(w) for w in words)

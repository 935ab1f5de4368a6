"""Shared fixtures. Subprocesses (sandboxes, Ray workers, the CLI) find the repo on PYTHONPATH."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
os.environ.setdefault("RAY_DEDUP_LOGS", "0")


def gapfuzz(*args, cwd=None, timeout=600, check=False, joins_ray=False) -> subprocess.CompletedProcess:
    """Run the CLI as a user would, in a fresh interpreter. ``joins_ray``: a campaign joins the session's
    embedded Ray through ``RAY_ADDRESS``, as inside a Ray job, instead of starting its own (7-16 s); its
    workers then have this process's environment."""
    env = None
    if joins_ray:
        import ray

        shared_ray()
        env = {**os.environ, "RAY_ADDRESS": ray.get_runtime_context().gcs_address}
    proc = subprocess.run([sys.executable, "-m", "gapfuzz.fuzzer.cli", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, env=env)
    if check and proc.returncode != 0:
        raise AssertionError(f"gapfuzz {' '.join(map(str, args))} failed ({proc.returncode}):\n{proc.stderr}")
    return proc


@pytest.fixture
def write_campaign(tmp_path):
    def write(text: str, name: str = "c.yaml") -> Path:
        path = tmp_path / name
        path.write_text(text)
        return path
    return write


@pytest.fixture(scope="session")
def captured_vit():
    from gapfuzz.seeds import create_seed
    from gapfuzz.seeds.capture import capture

    return capture(create_seed("timm/test_vit"))


@pytest.fixture(scope="session")
def _session_ray():
    """One embedded Ray for every test of the session that drives a campaign in this process: starting one
    costs 7-16 s on two cores, and a campaign's driver leaves no worker behind (``Driver._finish``)."""
    import ray

    yield ray
    if ray.is_initialized():
        ray.shutdown()


def shared_ray() -> None:
    """The session's embedded Ray, started on first use (or again, if a test shut it down)."""
    import ray

    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")


@pytest.fixture
def local_ray(_session_ray):
    """The session's embedded Ray for a test that drives a campaign in this process (``fuzzer.driver.Driver``)."""
    shared_ray()
    yield


def run_campaign(text: str, folder: Path, campaign_file: bool = False):
    """Drive the campaign ``text`` into ``folder`` on the Ray already started (``local_ray``) and load the
    run; with ``campaign_file``, write campaign.yaml beside the records as ``gapfuzz run`` does."""
    from gapfuzz.analysis.api import load_run
    from gapfuzz.core.strict_yaml import load
    from gapfuzz.fuzzer.config.campaign import from_dict
    from gapfuzz.fuzzer.driver import Driver

    Driver(from_dict(load(text, "t"), "t"), folder, progress=False).run()
    if campaign_file:
        (Path(folder) / "campaign.yaml").write_text(text)
    return load_run(folder)

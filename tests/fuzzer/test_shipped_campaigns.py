"""Every shipped campaign passes ``gapfuzz run FILE --check`` as a user runs it, from a folder that is not this
checkout: its seeds are selected (no catalog or run folder it needs is missing), its backends and pools
resolve, and the plan is printed. 20-50 s each on two cores: the slow set."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import gapfuzz

CAMPAIGNS = sorted((Path(__file__).resolve().parents[2] / "campaigns").glob("*.yaml"))


@pytest.mark.slow
@pytest.mark.parametrize("path", CAMPAIGNS, ids=lambda p: p.name)
def test_a_shipped_campaign_checks_from_anywhere(path, tmp_path):
    proc = gapfuzz("run", path, "--check", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert lines[0].startswith(f"{path}: valid") and any(line.startswith("total") for line in lines), proc.stdout
    seeds = next(line for line in lines if line.startswith("seeds: "))
    assert int(seeds.split()[1]) > 0, seeds

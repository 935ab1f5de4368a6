"""A scan writes one catalog row per seed, broken seeds included, and resumes."""
from __future__ import annotations

import os

import pandas as pd
import pytest

from gapfuzz.results.catalog import Catalog
from gapfuzz.seeds.scan import scan_seed
from tests.conftest import gapfuzz

pytestmark = pytest.mark.ray


@pytest.mark.slow  # about 45 s; the cap check below guards the skip path
def test_scan_records_every_seed_with_its_reason_and_resumes(tmp_path):
    os.environ["GAPFUZZ_PLUGINS"] = "tests.stacks.broken_seeds"
    try:
        out = tmp_path / "scan"
        args = ["seeds", "scan", "--filter", "broken/*", "--filter", "timm/test_resnet", "--out", out,
                "--workers", "2", "--quiet", "--timeout", "120"]
        proc = gapfuzz(*args)
        assert proc.returncode == 0, proc.stderr
        df = Catalog(out).read().to_pandas().set_index("seed_id")
        assert len(df) == 5
        assert df.loc["timm/test_resnet", "status"] == "ok" and df.loc["timm/test_resnet", "node_count"] > 10
        assert df.loc["broken/ok", "status"] == "ok"
        assert (df.loc["broken/raise", "status"], df.loc["broken/raise", "stage"]) == ("error", "build")
        assert "on purpose" in df.loc["broken/raise", "message"]
        assert df.loc["broken/segfault", "status"] == "crash"
        assert (df.loc["broken/export", "status"], df.loc["broken/export", "stage"]) == ("error", "capture")
        assert "scanned" in proc.stdout

        again = gapfuzz(*args)
        assert again.returncode == 0
        assert len(Catalog(out).read()) == 5  # nothing scanned twice
        assert len(pd.read_parquet(out / "catalog" / "rows")) == 5
    finally:
        os.environ.pop("GAPFUZZ_PLUGINS", None)


def test_seed_over_the_cap_is_skipped_with_its_size():
    row = scan_seed("timm/test_vit", max_params=10)
    assert (row.status, row.stage) == ("skipped", "budget") and row.params > 10
    ok = scan_seed("timm/test_vit")
    assert ok.status == "ok" and ok.capture_s > 0 and "aten.linear.default" in ok.ops

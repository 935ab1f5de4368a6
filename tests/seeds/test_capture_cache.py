"""The capture cache serves the same graph, tensors and hash as a fresh capture, and never a stale one."""
from __future__ import annotations

import pytest
import torch

from gapfuzz.fuzzer.generate import captured
from gapfuzz.seeds.capture import CaptureError
from gapfuzz.seeds.capture_cache import CaptureCache

SEED = "timm/test_resnet"


@pytest.fixture
def cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("GAPFUZZ_CACHE_DIR", str(tmp_path))
    return tmp_path


def test_a_hit_equals_a_fresh_capture(cache_dir):
    info, fresh = captured(SEED, None, use_cache=True)
    assert list((cache_dir / "captures").glob("*.pt")), "the capture was not written"
    info2, hit = CaptureCache().get(SEED, None)
    assert info2 == info and hit.params == fresh.params
    assert hit.variant.graph_hash == fresh.variant.graph_hash
    assert hit.variant.weight_checksum() == fresh.variant.weight_checksum()
    assert hit.variant.input_checksum() == fresh.variant.input_checksum()
    with torch.no_grad():
        assert torch.equal(hit.variant.gm(*hit.variant.inputs)[0], fresh.variant.gm(*fresh.variant.inputs)[0])


def test_the_budget_holds_on_a_hit_and_a_torn_file_is_a_miss(cache_dir):
    captured(SEED, None)
    with pytest.raises(CaptureError) as e:
        captured(SEED, 10)
    assert e.value.stage == "budget" and e.value.info["id"] == SEED
    path = CaptureCache().path(SEED)
    path.write_bytes(path.read_bytes()[:100])
    assert CaptureCache().get(SEED, None) is None


def test_a_build_failure_is_not_cached(cache_dir):
    with pytest.raises(CaptureError) as e:
        captured("timm/no_such_model", None)
    assert e.value.stage == "build"
    assert not list(cache_dir.rglob("*.pt"))

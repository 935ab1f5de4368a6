"""Single-operator seeds from OpInfo: listed from a cached index, built deterministically, and the
captured graph computes what the operator computes on the same sample."""
from __future__ import annotations

import time
from collections import Counter

import pytest
import torch
import torch.utils._pytree as pytree

from gapfuzz.seeds import SeedError, get_source
from gapfuzz.seeds.capture import capture
from gapfuzz.seeds.sources import ops


@pytest.fixture(scope="session")
def ids():
    return get_source("ops").list_ids()  # builds the index into the user cache once if missing


def test_listing_covers_operators_and_dtypes(ids):
    assert len(ids) == len(set(ids)) >= 3000
    parts = [i.split("/") for i in ids]
    assert all(len(p) == 4 and p[0] == "ops" and p[3].isdigit() for p in parts)
    assert len({p[1] for p in parts}) >= 500
    per_dtype = Counter(p[2] for p in parts)
    assert len(per_dtype) >= 6 and {"float32", "float16", "bfloat16", "int64", "bool"} <= set(per_dtype)
    per_op = Counter((p[1], p[2]) for p in parts)
    assert max(n for (op, _), n in per_op.items() if op not in ops.CONTRACTING) <= ops.SAMPLES_PER_DTYPE
    assert max(per_op.values()) <= ops.SAMPLES_PER_DTYPE + 2  # a product: one sample of each operand form more


def test_random_and_uninitialised_ops_are_not_listed(ids):
    names = {i.split("/")[1] for i in ids}
    for name in ("nn.functional.dropout", "bernoulli", "normal", "rand_like", "randint", "multinomial",
                 "empty_like", "uniform", "nn.functional.rrelu"):
        assert name in ops.op_infos() and name not in names


def test_listing_from_the_cache_is_fast(ids):
    t0 = time.perf_counter()
    assert ops.OpsSource().list_ids() == ids
    assert time.perf_counter() - t0 < 2


@pytest.mark.parametrize("seed_id", [
    "ops/add/float16/0", "ops/add/int64/0", "ops/nn.functional.conv2d/float32/0",
    "ops/eq/bfloat16/0", "ops/cat/float32/0",
])
def test_captured_graph_computes_the_operator(ids, seed_id):
    assert seed_id in ids
    built = get_source("ops").build(seed_id)
    key, dtype, index = seed_id.split("/")[1:]
    assert built.info.source == "ops" and built.info.task == "operator" and built.info.params == 0
    assert built.info.extra["op"] == key and built.info.extra["dtype"] == dtype
    assert built.info.input_spec and all(spec[2] == dtype for spec in built.info.input_spec)

    op = ops.op_infos()[key]
    sample = ops.samples(op, getattr(torch, dtype), int(index) + 1)[int(index)]
    expected = pytree.tree_leaves(op.op(sample.input, *sample.args, **sample.kwargs))
    v = capture(built).variant
    assert len(v.inputs) == len(built.args)
    with torch.no_grad():
        got = v.gm(*v.inputs)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.dtype == e.dtype and torch.equal(g, e)


def test_bool_output_and_list_input_are_kept():
    eq = get_source("ops").build("ops/eq/bfloat16/0")
    assert eq.model(*eq.args).dtype == torch.bool
    cat = get_source("ops").build("ops/cat/float32/0")
    assert len(cat.args) >= 2  # every tensor of cat's list is its own input


def test_same_id_builds_identically():
    a, b = (get_source("ops").build("ops/nn.functional.conv2d/float32/1") for _ in range(2))
    assert a.info == b.info and len(a.args) == len(b.args)
    assert all(torch.equal(x, y) for x, y in zip(a.args, b.args))
    assert a.model.constants == b.model.constants
    ca, cb = capture(a).variant, capture(b).variant
    assert ca.graph_hash == cb.graph_hash and ca.input_checksum() == cb.input_checksum()


@pytest.mark.parametrize("seed_id", ["ops/add/float16/999", "ops/no_such_op/float32/0", "ops/add"])
def test_unknown_ids_raise_one_clear_line(seed_id):
    with pytest.raises(SeedError, match=seed_id) as e:
        get_source("ops").build(seed_id)
    assert "\n" not in str(e.value)


def test_cache_dir_is_configurable(monkeypatch, tmp_path):
    monkeypatch.setenv("GAPFUZZ_CACHE_DIR", str(tmp_path))
    assert ops.index_path().parent == tmp_path and torch.__version__ in ops.index_path().name
    monkeypatch.delenv("GAPFUZZ_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert ops.index_path().parent == tmp_path / "gapfuzz"


@pytest.mark.slow
def test_index_rebuilds_identically_and_atomically(ids, monkeypatch, tmp_path):
    monkeypatch.setenv("GAPFUZZ_CACHE_DIR", str(tmp_path))
    assert list(ops.build_index()["seeds"]) == ids
    assert [p.name for p in tmp_path.iterdir()] == [ops.index_path().name]

"""Single-operator seeds from PyTorch's OpInfo database: the unit of a function-level portability
study (which share of operators does each stack support, and in which dtypes).

Seed id: ``ops/<op>/<dtype>/<sample>``. ``<op>`` is ``OpInfo.name``, plus ``.<variant_test_name>``
when the OpInfo has a variant (``ops/nn.functional.interpolate.bilinear/float32/0``); op names
hold no ``/`` and the joined names are checked to be unique. ``<dtype>`` is the torch dtype without
``torch.`` (``float16``, ``int64``, ``bool``, ``complex64``). ``<sample>`` is the sample's position in
``op.sample_inputs("cpu", dtype)`` after seeding torch's and Python's RNGs with
``stable_int("ops/<op>/<dtype>")``, so an id means the same inputs for one torch version. For an
operator whose output shape depends on values (``data_dependent``: nonzero, argwhere, masked_select,
unique, ...), the samples with a tensor of rank 2 or more that is not all zeros come first, each
group in the generator's order: the order of its result over several dimensions is part of what a
stack must get right, and the generator's first samples of nonzero or unique are scalars (or zeros),
so ``ops/nonzero/float32/0`` is a matrix with some elements nonzero.

Finding which samples exist needs the sample generators and two eager runs of each sample (to
drop samples that fail on the CPU, return anything but dense tensors, or change with the RNG
state; ops random by name are dropped whole), so the listing is built once and cached as JSON per
torch version in ``$GAPFUZZ_CACHE_DIR``, else ``$XDG_CACHE_HOME/gapfuzz``, else ``~/.cache/gapfuzz``.
``extra["aten"]`` lists the ATen ops the sample dispatched in eager mode (after composite
decomposition, so ``conv2d`` shows as ``aten.convolution.default``).

Sizes (``ops/sum/float32/0@1025``), widths (``ops/mm/float32/0@w2048``) and lengths along the
operator's own dimension (``ops/softmax/float32/1@d4097``, ``along`` in the index) are rebuilt by ``op_sizes``;
an integer or boolean reduction's seed is built with its reduced dimension 17 long (``op_reductions``).
"""
from __future__ import annotations

import itertools
import json
import logging
import random
import re
import time
import warnings
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from unittest import mock

import torch
import torch.utils._pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from gapfuzz.core.files import write_whole
from gapfuzz.core.ids import SeedId
from gapfuzz.core.seeding import stable_int

from ..registry import SeedError, SeedSource, register_source
from ..spec import BuiltSeed, SeedInfo, cache_dir, input_spec_of
from .op_products import CONTRACTING, product_form
from .op_reductions import lengthened, reduces
from .op_samples import flatten_sample, sample_tensors
from .op_sizes import along, main_dimension, rebuilt

log = logging.getLogger("gapfuzz.seeds")

SAMPLES_PER_DTYPE = 2  # samples exposed per (op, dtype): keeps the listing in the thousands
SCAN_LIMIT = 8  # generator positions looked at per (op, dtype) to find them
PRODUCT_SCAN_LIMIT = 16  # for a product (``op_products``): past its first samples, one of each operand form
INDEX_FORMAT = 5  # bump when the id scheme or the filters change

# Outputs that depend on RNG state or uninitialised memory cannot be compared across stacks.
_RANDOM_OPS = re.compile(
    r"bernoulli|cauchy|exponential|geometric|log_normal|multinomial|normal(\..*)?|uniform|poisson"
    r"|rand(int|n)?(_like)?|randperm|nn\.functional\.(\w*dropout\w*|rrelu)|(new_)?empty\w*")


def op_key(op) -> str:
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


@cache
def op_infos() -> dict:
    """OpInfos by key; imported lazily because common_methods_invocations takes seconds."""
    try:
        from torch.testing._internal.common_methods_invocations import op_db
    except ModuleNotFoundError as e:
        raise SeedError(f"operator seeds need torch's OpInfo database, which needs {e.name!r}: "
                        f"pip install {e.name}") from e

    ops = {op_key(op): op for op in op_db}
    assert len(ops) == len(op_db), "OpInfo keys are not unique"
    return ops


@contextmanager
def _no_test_lookup():
    """OpInfo looks for the calling unittest method with inspect.stack(), which costs from 1 ms to
    over 40 ms a call depending on the caller's stack (it dominated the index build); we have none."""
    from torch.testing._internal import common_utils
    from torch.testing._internal.opinfo import core

    with mock.patch.object(common_utils, "extract_test_fn", lambda: None), \
            mock.patch.object(core, "extract_test_fn", lambda: None):
        yield


def samples(op, dtype: torch.dtype, count: int, rank_first: bool = False) -> list:
    """The first ``count`` samples, drawn from seeded RNGs so that every run draws the same; with
    ``rank_first``, the ``_matrix`` ones first (a stable sort: every sample is drawn).
    OpInfo's own reseeding before each sample (``set_seed``) is off: it costs a CUDA-lazy-init
    stack trace per sample (as ``torch.manual_seed`` does), and our seed fixes the whole sequence."""
    seed = stable_int(f"ops/{op_key(op)}/{dtype_name(dtype)}")
    torch.random.default_generator.manual_seed(seed)  # the CPU generator is all that samples use
    random.seed(seed)
    with _no_test_lookup():
        drawn = op.sample_inputs("cpu", dtype, requires_grad=False, set_seed=False)
        if rank_first:
            drawn = sorted(drawn, key=lambda s: not _matrix(s))
        return list(itertools.islice(drawn, count))


def _matrix(sample) -> bool:
    """Whether a sample has a tensor of rank >= 2 that is not all zeros: a data-dependent result
    (rows, selected values, counts) with an order over several dimensions."""
    return any(t.dim() >= 2 and bool(t.ne(0).any()) for t in sample_tensors(sample))


def data_dependent(aten_ops: list[str]) -> bool:
    """Whether one of these ATen ops (``aten.nonzero.default``) has an output shape that depends on
    values (tagged ``dynamic_output_shape``), or is ``nonzero_static`` (nonzero's rows, padded)."""
    def tagged(name: str) -> bool:
        _, packet, overload = name.split(".")
        op = getattr(getattr(torch.ops.aten, packet, None), overload, None)
        return op is not None and torch.Tag.dynamic_output_shape in op.tags

    return any(name == "aten.nonzero_static.default" or tagged(name) for name in aten_ops)


def unsupported(sample) -> str | None:
    """Why a sample cannot become ``forward(*tensors)`` around the op, or None."""
    if "out" in sample.kwargs:
        return "out= argument"
    leaves, _ = flatten_sample(sample)
    tensors = [x for x in leaves if isinstance(x, torch.Tensor)]
    if not tensors:
        return "no tensor input"
    for t in tensors:
        if type(t) is not torch.Tensor or t.layout != torch.strided or t.is_quantized or t.is_nested:
            return "sparse, nested, quantized or subclassed tensor"
        if t.device.type != "cpu":
            return "tensor not on the CPU"
    if any(isinstance(x, (torch.Generator, torch.Storage)) for x in leaves):
        return "generator or storage argument"
    return None


class OpCall(torch.nn.Module):
    """Calls one operator on its sample: tensor leaves come in as ``forward``'s positional
    arguments (pytree order), every other leaf is held as a constant."""

    def __init__(self, fn, sample):
        super().__init__()
        leaves, self.spec = flatten_sample(sample)
        self.fn = fn
        self.tensor_slots = [i for i, x in enumerate(leaves) if isinstance(x, torch.Tensor)]
        self.constants = [None if isinstance(x, torch.Tensor) else x for x in leaves]

    def forward(self, *tensors):
        leaves = list(self.constants)
        for slot, t in zip(self.tensor_slots, tensors, strict=True):
            leaves[slot] = t
        inp, args, kwargs = pytree.tree_unflatten(leaves, self.spec)
        return self.fn(inp, *args, **kwargs)


class _AtenRecorder(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.add(func)
        return func(*args, **(kwargs or {}))


def _close(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Loose on purpose: LAPACK kernels differ in the last bits from run to run, random ops grossly."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    wide = torch.complex128 if a.is_complex() else torch.float64
    return torch.allclose(a.to(wide), b.to(wide), rtol=1e-3, atol=1e-3, equal_nan=True)


def dispatched_ops(op, sample) -> list[str] | None:
    """The ATen ops a sample dispatches, or None when it fails on the CPU, returns anything but
    dense tensors, or depends on the RNG state. OpInfo pins the seed of some ops with
    ``torch.manual_seed(42)`` (``wrapper_set_seed``), so that is disabled while they run."""
    model, inputs, runs = OpCall(op.op, sample), sample_tensors(sample), []
    try:
        with _AtenRecorder() as rec, torch.no_grad(), mock.patch.object(torch, "manual_seed", lambda seed: None):
            for rng_seed in (0, 1):
                torch.random.default_generator.manual_seed(rng_seed)
                runs.append(pytree.tree_flatten(model(*inputs)))
        (outs, spec), (again, spec_again) = runs
        if not outs or not all(isinstance(o, torch.Tensor) and o.layout == torch.strided for o in outs):
            return None
        if spec != spec_again or not all(_close(a, b) for a, b in zip(outs, again)):
            return None
    except Exception:  # noqa: BLE001 - a sample the CPU eager kernel rejects is simply not exposed
        return None
    return sorted(str(f) for f in rec.ops)


def index_ops(op, sizable: set[str] | None = None, rank_first: set[str] | None = None,
              along_ids: set[str] | None = None) -> dict[str, list[str]]:
    """Seed ids of one OpInfo (with the ATen ops each dispatches); none for random ops. Ids whose
    sample has a main dimension go into ``sizable``, those with a dimension of the operator's own
    (``op_sizes.along``) into ``along_ids``; a data-dependent operator is scanned again with
    its samples rank-first, and its key goes into ``rank_first``."""
    key = op_key(op)
    if op.op is None or _RANDOM_OPS.fullmatch(key) or re.search(r"[^_]_$", op.name):
        return {}
    seeds, sized, own = _scan(op, key, False)
    if any(data_dependent(aten) for aten in seeds.values()):
        seeds, sized, own = _scan(op, key, True)
        if rank_first is not None:
            rank_first.add(key)
    if sizable is not None:
        sizable.update(sized)
    if along_ids is not None:
        along_ids.update(own)
    return seeds


def _scan(op, key: str, rank_first: bool) -> tuple[dict[str, list[str]], set[str], set[str]]:
    """The seeds of one OpInfo in every dtype, those of them with a main dimension, and those with a
    dimension of the operator's own besides."""
    seeds, sizable, own = {}, set(), set()
    for dtype in sorted(op.supported_dtypes("cpu"), key=dtype_name):
        try:
            drawn = samples(op, dtype, PRODUCT_SCAN_LIMIT if key in CONTRACTING else SCAN_LIMIT, rank_first)
        except Exception:  # noqa: BLE001 - a generator that fails for a dtype exposes nothing
            continue
        found, forms = 0, set()
        for i, sample in enumerate(drawn):
            form = product_form(key, sample)
            if found >= SAMPLES_PER_DTYPE and (form is None or form in forms):
                continue
            if unsupported(sample):
                continue
            aten = dispatched_ops(op, sample)
            if aten is not None:
                seed_id = f"ops/{key}/{dtype_name(dtype)}/{i}"
                seeds[seed_id] = aten
                if main_dimension(sample) is not None:
                    sizable.add(seed_id)
                    if along(op, key, sample):
                        own.add(seed_id)
                found += 1
                forms.add(form)
    return seeds, sizable, own


def index_path() -> Path:
    return cache_dir() / f"ops-index-v{INDEX_FORMAT}-{torch.__version__}.json"


def build_index() -> dict:
    """Scans every OpInfo (10-30 s on one core) and writes the index atomically; returns it."""
    t0 = time.perf_counter()
    seeds, sizable, rank_first, own, threads = {}, set(), set(), set(), torch.get_num_threads()
    torch.set_num_threads(1)  # tiny tensors: threads only add overhead, and the host may be shared
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for op in op_infos().values():
                seeds.update(index_ops(op, sizable, rank_first, own))
    finally:
        torch.set_num_threads(threads)
    index = {"torch": torch.__version__, "format": INDEX_FORMAT, "build_s": round(time.perf_counter() - t0, 1),
             "seeds": seeds, "sizable": sorted(sizable), "rank_first": sorted(rank_first),
             "along": sorted(own)}
    path = index_path()
    try:
        write_whole(path, lambda f: f.write(json.dumps(index).encode()))
    except OSError as e:  # a cache that cannot be written is only not kept: this process uses it as built
        log.warning("ops index %s: cannot be written (%s); set GAPFUZZ_CACHE_DIR to a writable folder to keep it",
                    path, e.strerror or e)
    log.info("ops index: %d seeds in %.0fs -> %s", len(seeds), index["build_s"], path)
    return index


def load_index() -> dict:
    """The cached index (``seeds``: id -> ATen ops; ``sizable``, ``along``: ids; ``rank_first``: op keys),
    built when missing or unreadable."""
    try:
        index = json.loads(index_path().read_text())
        if isinstance(index["seeds"], dict) and isinstance(index["sizable"], list) and \
                isinstance(index["rank_first"], list) and isinstance(index["along"], list):
            return index
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return build_index()


@register_source
class OpsSource(SeedSource):
    name = "ops"
    prefix = "ops"

    def __init__(self):
        self._seeds: dict[str, list[str]] | None = None
        self._sizable: set[str] = set()
        self._rank_first: set[str] = set()  # op keys whose sample positions count rank >= 2 first
        self._along: set[str] = set()  # ids with a dimension of the operator's own besides the main one

    def _index(self) -> dict[str, list[str]]:
        if self._seeds is None:
            index = load_index()
            self._seeds, self._sizable = index["seeds"], set(index["sizable"])
            self._rank_first, self._along = set(index["rank_first"]), set(index["along"])
        return self._seeds

    def list_ids(self) -> list[str]:
        return list(self._index())

    def size_points(self, seed_id: str, dimension_sizes: list[int]) -> list[int]:
        self._index()
        return list(dimension_sizes) if seed_id in self._sizable else []

    def width_points(self, seed_id: str, widths: list[int]) -> list[int]:
        self._index()
        return list(widths) if seed_id in self._sizable else []

    def integer(self, seed_id: str) -> bool:
        dtype = getattr(torch, SeedId.parse(seed_id).name.rsplit("/", 2)[1], None)
        return isinstance(dtype, torch.dtype) and not (dtype.is_floating_point or dtype.is_complex)

    def contracts(self, seed_id: str) -> bool:
        return SeedId.parse(seed_id).name.rsplit("/", 2)[0] in CONTRACTING

    def along_points(self, seed_id: str, dimension_sizes: list[int]) -> list[int]:
        self._index()
        return list(dimension_sizes) if seed_id in self._along else []

    def build(self, seed_id: str) -> BuiltSeed:
        sized = SeedId.parse(seed_id)
        aten = self._index().get(sized.base)
        if aten is None:
            raise SeedError(f"unknown operator seed {sized.base!r} (ids look like ops/add/float16/0)")
        key, dtype, index = sized.name.rsplit("/", 2)
        op, index = op_infos()[key], int(index)
        sample = samples(op, getattr(torch, dtype), index + 1, key in self._rank_first)[index]
        positions, ops_of = None, lambda s: dispatched_ops(op, s)
        if sized.rebuilt:
            sample, aten, positions = rebuilt(op, key, sample, sized, seed_id, ops_of)
        elif self.integer(seed_id) and reduces(aten):
            sample, aten = lengthened(op, key, sample, seed_id, ops_of) or (sample, aten)
        args = sample_tensors(sample)
        info = SeedInfo(
            id=seed_id, source=self.name, family=op.name, task="operator", output_kind="tensor",
            input_spec=input_spec_of(args, {}), params=0,
            extra={"op": key, "dtype": dtype, "sample": index, "aten": aten, "size": sized.size,
                   "width": sized.width, "along": sized.along,
                   "along_dims": [list(p) for p in positions] if positions else None},
        )
        return BuiltSeed(info, OpCall(op.op, sample), args)


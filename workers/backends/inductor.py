"""torch.compile with Inductor: the compiled path users deploy with.

``dynamic: true`` compiles with ``dynamic=True``: every input size is traced as a symbol (what
``torch._dynamo.mark_dynamic`` does for one size), so the resize probes (``workers.run.probes``) run the
code compiled at the example's sizes at other sizes, without a new compile; ``symbolic_sizes`` reads
whether a compile held symbolic sizes.
"""
from __future__ import annotations

import ast
import os
import re
import shutil
import sys
import sysconfig
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

import torch

from gapfuzz.workers.backends.eager import to_device
from gapfuzz.workers.backends.inductor_options import config_type, inductor_config_keys
from gapfuzz.workers.run.backend import Backend, OptionType, one_of, typed
from gapfuzz.workers.run.registry import register_backend


def prepare_inductor(gm, example_inputs, device, options):
    """``mode`` (a torch.compile mode), ``dynamic`` (compile for dynamic shapes: a separate code
    generation path, with symbolic sizes; the run then calls it at other sizes too) or Inductor config
    keys; compiles lazily, on the first call."""
    options = dict(options)
    mode, dynamic = options.pop("mode", None), bool(options.pop("dynamic", False))
    kwargs = {"mode": mode} if mode else {"options": options or None}
    compiled = torch.compile(to_device(gm, device), backend="inductor", dynamic=dynamic, fullgraph=False, **kwargs)
    return with_dynamic_output_shapes(compiled), {}


# Dynamo otherwise breaks the graph at an operator whose output shape depends on values (nonzero,
# masked_select, unique, boolean indexing) or at ``.item()``, and eager runs it: the stack under test
# would never see it. With these, it is traced with unbacked sizes and compiled with the rest.
DYNAMIC_OUTPUT_CONFIG = {"capture_dynamic_output_shape_ops": True, "capture_scalar_outputs": True}


def with_dynamic_output_shapes(compiled):
    """``compiled``, each call under ``DYNAMIC_OUTPUT_CONFIG``: it compiles lazily (first call, and
    any recompilation), so the config must hold while it is called, not while it is made."""
    def call(*inputs):
        with torch._dynamo.config.patch(**DYNAMIC_OUTPUT_CONFIG):
            return compiled(*inputs)
    return call


_BACKED = re.compile(r"\bs\d+\b")  # a backed size symbol (an input's size); u0 is a data-dependent output's


@contextmanager
def symbolic_sizes(found: dict):
    """On exit, ``found["symbolic"]``: whether a graph Dynamo compiled inside had a symbolic size (an input
    size traced as a symbol, not a constant), from Dynamo's compilation metrics; left unset when Dynamo
    compiled nothing (a stack that does not compile through it)."""
    from torch._dynamo.utils import clear_compilation_metrics, get_compilation_metrics

    clear_compilation_metrics()
    try:
        yield found
    finally:
        sizes = [dims for m in get_compilation_metrics() for dims in _node_sizes(m.graph_node_shapes)]
        if sizes:
            found["symbolic"] = any(isinstance(d, str) and _BACKED.search(d) for dims in sizes for d in dims)


def _node_sizes(text: str | None) -> list:
    """Each node's sizes in a compilation metric's ``graph_node_shapes`` (a dict's repr: name -> ints and
    symbols' names); none where it is empty or not that."""
    try:
        graph = ast.literal_eval(text) if text else {}
    except (ValueError, SyntaxError):
        return []
    return [dims for dims in graph.values() if isinstance(dims, list)] if isinstance(graph, dict) else []


@register_backend
class Inductor(Backend):
    """Options: ``mode`` (torch.compile mode), ``dynamic: true`` and any Inductor config key, e.g. ``freezing``."""

    name = "inductor"
    distribution = "torch"  # its releases are torch's
    devices = ("cpu", "cuda", "xpu")
    trains = True  # AOTAutograd's joint graph, partitioned, forward and backward compiled
    compile_error_modules = ("torch._dynamo", "torch._inductor")  # compiles lazily, on the first call
    any_strides = False
    prepare_fn = staticmethod(prepare_inductor)

    @classmethod
    def device_unavailable_reason(cls, device: str) -> str | None:
        return (cpp_toolchain_problem() if device == "cpu" else None) or super().device_unavailable_reason(device)

    @classmethod
    def known_options(cls):
        return ["mode", "dynamic", *inductor_config_keys()]

    @classmethod
    def option_type(cls, key: str) -> OptionType | None:
        if key == "mode":
            return compile_modes()
        return typed(bool, default=False) if key == "dynamic" else config_type(key)


@lru_cache(maxsize=1)
def cpp_toolchain_problem() -> str | None:
    """Why Inductor cannot build C++ here (the compiler its ``cpp.cxx`` names by default, ``$CXX`` or g++, and
    the Python headers): without them every CPU compile fails, and those failures are not Inductor's."""
    cxx = os.environ.get("CXX") or ("clang++" if sys.platform == "darwin" else "g++")
    found = shutil.which(cxx.split()[0] if cxx.strip() else "g++")
    if found is None:
        return f"no C++ compiler ({cxx} is not on PATH: install g++, e.g. apt-get install g++)"
    if not (Path(sysconfig.get_paths()["include"]) / "Python.h").is_file():
        return "no Python headers for its C++ (install python3-dev, or your Python's development package)"
    return openmp_problem(found)


def openmp_problem(compiler: str) -> str | None:
    """Why GCC cannot build Inductor's OpenMP C++ (its ``omp.h``, its ``libgomp``), asked of the compiler where
    it looks (``-print-file-name``); None when it can, or when the compiler is not GCC (clang finds libomp its
    own way)."""
    import subprocess

    def where(name: str) -> str:
        try:
            return subprocess.run([compiler, f"-print-file-name={name}"], capture_output=True, text=True,
                                  timeout=30).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""
    if "g++" not in Path(compiler).name or not where("libgcc.a").startswith("/"):
        return None
    missing = [name for name in ("include/omp.h", "libgomp.so") if not where(name).startswith("/")]
    return f"no OpenMP for its C++ ({', '.join(missing)} not found by {compiler}: install its libgcc-N-dev, " \
           f"e.g. apt-get install libgcc-$(gcc -dumpversion)-dev)" if missing else None


@lru_cache(maxsize=1)
def compile_modes() -> OptionType:
    """torch.compile's modes (``max-autotune``, ...)."""
    import torch._inductor

    return one_of(*torch._inductor.list_mode_options(), default=None)


def prepare_aot_eager(gm, example_inputs, device, options):
    """AOTAutograd without code generation (``torch.compile(backend="aot_eager")``): Dynamo, the
    functionalised joint graph and its partition, run by eager kernels. ``dynamic`` as for Inductor."""
    options = dict(options)
    compiled = torch.compile(to_device(gm, device), backend="aot_eager", dynamic=bool(options.pop("dynamic", False)),
                             fullgraph=False)
    return with_dynamic_output_shapes(compiled), {}


@register_backend
class AotEager(Backend):
    """The first step of Inductor's path, alone: a finding it shows is AOTAutograd's or a
    decomposition's, not code generation's. Option: ``dynamic: true``."""

    name = "aot-eager"
    distribution = "torch"  # its releases are torch's
    devices = ("cpu", "cuda", "xpu")
    trains = True
    compile_error_modules = ("torch._dynamo", "torch._functorch")
    any_strides = False
    prepare_fn = staticmethod(prepare_aot_eager)

    @classmethod
    def known_options(cls):
        return ["dynamic"]

    option_types = {"dynamic": typed(bool, default=False)}

"""What each Inductor config option takes, from torch's own config metadata.

``torch._inductor.config`` declares every option with its default and its type (``bool``, ``int | None``,
``Literal['cpp', 'triton']``, ``list[str]``, a callable); a campaign's value is checked against that type
before a compile, so ``freezing: banana`` is one line at load, not a finding. An option that takes free
text, a collection of it, or a Python object can name a program (``cpp.cxx``), a library
(``aot_inductor.custom_op_libs``), a path (``trace.debug_dir``), compiler flags (``cpp.march``) or a hook
(``post_grad_custom_post_pass``): it ``runs``, and is refused unless the command line allows it, except
the few below whose text only picks among Inductor's own names.
"""
from __future__ import annotations

import types
import typing
from functools import lru_cache

from gapfuzz.workers.run.backend import NO_DEFAULT, OptionType, is_integer

# free-text options whose value Inductor only matches against names of its own (backends, passes, ops)
NAMES_ONLY = frozenset({
    "max_autotune_gemm_backends", "max_autotune_conv_backends", "max_autotune_conv_bwd_weight_backends",
    "max_autotune_conv_bwd_input_backends", "_conv_default_backends", "disabled_passes", "add_pre_grad_passes",
    "remove_pre_grad_passes", "layout_opt_default", "_partitioned_scatter_default", "estimate_op_runtime",
    "worker_start_method", "custom_should_partition_ops", "cudagraph_unsafe_unbacked_ops",
    "cpp.inject_relu_bug_TESTING_ONLY", "cpp.inject_log1p_bug_TESTING_ONLY", "triton.inject_relu_bug_TESTING_ONLY"})
# what torch declares narrower than it reads: a compiler is a name or a list of names to search
DECLARED = {"cpp.cxx": str | list[str | None]}
WORDS = {bool: "a boolean", int: "a 64-bit integer", float: "a number", str: "a string", type(None): "null"}
PLURAL = {bool: "booleans", int: "integers", float: "numbers", str: "strings"}


@lru_cache(maxsize=1)
def inductor_config_keys() -> tuple[str, ...]:
    """Every Inductor config key (``freezing``, ``cpp.threads``, ...): what ``options`` may set."""
    import torch._inductor.config as config

    return tuple(sorted(k for k in config.get_config_copy() if k != "TYPE_CHECKING"))  # an import guard, not a key


@lru_cache(maxsize=None)
def config_type(key: str) -> OptionType | None:
    """What Inductor config option ``key`` takes; None for a key that is not one."""
    import torch._inductor.config as config

    entry = getattr(config, "_config", {}).get(key)
    if entry is None:
        return None
    default = entry.default if type(entry.default) is not object else NO_DEFAULT
    kind = DECLARED.get(key, getattr(entry, "value_type", None))
    if kind is None or kind is type(None) and default is None:  # undeclared: its default's type, or any scalar
        kind = type(default) if default is not None and default is not NO_DEFAULT else bool | int | float | str | None
    if kind in (list, tuple) and default and len({type(v) for v in default}) == 1:  # a bare list: as its default's
        kind = list[type(next(iter(default)))]
    runs = key not in NAMES_ONLY and not key.endswith("_regex") and takes_text(kind)
    return OptionType(describe(kind), lambda v: fits(v, kind), default, runs)


def _parts(kind) -> tuple:
    origin = typing.get_origin(kind)
    return typing.get_args(kind) if origin in (typing.Union, types.UnionType) else (kind,)


def fits(value, kind) -> bool:
    """Whether a campaign file's value (YAML: a list stands for a tuple) is of the declared type."""
    if kind is typing.Any:
        return True
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (typing.Union, types.UnionType):
        return any(fits(value, a) for a in args)
    if origin is typing.Literal:
        return any(value == a and type(value) is type(a) for a in args)
    if kind is type(None) or kind is None:
        return value is None
    if kind is bool:
        return isinstance(value, bool)
    if kind is int:
        return is_integer(value)
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind is str:
        return isinstance(value, str)
    if kind in (list, tuple) or origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            return False
        if origin is tuple and len(args) > 1 and args[1] is not Ellipsis:  # fixed length (one: torch means any)
            return len(value) == len(args) and all(fits(v, a) for v, a in zip(value, args))
        return not args or all(fits(v, args[0]) for v in value)
    if kind is dict or origin is dict:
        return isinstance(value, dict) and (not args or all(fits(k, args[0]) and fits(v, args[1])
                                                            for k, v in value.items()))
    return False  # a Python object (a callable, a pass, a class): a campaign file cannot give one


def takes_text(kind) -> bool:
    """Whether a value of ``kind`` can be free text, a collection, or a Python object."""
    if typing.get_origin(kind) is typing.Literal:
        return False
    if typing.get_origin(kind) in (typing.Union, types.UnionType):
        return any(takes_text(a) for a in typing.get_args(kind))
    if kind in (bool, int, float, type(None), None):
        return False
    origin = typing.get_origin(kind)
    if origin in (list, tuple) and typing.get_args(kind):
        return any(takes_text(a) for a in typing.get_args(kind) if a is not Ellipsis)
    return True  # str, dict, a bare list, a callable, a class


def describe(kind) -> str:
    """A type in words: ``an integer or null``, ``one of 'cpp', 'triton'``, ``a list of strings``."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin is typing.Literal:
        return f"one of {', '.join(map(repr, args))}"
    if origin in (typing.Union, types.UnionType):
        return " or ".join(dict.fromkeys(describe(a) for a in args))
    if kind in WORDS:
        return WORDS[kind]
    if kind in (list, tuple) or origin in (list, tuple):
        inner = [a for a in args if a is not Ellipsis]
        if origin is tuple and len(inner) > 1 and len(args) == len(inner):
            return f"a list of {len(inner)} values"
        return f"a list of {PLURAL.get(inner[0], 'values')}" if inner else "a list"
    if kind is dict or origin is dict:
        return "a mapping"
    return "a value set in Python (a campaign file cannot give it)"

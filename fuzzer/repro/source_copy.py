"""Copy functions and classes, with everything of gapfuzz's they use, into a stand-alone script.

A reproducer runs the backend and judges its outputs with the very code the campaign used: the
backend's ``prepare_fn`` and the comparison functions are copied verbatim, and so is every
function, class and constant of gapfuzz's own packages that their source names. Modules they
name (``torch``, ``np``) become imports, as do functions and classes of other packages; names
that are not module globals (builtins, locals) are left alone. Definitions come out in
dependency order, so a class body that uses a constant finds it defined.
"""
from __future__ import annotations

import ast
import inspect
import math
import sys
import textwrap

OWN = "gapfuzz"  # the package whose code is copied, not imported


class CopyError(RuntimeError):
    """Something a reproducer needs cannot be written as source (a fuzzer bug: raised loudly)."""


def _own(obj) -> bool:
    module = obj.__name__ if inspect.ismodule(obj) else getattr(obj, "__module__", "")
    return (module or "").split(".")[0] == OWN


def _loaded_names(source: str) -> set[str]:
    return {n.id for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


class SourceCopy:
    """Collects definitions; ``text()`` gives the imports and definitions, in dependency order."""

    def __init__(self, provided: dict[str, str] | None = None, separator: str = "\n\n",
                 stubs: dict[str, str] | None = None):
        self.imports: dict[str, str] = {}  # name -> import line
        self.definitions: dict[str, str] = dict(provided or {})  # name -> source, dependencies first
        self.stubs = dict(stubs or {})  # name -> the source written in its place, only if the copied code uses it
        self._visiting: set[str] = set()
        self.separator = separator  # between definitions: blank lines, less one

    def add(self, obj, name: str | None = None) -> str:
        """Copy ``obj`` (a function or class of gapfuzz's) and what it needs; returns its name."""
        obj = inspect.unwrap(obj)
        name = name or obj.__name__
        if name in self.definitions or name in self._visiting:
            return name
        self._visiting.add(name)
        source = textwrap.dedent(inspect.getsource(obj)).rstrip() + "\n"
        scope = vars(sys.modules[obj.__module__])
        for used in sorted(_loaded_names(source) - {name}):
            if used in scope and used not in self.imports:
                self._need(used, scope[used])
        self.definitions[name] = source
        self._visiting.discard(name)
        return name

    def _need(self, name: str, value) -> None:
        if name in self.definitions or name in self._visiting:
            return
        if name in self.stubs:
            self.definitions[name] = self.stubs[name]
            return
        if inspect.ismodule(value) and _own(value):
            raise CopyError(f"{name!r} is a module of gapfuzz's: import the names the copied code uses from it")
        if inspect.ismodule(value):
            self.imports[name] = f"import {value.__name__}" + (f" as {name}" if name != value.__name__ else "")
        elif (inspect.isfunction(value) or inspect.isclass(value)) and _own(value):
            self.add(value, name)
        elif inspect.isfunction(value) or inspect.isclass(value) or inspect.isbuiltin(value):
            self.imports[name] = f"from {value.__module__} import {value.__qualname__}" + (
                f" as {name}" if name != value.__qualname__ else "")
        elif callable(value) and not _own(value):
            raise CopyError(f"cannot copy {name!r} ({type(value).__name__}) into a stand-alone script")
        else:
            self.constant(name, value)

    def constant(self, name: str, value) -> None:
        """``name = repr(value)``, checked to read back as the same value."""
        import torch

        text = repr(value)
        try:
            same = eval(text, {"torch": torch, "inf": math.inf, "nan": math.nan}) == value  # noqa: S307 - our own repr
        except Exception:  # noqa: BLE001
            same = False
        if not same:
            raise CopyError(f"constant {name!r} does not read back from its repr {text[:80]!r}")
        self.definitions[name] = f"{name} = {text}\n"

    def text(self, have: tuple[str, ...] = (), with_imports: bool = True) -> str:
        """The copied source; ``have``: import lines the script has already (``with_imports=False``:
        the script places them itself, ``import_block``)."""
        imports = "\n".join(sorted(set(self.imports.values()) - set(have))) if with_imports else ""
        return (imports + "\n" + self.separator if imports else "") + self.separator.join(self.definitions.values())

    def import_block(self, own: tuple[str, ...] = ()) -> str:
        """The script's import lines and the copied code's, the standard library's first (PEP 8)."""
        lines = set(own) | set(self.imports.values())
        std = sorted(ln for ln in lines if ln.split()[1].split(".")[0] in sys.stdlib_module_names)
        return "\n".join(std) + "\n\n" + "\n".join(sorted(lines - set(std)))

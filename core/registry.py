"""One kind of registry for every kind of plug-in: seed sources, mutators and backends.

As in timm's ``_registry``: a plug-in class registers itself with a decorator
(``@SOURCES.register``), is listed with a glob, and is looked up by name, with "did you mean"
for a typo. Built-in plug-ins are modules of one package, imported on first use; others come
from the modules named in ``GAPFUZZ_PLUGINS`` (comma-separated, imported once per process; the
variable reaches Ray workers and sandboxes, so no packaging is needed to try one) and from the
entry-point group ``gapfuzz.<kind>`` of installed packages.
"""
from __future__ import annotations

import difflib
import fnmatch
import importlib
import logging
import os
from typing import Callable, Generic, Iterator, TypeVar

log = logging.getLogger("gapfuzz.core")
T = TypeVar("T")

_plugins_imported = False


class PluginError(LookupError):
    """A plug-in module that cannot be imported (bad input: one clear line)."""


def import_module(name: str, what: str):
    """``importlib.import_module``, with anything the module raises as one ``PluginError`` line."""
    try:
        return importlib.import_module(name)
    except Exception as e:  # noqa: BLE001 - a plug-in's own failure: SyntaxError, ImportError, anything
        detail = " ".join(str(e).split())[:300]
        raise PluginError(f"{what}: module {name!r} cannot be imported: {type(e).__name__}: {detail}") from None


def import_plugins() -> None:
    """Import the modules named in GAPFUZZ_PLUGINS once per process."""
    global _plugins_imported
    if _plugins_imported:
        return
    _plugins_imported = True
    for name in filter(None, (m.strip() for m in os.environ.get("GAPFUZZ_PLUGINS", "").split(","))):
        import_module(name, "GAPFUZZ_PLUGINS")


def did_you_mean(name: str, known: list[str]) -> str:
    """`` (did you mean 'x'?)`` or `` (known: a, b, c)``."""
    hint = difflib.get_close_matches(name, known, n=1)
    if hint:
        return f" (did you mean {hint[0]!r}?)"
    shown = sorted(k for k in known if not k.startswith("_")) or sorted(known)
    more = f", and {len(shown) - 12} more" if len(shown) > 12 else ""
    return f" (known: {', '.join(shown[:12])}{more})"


class Registry(Generic[T]):
    """Named plug-in classes of one kind; ``error`` is the exception a bad name raises."""

    def __init__(self, kind: str, package: str, builtin: tuple[str, ...], entry_points: str,
                 error: type[Exception] = LookupError, check: Callable[[type], None] | None = None,
                 adapt: Callable[[type], type] | None = None):
        self.kind, self.package, self.builtin, self.group = kind, package, builtin, entry_points
        self.error, self.check, self.adapt = error, check, adapt
        self._table: dict[str, type[T]] = {}
        self._stored: dict[type, type[T]] = {}  # a class as given -> as stored (adapted)
        self._loaded = False

    def register(self, cls: type) -> type:
        """Class decorator: add ``cls`` under ``cls.name``; returns it unchanged."""
        self.add(cls)
        return cls

    def add(self, cls: type) -> type[T]:
        """Add ``cls`` (adapted, when the registry adapts) and return what is stored."""
        if not getattr(cls, "name", ""):
            raise self.error(f"{self.kind} class {getattr(cls, '__qualname__', cls)!r} has no name")
        if self.check:
            self.check(cls)
        stored = self._stored.get(cls)
        if stored is None or self._table.get(cls.name) is not stored:
            stored = self.adapt(cls) if self.adapt else cls
            self._stored[cls] = stored
            self._table[cls.name] = stored
        return stored

    def load(self) -> None:
        """Import the built-in plug-ins, GAPFUZZ_PLUGINS and the entry points, once."""
        if self._loaded:
            return
        self._loaded = True
        for mod in self.builtin:
            importlib.import_module(f"{self.package}.{mod}")
        import_plugins()
        from importlib.metadata import entry_points

        for ep in entry_points(group=self.group):
            try:
                self.register(ep.load())
            except Exception as e:  # noqa: BLE001 - a broken plug-in must not hide the others
                log.warning("%s entry point %s failed to load: %s", self.kind, ep.name, e)

    def get(self, name: str) -> type[T]:
        self.load()
        if name not in self._table:
            raise self.error(f"unknown {self.kind} {name!r}{did_you_mean(name, list(self._table))}")
        return self._table[name]

    def names(self, pattern: str | None = None) -> list[str]:
        self.load()
        return sorted(n for n in self._table if pattern is None or fnmatch.fnmatchcase(n, pattern))

    def __contains__(self, name: str) -> bool:
        self.load()
        return name in self._table

    def __iter__(self) -> Iterator[tuple[str, type[T]]]:
        self.load()
        return iter(sorted(self._table.items()))

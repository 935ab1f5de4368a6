"""The identifiers records carry, as value types: each has one parser and one string form.

A record holds its identifiers as strings (they are Parquet columns and cluster keys); everything
that takes one apart goes through ``parse`` here, so that a form is defined once:

- ``SeedId``: ``source/name``, rebuilt at a size ``@<n>``, a width ``@w<n>`` or a length along the
  operator's dimension ``@d<n>``.
- ``VariantId``: ``<seed id>#<index>``, ``:train`` appended for a training variant.
- ``BackendName``: ``stack@device``.
- ``CulpritName``: ``backend:subsystem[:pass]``, the part of a bug key bisection names.
"""
from __future__ import annotations

from dataclasses import dataclass


class IdError(ValueError):
    """An identifier that is not of its form."""


SIZE_MARK, WIDTH_MARK, ALONG_MARK = "@", "w", "d"


@dataclass(frozen=True)
class SeedId:
    """A seed id split into its base and the size (``@<n>``), width (``@w<n>``) or length along the
    operator's own dimension (``@d<n>``) it is rebuilt at."""

    base: str
    size: int | None = None
    width: int | None = None
    along: int | None = None

    @classmethod
    def parse(cls, seed_id: str) -> SeedId:
        base, mark, size = str(seed_id).rpartition(SIZE_MARK)
        if not mark:
            return cls(str(seed_id))
        kind = size[:1] if size[:1] in (WIDTH_MARK, ALONG_MARK) else ""
        number = size[len(kind):]
        if not (number.isascii() and number.isdigit()):
            raise IdError(f"seed id {seed_id!r}: after {SIZE_MARK!r} comes a size (a whole number), a width "
                          f"({WIDTH_MARK!r} and a whole number) or a size along the operator's dimension "
                          f"({ALONG_MARK!r} and a whole number)")
        n = int(number)
        return cls(base, width=n) if kind == WIDTH_MARK else cls(base, along=n) if kind == ALONG_MARK else cls(base, n)

    @property
    def source(self) -> str:
        """``timm`` of ``timm/test_vit@96``."""
        return self.base.split("/", 1)[0]

    @property
    def name(self) -> str:
        """The id within its source: ``test_vit`` of ``timm/test_vit@96``."""
        return self.base.split("/", 1)[1] if "/" in self.base else self.base

    @property
    def rebuilt(self) -> bool:
        return self.size is not None or self.width is not None or self.along is not None

    @property
    def shown(self) -> str:
        """What it is rebuilt at, in words (``size 1025``, ``width 2048``)."""
        if self.width is not None:
            return f"width {self.width}"
        return f"size {self.along} along the operator's dimension" if self.along is not None else f"size {self.size}"

    def __str__(self) -> str:
        if self.width is not None:
            return f"{self.base}{SIZE_MARK}{WIDTH_MARK}{self.width}"
        if self.along is not None:
            return f"{self.base}{SIZE_MARK}{ALONG_MARK}{self.along}"
        return self.base if self.size is None else f"{self.base}{SIZE_MARK}{self.size}"


INDEX_MARK, TRAIN_SUFFIX = "#", ":train"


@dataclass(frozen=True)
class VariantId:
    """``timm/test_vit#3``: the seed's fourth variant; ``:train`` appended when it is run training."""

    seed: str
    index: int | str  # a word for a record that is no variant (``seed``: the seed failed before mutation)
    train: bool = False

    @classmethod
    def parse(cls, variant_id: str) -> VariantId:
        text = str(variant_id)
        train = text.endswith(TRAIN_SUFFIX)
        seed, mark, index = text.removesuffix(TRAIN_SUFFIX).rpartition(INDEX_MARK)
        if not mark or not seed or not (index.isascii() and index.isalnum()):
            raise IdError(f"variant id {variant_id!r} is not of the form <seed id>{INDEX_MARK}<index>")
        return cls(seed, int(index) if index.isdigit() else index, train)

    def __str__(self) -> str:
        return f"{self.seed}{INDEX_MARK}{self.index}" + (TRAIN_SUFFIX if self.train else "")


DEVICE_MARK = "@"


@dataclass(frozen=True)
class BackendName:
    """``inductor@cuda``: a stack on a device."""

    stack: str
    device: str

    @classmethod
    def parse(cls, name: str) -> BackendName:
        stack, mark, device = str(name).partition(DEVICE_MARK)
        if not mark or not stack or not device:
            raise IdError(f"backend {name!r} is not of the form stack@device")
        return cls(stack, device)

    @classmethod
    def loose(cls, name: str) -> BackendName:
        """A name as a record's label may have it: the device empty where it names none."""
        stack, _, device = str(name).partition(DEVICE_MARK)
        return cls(stack, device)

    @classmethod
    def stack_of(cls, name: str) -> str:
        """The stack of a name, or the whole name where it has no device (a label)."""
        return cls.loose(name).stack

    def on(self, device: str) -> BackendName:
        """The same stack on another device."""
        return BackendName(self.stack, device)

    def __str__(self) -> str:
        return f"{self.stack}{DEVICE_MARK}{self.device}"


@dataclass(frozen=True)
class CulpritName:
    """``inductor:post_grad_passes:pattern_matcher``: the torch.compile backend that first shows a
    finding, the subsystem bisection names, and the pass within it where one is named."""

    backend: str
    subsystem: str = ""
    pass_name: str = ""

    @classmethod
    def parse(cls, culprit: str) -> CulpritName:
        backend, _, rest = str(culprit).partition(":")
        subsystem, _, name = rest.partition(":")
        if not backend:
            raise IdError(f"culprit {culprit!r} is not of the form backend:subsystem[:pass]")
        return cls(backend, subsystem, name)

    @property
    def last(self) -> str:
        """The most specific part named: the pass, else the subsystem, else the backend."""
        return self.pass_name or self.subsystem or self.backend

    def __str__(self) -> str:
        return ":".join(p for p in (self.backend, self.subsystem, self.pass_name) if p)

"""Error messages reduced to templates, so that one defect is one cluster.

The rules live in ``templates`` (vectorised over columns); this module keeps the
one-message helpers that records and the seed catalog call when they are written.
"""
from __future__ import annotations

import hashlib

from .templates import template

__all__ = ["template", "signature", "signature_id"]


def signature(stage: str | None, error_type: str | None, message: str | None) -> str:
    return f"{stage or '-'}|{error_type or '-'}|{template(message)}"


def signature_id(*parts: str | None) -> str:
    """A stable short id for a cluster key: same key, same id, in any campaign."""
    return hashlib.sha256("\x1f".join(p or "" for p in parts).encode()).hexdigest()[:10]

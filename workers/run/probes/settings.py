"""A campaign's probe settings: how many probes per variant, of which kinds, under which seed."""
from __future__ import annotations

import fnmatch
from dataclasses import dataclass

from gapfuzz.workers.run.probes.base import RESIZE
from gapfuzz.workers.run.probes.registry import DEFAULT_KINDS


@dataclass(frozen=True)
class ProbeSettings:
    """How many probes per variant, of which kinds (globs over KINDS), and the campaign's seed."""

    per_variant: int = 8  # the example and the value kinds; relations and layouts come beside them
    kinds: tuple = DEFAULT_KINDS
    campaign_seed: int = 0
    resize: bool = False  # resize probes too: a stack compiled for dynamic shapes runs the variant (``takes_resizes``)

    def allows(self, kind: str) -> bool:
        return any(fnmatch.fnmatchcase(kind, p) for p in self.kinds)

    @property
    def every_layout(self) -> bool:
        """Layouts named by the campaign (a kinds list of its own matching ``layout``, or ``"*"``): every
        stack gets all of them, whatever each costs it. The default list without ``resize`` (a campaign
        written before it, or stored with its run) is still the default."""
        return set(self.kinds) - {RESIZE} != set(DEFAULT_KINDS) - {RESIZE} and self.allows("layout")

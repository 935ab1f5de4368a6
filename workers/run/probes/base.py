"""The probe contract: a ``Probe`` (a kind, its parameters and a seed) names one input set, and a
``ProbeKind`` class says everything about its kind in one place, as a mutator does for a pass.

A kind owns its parameters and the values each takes (``params``: what ``gapfuzz repro`` checks a
record's recipe against), the input role it changes (``needs``), where it applies (``propose``, or its
``rounds`` for a counted kind), how its inputs are made (``make``) and the seed each of its probes gets
(``offset``: from its own name and parameters, never from the order of other kinds).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property

import torch
import torch.fx as fx

from gapfuzz.core.bugs import EXAMPLE_PROBE, Status
from gapfuzz.core.seeding import stable_int

EXAMPLE = EXAMPLE_PROBE
RESIZE = "resize"
SEED_SPAN = 1 << 31


class ProbeKindError(ValueError):
    """A probe kind that is unknown or wrongly declared (one line, with "did you mean")."""


class ProbeKind:
    """One kind of probe. Subclasses register with ``@PROBE_KINDS.register`` in a module of their own."""

    name = ""
    order = 100  # its place among the kinds (``KINDS``) and, for a counted kind, within each round
    needs: str | None = None  # the input role it changes: value, integer, mask, index; None: decides itself
    counted = False  # counted in ``per_variant``: its probes come round-robin with the other counted kinds
    params: dict = {}  # each parameter and the values it takes (None: any, checked by ``problem``)
    shown: tuple | None = None  # the parameters its name shows, in order (default: all of ``params``)
    rounds: tuple = ()  # a counted kind: per round, the parameters of its probes in that round
    legacy: dict = {}  # probe name -> the seed offset it had before kinds were classes (records replay as before)

    def offset(self, params: dict, at: int = 0) -> int:
        """The seed offset of this kind's probe with ``params`` (``at``: its place among this kind's probes
        on the graph): the frozen one it always had, else one derived from its own name and parameters."""
        name = probe_name(self.name, params, self.shown_params)
        if name in self.legacy:
            return self.legacy[name]
        return stable_int(f"{self.name}/{json.dumps(params, sort_keys=True)}")

    @property
    def shown_params(self) -> tuple:
        return tuple(self.params) if self.shown is None else self.shown

    def probe(self, base_seed: int, params: dict, at: int = 0) -> Probe:
        return Probe.of(self.name, params, (base_seed + self.offset(params, at)) % SEED_SPAN)

    def propose(self, graph: Graph) -> list[dict]:
        """The parameters of the probes this kind adds to the graph beside the counted ones (none by default)."""
        return []

    def make(self, inputs: tuple, input_roles: list[str], params: dict, g: torch.Generator) -> tuple:
        """The probe's inputs. By default: each tensor of the role the kind ``needs`` through ``make_one``
        (on the host, then back to its device), in order, all drawing from one generator."""
        return tuple(self._one(t, role, params, g) if isinstance(t, torch.Tensor) else t
                     for t, role in zip(inputs, input_roles))

    def _one(self, t: torch.Tensor, role: str, params: dict, g: torch.Generator) -> torch.Tensor:
        if role != self.needs or t.numel() == 0 or not self.fits(t):
            return t
        return self.make_one(t.detach().cpu(), params, g).to(t.device)

    def fits(self, t: torch.Tensor) -> bool:
        """Whether an input of the kind's role takes this probe (a dtype it has values for)."""
        return True

    def make_one(self, t: torch.Tensor, params: dict, g: torch.Generator) -> torch.Tensor:
        raise NotImplementedError(f"probe kind {self.name} defines neither make() nor make_one()")

    def problem(self, params: dict) -> str | None:
        """Why parameters the ``params`` table cannot judge (a number, a list of positions) are not this
        kind's, one line; None if they are."""
        return None


SHOWN: dict[str, tuple] = {}  # kind -> the parameters its probes' names show, filled as each kind registers


def probe_name(kind: str, params: dict, shown: tuple | None = None) -> str:
    keys = shown if shown is not None else sorted(params)
    return ":".join([kind, *(str(params[k]) for k in keys if k in params)])


@dataclass(frozen=True)
class Probe:
    """One input set: a kind, its parameters and the seed of its positions."""

    kind: str = EXAMPLE
    params: tuple = ()  # sorted (key, value) pairs
    seed: int = 0

    @classmethod
    def of(cls, kind: str, params: dict | None = None, seed: int = 0) -> Probe:
        return cls(kind, tuple(sorted((params or {}).items())), seed)

    @property
    def name(self) -> str:
        """Unique among a variant's probes, readable in a table: ``special:nan:row``, ``random:large``."""
        return probe_name(self.kind, dict(self.params), SHOWN.get(self.kind))

    def recipe(self) -> str:
        return json.dumps({"kind": self.kind, **dict(self.params), "seed": self.seed}, sort_keys=True)

    @classmethod
    def from_recipe(cls, text: str | None) -> Probe:
        d = json.loads(text or "{}")
        kind, seed = d.pop("kind", EXAMPLE), int(d.pop("seed", 0))
        return cls.of(kind, d, seed)


@dataclass
class ProbeRun:
    """One probe's call on a prepared backend: its outputs, or what it raised."""

    probe: Probe
    outputs: list | None = None
    status: Status = Status.OK  # or error / unsupported / oom, from what the call raised
    error_type: str | None = None
    message: str | None = None
    run_s: float | None = None
    input_checksum: str | None = None


@dataclass
class Graph:
    """What a kind reads of a variant to decide its probes, for one stack."""

    gm: fx.GraphModule
    inputs: tuple
    roles: list[str]
    settings: object  # ProbeSettings
    any_strides: bool | None = True  # ``Backend.any_strides`` of the stack the probes are for

    @property
    def have(self) -> set[str]:
        return set(self.roles)

    @cached_property
    def ops(self) -> set[str]:
        """The ATen operators the graph calls, by name without overload (``conv2d``, ``floor_divide``)."""
        names = (str(n.target).split(".") for n in self.gm.graph.nodes if n.op == "call_function")
        return {parts[1] for parts in names if len(parts) >= 2 and parts[0] == "aten"}

    @property
    def calls(self) -> int:
        return sum(n.op == "call_function" for n in self.gm.graph.nodes)

    @cached_property
    def related(self) -> list[int]:
        from gapfuzz.workers.run.probes.roles import related_group

        return related_group(self.inputs, self.roles)

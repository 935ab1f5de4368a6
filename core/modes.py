"""The run mode as one strategy object: everything that differs between a forward run and a training step.

A variant runs in one mode: ``inference`` (the forward alone) or ``training`` (the forward, a loss
and backward, ``workers.run.training``). What differs between them is a field or method of its
``RunMode`` here, so no other module asks which mode it has: what a run prepares (``backward``), the
names of its outputs (gradients are ``grad:``-prefixed), the symptoms it can show, the suffix of its
variant ids, what a record, recipe or payload writes of it, its label in a cluster's line, and the
lines a reproducer adds for it. Behaviour that needs torch stays in ``workers``, chosen by these
fields. The names are record columns and campaign-file values: they never change.

Nothing here imports torch.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from .bugs import GRAD_OUTPUT, GRADIENT_SYMPTOMS, StrEnum, Symptom
from .registry import did_you_mean


class Mode(StrEnum):
    """The modes' names, as records and campaign files write them; in the order runs take them."""

    INFERENCE = "inference"
    TRAINING = "training"


DEFAULT_MODE = Mode.INFERENCE.value  # a record, recipe or payload that names no mode is of this one
MODE_NAMES = tuple(m.value for m in Mode)


@dataclass(frozen=True, eq=False, repr=False)
class RunMode(str):
    """One mode's part in a run, a record and a reproducer. It is its name too (a ``str``: equal to, hashed
    and written as ``"inference"``), so the mode travels as this object through payloads, records and
    requests, and a caller asks it (``variant.mode.backward``) rather than resolving a name again."""

    name: Mode
    backward: bool  # a run is a training step: the forward, a loss and backward (workers.run.training)
    symptoms: tuple[Symptom, ...]  # what a divergence of its runs can be
    labelled: bool  # a cluster seen in this mode names its modes in its line (analysis.triage)
    # fuzzer.repro.code's fragments: the graph the reproducer prepares, what it is fed (both on the
    # inputs' device), one call's outputs ({run} and {device} filled in), the lines main() adds first,
    # and the workers.run.training functions copied in beside them
    repro_graph: str
    repro_fed: str
    repro_call: str
    repro_setup: tuple[str, ...] = ()
    repro_helpers: tuple[str, ...] = ()
    # fuzzer.repro.reproducers.pytorch's: the helper a torch.compile reproducer defines, and one call ({fn}, {args})
    compile_helper: tuple[str, ...] = ()
    compile_call: str = "{fn}(*{args})"

    def __new__(cls, name, *args, **kwargs):
        return super().__new__(cls, str(name))

    def __str__(self) -> str:
        return str(self.name)

    def __repr__(self) -> str:
        return repr(str(self))

    def __reduce__(self):  # unpickled as the one object of its name
        return mode_of, (str(self),)

    def entry(self) -> dict:
        """Its key in a payload, recipe or record: none for the default mode, as before modes existed."""
        return {} if self.name == DEFAULT_MODE else {"mode": str(self.name)}

    def is_gradient(self, output_name) -> bool:
        """Whether a run's output of that name is a gradient (``grad:<parameter>``, ``grad:input:<name>``)."""
        return self.backward and str(output_name).startswith(GRAD_OUTPUT)

    def forward_count(self, names) -> int:
        """How many of a run's outputs are the forward's and the loss (they come first): all of a forward run's."""
        return sum(1 for n in names if not self.is_gradient(n))

    def shown_at(self, names, symptom) -> range:
        """The outputs that show ``symptom``: the gradients for a gradient symptom this mode can have,
        else the forward's (and the loss)."""
        k = self.forward_count(names)
        gradient = symptom in GRADIENT_SYMPTOMS and symptom in self.symptoms
        return range(k, len(names)) if gradient else range(k)


INFERENCE = RunMode(
    Mode.INFERENCE, backward=False, symptoms=tuple(s for s in Symptom if s not in GRADIENT_SYMPTOMS),
    labelled=False,
    repro_graph="torch.fx.symbolic_trace(Repro(weights).eval())", repro_fed="inputs",
    repro_call="host({run}(*[exact(t, {device}) for t in inputs]))")  # one call's outputs
TRAINING = RunMode(
    Mode.TRAINING, backward=True, symptoms=tuple(Symptom), labelled=True,
    repro_graph="lift_parameters(torch.fx.symbolic_trace(Repro(weights).eval()), PARAMS)",
    repro_fed="(*params, *inputs)",
    repro_call="host(train_step({run}, [exact(t, {device}) for t in params], [exact(t, {device}) for t in "
               "inputs]))",  # a training step's: the outputs, the loss, every gradient
    repro_setup=("    params = [weights[name] for name in PARAMS]  # in training, the graph's first inputs",),
    repro_helpers=("lift_parameters", "train_step"),
    compile_helper=("def grads(fn, args):  # the forward, then a plain backward of a fixed projection",
                    "    args = [a.detach().requires_grad_(a.is_floating_point()) for a in args]",
                    "    out = fn(*args)",
                    "    out.backward(torch.randn(out.shape, generator=torch.Generator().manual_seed(0),"
                    " dtype=out.dtype))",
                    "    return out.detach(), *[a.grad for a in args if a.requires_grad]"),
    compile_call="grads({fn}, {args})")
MODES = (INFERENCE, TRAINING)  # in Mode's order
_BY_NAME = {str(m): m for m in MODES}


def mode_of(name) -> RunMode:
    """The mode named ``name`` (a ``Mode``, its string, or a ``RunMode``); ``ValueError`` for another name."""
    if isinstance(name, RunMode):
        return name
    try:
        return _BY_NAME[str(name)]
    except KeyError:
        raise ValueError(f"unknown mode {name!r}{did_you_mean(str(name), list(_BY_NAME))}") from None


class ModeField:
    """A dataclass field that holds a ``RunMode``: a name set on it is resolved once, here, so every reader
    asks the mode itself (``variant.mode.backward``). Its default is the default mode."""

    def __set_name__(self, owner, name):
        self.attr = f"_{name}"

    def __get__(self, obj, objtype=None) -> RunMode:
        return _BY_NAME[DEFAULT_MODE] if obj is None else getattr(obj, self.attr, _BY_NAME[DEFAULT_MODE])

    def __set__(self, obj, value) -> None:
        setattr(obj, self.attr, mode_of(value))


def modes_label(modes: Iterable[str]) -> str:
    """The prefix of a cluster's line that names the modes it was seen in (``inference+training: ``),
    empty unless one of them is labelled; names of no mode are left out of the decision."""
    modes = [str(m) for m in modes]
    return f"{'+'.join(modes)}: " if any(_BY_NAME[m].labelled for m in modes if m in _BY_NAME) else ""

"""The one IR every stage speaks: an ATen-level fx graph, its tensors and example inputs.

A :class:`Variant` crosses process and machine boundaries as a *payload*: a dict of
plain values and byte arrays, so Ray's object store holds it without pickling
GraphModule code. The graph is written as canonical JSON, which is both the
transport form (node names survive the trip, unlike GraphModule pickling, which
re-traces and renames) and the input of the graph hash.
"""
from __future__ import annotations

import hashlib
import json
import keyword
import math
import operator
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.fx as fx
import xxhash

from gapfuzz.core.modes import DEFAULT_MODE, ModeField, RunMode

PAYLOAD_VERSION = 1


class IRError(ValueError):
    """A graph holds something the IR cannot represent (a fuzzer bug, raised loudly)."""


class MissingOperator(IRError):
    """A graph calls an operator this torch does not have: one from another release (``workers.run.releases``),
    which a run records as unsupported, not as a defect."""


# ---------------------------------------------------------------- targets and arguments
def target_name(target) -> str:
    if isinstance(target, torch._ops.OpOverload):
        return str(target)  # "aten.conv2d.default"
    if isinstance(target, str):
        return target
    module = getattr(target, "__module__", None)
    qual = getattr(target, "__qualname__", None)
    if module and qual and "<" not in qual:
        return f"py:{module}:{qual}"
    raise IRError(f"cannot name call target {target!r}")


# What a graph's JSON may name: operators of these torch.ops namespaces, and a few pure functions of
# Python's ``operator`` module (``getitem`` of multi-output ops, arithmetic on sizes). A graph read
# from a cache or a message is data: nothing else is resolved, so no file can make gapfuzz call an
# arbitrary function.
OP_NAMESPACES = ("aten", "prims", "torchvision")
OPERATOR_FUNCTIONS = ("getitem", "add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "neg", "pos", "abs",
                      "eq", "ne", "lt", "le", "gt", "ge", "and_", "or_", "xor", "not_", "invert")


def resolve_target(name: str):
    if name.startswith("py:"):
        _, module, qual = (name.split(":", 2) + ["", ""])[:3]
        fn = getattr(operator, qual, None) if module == "_operator" and qual in OPERATOR_FUNCTIONS else None
        if fn is None:
            raise IRError(f"graph target {name!r} is not allowed: a graph may call only operators of "
                          f"{', '.join(OP_NAMESPACES)} and a few of Python's operator functions")
        return fn
    ns, _, rest = name.partition(".")
    packet, _, overload = rest.rpartition(".")
    if ns not in OP_NAMESPACES or not packet or not overload:
        raise IRError(f"graph target {name!r} is not allowed: a graph may call only operators of "
                      f"{', '.join(OP_NAMESPACES)} and a few of Python's operator functions")
    try:
        op = getattr(getattr(getattr(torch.ops, ns), packet), overload)
    except (AttributeError, RuntimeError):
        raise MissingOperator(f"graph target {name!r}: not supported by torch {torch.__version__}, which has no "
                              f"such operator") from None
    if not isinstance(op, torch._ops.OpOverload):
        raise IRError(f"graph target {name!r} is not an operator overload")
    return op


_ENUMS = {"dtype": torch.dtype, "mf": torch.memory_format, "layout": torch.layout}
# What an encoded dtype, memory format or layout may name, by its name: a fixed table, never a
# ``getattr`` on torch (``{"dtype": "os"}`` would otherwise decode to a module).
_ENUM_VALUES = {key: {str(v).removeprefix("torch."): v for v in vars(torch).values() if isinstance(v, kind)}
                for key, kind in _ENUMS.items()}
GRAPH_OPS = ("placeholder", "get_attr", "call_function", "output")


def encode_arg(a):
    if isinstance(a, fx.Node):
        return {"n": a.name}
    if a is None or isinstance(a, (bool, str)):
        return a
    if isinstance(a, int):
        return a
    if isinstance(a, float):
        return a if math.isfinite(a) else {"f": repr(a)}
    if isinstance(a, (list, tuple)):
        return {"l" if isinstance(a, list) else "t": [encode_arg(x) for x in a]}
    if isinstance(a, dict):
        return {"d": [[k, encode_arg(v)] for k, v in a.items()]}
    if isinstance(a, torch.device):
        return {"device": str(a)}
    for key, kind in _ENUMS.items():
        if isinstance(a, kind):
            return {key: str(a).removeprefix("torch.")}
    if isinstance(a, slice):
        return {"slice": [encode_arg(a.start), encode_arg(a.stop), encode_arg(a.step)]}
    raise IRError(f"cannot encode graph argument {a!r} of type {type(a).__name__}")


def decode_arg(a, env: dict):
    if not isinstance(a, dict):
        return a
    (key, v), = a.items()
    if key == "n":
        return env[v]
    if key == "f":
        return float(v)
    if key == "l":
        return [decode_arg(x, env) for x in v]
    if key == "t":
        return tuple(decode_arg(x, env) for x in v)
    if key == "d":
        return {k: decode_arg(x, env) for k, x in v}
    if key == "device":
        return torch.device(v)
    if key in _ENUMS:
        if v not in _ENUM_VALUES[key]:
            raise IRError(f"encoded {key} {v!r} is not one torch has")
        return _ENUM_VALUES[key][v]
    if key == "slice":
        return slice(*(decode_arg(x, env) for x in v))
    raise IRError(f"unknown encoded argument {a!r}")


def graph_to_json(graph: fx.Graph) -> str:
    nodes = [[n.op, n.name, target_name(n.target), encode_arg(tuple(n.args)), encode_arg(dict(n.kwargs))]
             for n in graph.nodes]
    return json.dumps(nodes, separators=(",", ":"))


def _identifier(name, what: str, dotted: bool = False) -> str:
    """``name`` when it is a Python identifier (each dotted part, for an attribute path): the only
    names that reach torch.fx's code generation from a graph read as data."""
    parts = name.split(".") if dotted and isinstance(name, str) else [name]
    if not all(isinstance(p, str) and p.isidentifier() and not keyword.iskeyword(p) for p in parts):
        raise IRError(f"graph {what} {str(name)[:80]!r} is not a Python identifier")
    return name


def graph_from_json(text: str) -> fx.Graph:
    """The graph a canonical JSON describes. It is data (a cache, a message): only the four node
    kinds of an ATen graph, identifier names and attribute paths, and allowed operators pass."""
    graph, env = fx.Graph(), {}
    for op, name, target, args, kwargs in json.loads(text):
        if op not in GRAPH_OPS:
            raise IRError(f"graph node kind {str(op)[:40]!r} is not one of {', '.join(GRAPH_OPS)}")
        _identifier(name, "node name")
        if op in ("placeholder", "get_attr"):
            _identifier(target, f"{op} target", dotted=op == "get_attr")
        elif op == "output" and target != "output":
            raise IRError(f"graph output target {str(target)[:40]!r} is not 'output'")
        tgt = resolve_target(target) if op == "call_function" else target
        node = graph.create_node(op, tgt, decode_arg(args, env), decode_arg(kwargs, env), name=name)
        if node.name != name:
            raise IRError(f"node name {name!r} was renamed to {node.name!r}")
        env[name] = node
    graph.lint()
    return graph


# ---------------------------------------------------------------- tensors
def byte_view(t: torch.Tensor) -> torch.Tensor:
    """The elements' bytes in logical order, copied only when needed: ``contiguous`` keeps a
    one-element view's stride (64, say), which a dtype view refuses."""
    flat = t.contiguous().reshape(-1)
    if flat.numel() and flat.stride(0) != 1:
        flat = flat.clone(memory_format=torch.contiguous_format)
    return flat.view(torch.uint8)


def tensor_to_wire(t: torch.Tensor) -> dict:
    """Bytes plus dtype, shape and strides. A dense tensor travels compactly; any other view
    (expanded, overlapping, gapped, or from a storage offset) travels with the storage span it
    reads, so that every stride, offset and alias arrives as the caller made it."""
    t = t.detach().cpu().resolve_conj().resolve_neg()  # a conjugate or negative view: its values, materialised
    wire = {"dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape), "stride": list(t.stride())}
    if t.numel() == 0 or (_dense(t) and t.storage_offset() == 0):
        data = byte_view(t).numpy() if t.numel() else np.zeros(0, np.uint8)
        return {**wire, "data": data}
    span = 1 + sum((n - 1) * s for n, s in zip(t.shape, t.stride()))
    offset = min(t.storage_offset(), max(span, 64))  # a view from an offset keeps one (a bounded prefix travels)
    raw = torch.empty(0, dtype=t.dtype).set_(t.untyped_storage(), t.storage_offset() - offset, (offset + span,), (1,))
    return {**wire, "data": raw.view(torch.uint8).numpy().copy(), "span": span, "offset": offset}


def _dense(t: torch.Tensor) -> bool:
    """Contiguous up to a permutation of dims (channels-last, a transpose): rebuilt by one copy."""
    expected = 1
    for d in sorted(range(t.dim()), key=lambda d: t.stride(d)):
        if t.shape[d] != 1 and t.stride(d) != expected:
            return False
        expected *= t.shape[d]
    return True


def clone_exact(t: torch.Tensor) -> torch.Tensor:
    """A copy with the same strides and a storage offset even for expanded, gapped or offset views
    (``clone`` densifies those)."""
    if t.numel() == 0 or (_dense(t) and t.storage_offset() == 0):
        return t.clone()
    return tensor_from_wire(tensor_to_wire(t)).to(t.device)


def tensor_from_wire(w: dict, copy: bool = True) -> torch.Tensor:
    """The tensor a wire dict describes. ``copy=False`` views the wire's buffer when it is writable,
    for a caller that owns the buffer and deserialises it once."""
    dtype = getattr(torch, w["dtype"])
    data = w["data"]
    if copy or not data.flags.writeable or not data.flags.c_contiguous:
        data = np.array(data, dtype=np.uint8, copy=True)  # Ray's buffers are read-only
    flat = torch.from_numpy(data.reshape(-1))
    if "span" in w:  # a view over a storage span: the same strides, the same aliasing
        return torch.empty(0, dtype=dtype).set_(flat.view(dtype).untyped_storage(), w.get("offset", 0), w["shape"],
                                                w["stride"])
    dense = flat.view(dtype).reshape(w["shape"])
    if list(dense.stride()) == list(w["stride"]) or dense.numel() <= 1:
        return dense
    out = torch.empty_strided(w["shape"], w["stride"], dtype=dtype)
    out.copy_(dense)
    return out


def packed_outputs(outputs):
    """Outputs as they travel to later pools: tensors as wires (pickle cannot carry some dtypes: uint16,
    float8, complex32), other leaves as they are. Anything but a list (a refused probe) travels as it is."""
    if not isinstance(outputs, list):
        return outputs
    return [tensor_to_wire(x) if isinstance(x, torch.Tensor) else x for x in outputs]


def unpacked_outputs(outputs):
    """``packed_outputs`` undone."""
    if not isinstance(outputs, list):
        return outputs
    return [tensor_from_wire(x) if isinstance(x, dict) else x for x in outputs]


def checksum(tensors) -> str:
    """XXH3-128 over (name, dtype, shape, bytes) in order; the bytes ignore strides. A check that
    each backend got what was sent, not a defence against tampering: the fast hash keeps it a few
    milliseconds for a 45 MB model (sha256 took 50)."""
    h = xxhash.xxh3_128()
    for name, t in tensors:
        t = t.detach().cpu()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        if t.numel():
            h.update(np.ascontiguousarray(byte_view(t).numpy()).data)
    return h.hexdigest()[:16]


# ---------------------------------------------------------------- the variant
@dataclass
class Variant:
    """A graph with its own tensors (get_attr targets) and a flat tuple of inputs."""

    gm: fx.GraphModule
    inputs: tuple
    output_names: tuple = ()
    _graph_json: str | None = field(default=None, repr=False)
    mode: RunMode = ModeField()  # what a run of it prepares (forward, or backward too)

    # -- structure
    @property
    def graph_json(self) -> str:
        if self._graph_json is None:
            self._graph_json = graph_to_json(self.gm.graph)
        return self._graph_json

    @property
    def graph_hash(self) -> str:
        return hashlib.sha256(self.graph_json.encode()).hexdigest()[:16]

    @property
    def node_count(self) -> int:
        return sum(1 for n in self.gm.graph.nodes if n.op == "call_function")

    @property
    def ops(self) -> list[str]:
        return sorted({target_name(n.target) for n in self.gm.graph.nodes if n.op == "call_function"})

    def tensors(self) -> dict[str, torch.Tensor]:
        named = dict(self.gm.named_parameters())
        named.update(self.gm.named_buffers())
        return named

    def weight_checksum(self) -> str:
        return checksum(sorted(self.tensors().items()))

    def input_checksum(self) -> str:
        return checksum((str(i), t) for i, t in enumerate(self.inputs) if isinstance(t, torch.Tensor))

    # -- transport
    def to_payload(self) -> dict:
        params = dict(self.gm.named_parameters())
        return {
            "version": PAYLOAD_VERSION,
            "graph": self.graph_json,
            "tensors": {k: {**tensor_to_wire(t), "param": k in params} for k, t in sorted(self.tensors().items())},
            "inputs": [tensor_to_wire(t) for t in self.inputs],
            "output_names": list(self.output_names),
            **self.mode.entry(),
        }

    @classmethod
    def from_payload(cls, payload: dict, copy: bool = True) -> Variant:
        """The variant a payload describes; ``copy=False`` views the payload's own buffers."""
        if payload.get("version") != PAYLOAD_VERSION:
            raise IRError(f"payload version {payload.get('version')} is not {PAYLOAD_VERSION}")
        tensors = {name: (tensor_from_wire(w, copy), bool(w.get("param"))) for name, w in payload["tensors"].items()}
        inputs = tuple(tensor_from_wire(w, copy) for w in payload["inputs"])
        v = cls.from_parts(payload["graph"], tensors, inputs, payload["output_names"])
        v.mode = payload.get("mode", DEFAULT_MODE)
        return v

    @classmethod
    def from_parts(cls, graph_json: str, tensors: dict, inputs: tuple, output_names) -> Variant:
        """A variant from its graph JSON, ``{name: (tensor, is_parameter)}`` and its inputs."""
        root = torch.nn.Module()
        for name, (t, is_param) in tensors.items():
            if is_param:
                root.register_parameter(name, torch.nn.Parameter(t, requires_grad=False))
            else:
                root.register_buffer(name, t)
        gm = fx.GraphModule(root, graph_from_json(graph_json))
        return cls(gm, tuple(inputs), tuple(output_names), graph_json)

    def with_graph(self, gm: fx.GraphModule, inputs: tuple | None = None) -> Variant:
        """A new variant over ``gm`` (a pass's result); tensors not copied."""
        return Variant(gm, self.inputs if inputs is None else inputs, self.output_names, mode=self.mode)


def flatten_outputs(out) -> list:
    """Model outputs as a flat list of leaves, in pytree order."""
    leaves, _ = torch.utils._pytree.tree_flatten(out)
    return leaves

"""An ONNX model as the ``onnx.helper`` calls that build it: what an ONNX Runtime or OpenVINO
maintainer pastes into a test. Models with functions, subgraphs, more than ``MAX_NODES`` nodes or a
large initializer are not printed (``None``): the caller ships ``model.onnx`` instead."""
from __future__ import annotations

import onnx
from onnx import helper, numpy_helper

from gapfuzz.fuzzer.repro.reproducers.literals import MAX_ELEMENTS, numpy_literal

MAX_NODES = 8


def _type(elem: int) -> str:
    return f"TensorProto.{onnx.TensorProto.DataType.Name(elem)}"


def _value_info(v) -> str:
    t = v.type.tensor_type
    dims = [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in t.shape.dim]
    return f"helper.make_tensor_value_info({v.name!r}, {_type(t.elem_type)}, {dims!r})"


def _attribute(a) -> str | None:
    value = helper.get_attribute_value(a)
    if isinstance(value, onnx.TensorProto):
        arr = numpy_helper.to_array(value)
        return None if arr.size > MAX_ELEMENTS else f"numpy_helper.from_array({numpy_literal(arr)})"
    if isinstance(value, bytes):
        return repr(value.decode())
    if isinstance(value, (int, float)) or (isinstance(value, list) and all(isinstance(x, (int, float)) for x in value)):
        text = repr(value)
        return None if "nan" in text or "inf" in text else text
    return None


def helper_source(model: onnx.ModelProto) -> str | None:
    """``model = helper.make_model(...)``, the lines that build ``model``; None when it is not small."""
    g = model.graph
    if model.functions or len(g.node) > MAX_NODES:
        return None
    inits = []
    for init in g.initializer:
        arr = numpy_helper.to_array(init)
        if arr.size > MAX_ELEMENTS:
            return None
        inits.append(f"numpy_helper.from_array({numpy_literal(arr)}, {init.name!r})")
    nodes = []
    for n in g.node:
        attrs = []
        for a in n.attribute:
            text = _attribute(a)
            if text is None:
                return None
            attrs.append(f"{a.name}={text}")
        domain = [f"domain={n.domain!r}"] if n.domain else []
        nodes.append(f"helper.make_node({n.op_type!r}, {list(n.input)!r}, {list(n.output)!r}"
                     + "".join(", " + x for x in [*attrs, *domain]) + ")")
    inputs = [_value_info(v) for v in g.input if v.name not in {i.name for i in g.initializer}]
    outputs = [_value_info(v) for v in g.output]
    opsets = ", ".join(f"helper.make_opsetid({o.domain!r}, {o.version})" for o in model.opset_import)

    def listed(items):
        return "[" + ", ".join(items) + "]" if len(items) < 2 or sum(map(len, items)) < 60 else \
            "[\n        " + ",\n        ".join(items) + ",\n    ]"
    return (f"graph = helper.make_graph(\n    {listed(nodes)},\n    \"repro\",\n    {listed(inputs)},\n"
            f"    {listed(outputs)},\n    {listed(inits)},\n)\n"
            f"model = helper.make_model(graph, opset_imports=[{opsets}], ir_version={model.ir_version})")

"""The IR round-trips exactly: same node names, graph hash, weights, inputs and outputs."""
from __future__ import annotations

import pickle

import pytest
import torch

from gapfuzz.core.ir import Variant, graph_from_json, graph_to_json


def test_payload_roundtrip_is_exact(captured_vit):
    v = captured_vit.variant
    payload = pickle.loads(pickle.dumps(v.to_payload(), protocol=5))
    w = Variant.from_payload(payload)
    assert [n.name for n in w.gm.graph.nodes] == [n.name for n in v.gm.graph.nodes]
    assert w.graph_hash == v.graph_hash
    assert w.weight_checksum() == v.weight_checksum() and w.input_checksum() == v.input_checksum()
    assert torch.equal(w.gm(*w.inputs)[0], v.gm(*v.inputs)[0])


def test_graph_json_is_canonical(captured_vit):
    text = graph_to_json(captured_vit.variant.gm.graph)
    assert graph_to_json(graph_from_json(text)) == text


def test_strides_and_low_precision_survive_transport(captured_vit):
    v = captured_vit.variant
    x = v.inputs[0].to(memory_format=torch.channels_last).to(torch.bfloat16)
    w = Variant.from_payload(v.with_graph(v.gm, (x,)).to_payload())
    assert w.inputs[0].dtype == torch.bfloat16
    assert w.inputs[0].stride() == x.stride()
    assert torch.equal(w.inputs[0], x)


def test_checksum_sees_one_changed_weight(captured_vit):
    v = captured_vit.variant
    w = Variant.from_payload(v.to_payload())
    name, t = next(iter(sorted(w.tensors().items())))
    t.view(-1)[0] += 1
    assert w.weight_checksum() != v.weight_checksum()
    assert w.graph_hash == v.graph_hash


def test_checksum_ignores_the_stride_of_a_one_element_view():
    from gapfuzz.core.ir import checksum

    one = torch.as_strided(torch.arange(128.0), (1,), (64,))  # what narrowing a dim to 1 can leave
    assert checksum([("x", one)]) == checksum([("x", torch.tensor([0.0]))])


@pytest.mark.parametrize("edit", [
    lambda g: g[1].__setitem__(1, "x\rimport os; os.system('touch RAN')"),  # a node name with code after it
    lambda g: g.insert(1, ["call_method", "m", "__init__\r\nimport os", {"t": []}, {"d": []}]),
    lambda g: g.insert(1, ["get_attr", "w2", "w\rimport os", {"t": []}, {"d": []}]),
    lambda g: g.insert(1, ["placeholder", "y", "y)\nimport os#", {"t": []}, {"d": []}]),
    lambda g: g.insert(1, ["call_function", "c", "aten.zeros.default", {"t": [{"l": [1]}]},
                           {"d": [["dtype", {"dtype": "os"}]]}]),
])
def test_a_graph_read_as_data_passes_only_identifiers_operators_and_torch_s_own_dtypes(edit):
    import json

    import torch.fx as fx

    from gapfuzz.core.ir import IRError, graph_from_json, graph_to_json

    g = fx.Graph()
    x = g.placeholder("x")
    g.output((g.call_function(torch.ops.aten.relu.default, (x,)),))
    nodes = json.loads(graph_to_json(g))
    graph_from_json(json.dumps(nodes))  # the untouched graph reads back
    edit(nodes)
    with pytest.raises(IRError):
        graph_from_json(json.dumps(nodes))


def test_a_view_from_a_storage_offset_travels_with_one():
    """A stack that ignores storage offsets must see one: a slice keeps a nonzero offset through the wire
    and through clone_exact (the copy each call is fed)."""
    from gapfuzz.core.ir import clone_exact, tensor_from_wire, tensor_to_wire

    base = torch.arange(40.0)
    for t in (base[3:], base.reshape(8, 5)[2:, 1:], base[5:25:2]):
        for copy in (tensor_from_wire(tensor_to_wire(t)), clone_exact(t)):
            assert torch.equal(copy, t) and copy.stride() == t.stride() and copy.storage_offset() > 0

"""Messages that differ only in numbers, shapes, addresses or paths share a template."""
from gapfuzz.core.bugs import key_id
from gapfuzz.core.templates import template


def test_incidental_parts_are_masked():
    a = "RuntimeError: shape '[1, 197, 768]' is invalid for input of size 151296 at 0x7f3a2b"
    b = "RuntimeError: shape '[4, 50, 512]' is invalid for input of size 1024 at 0x55aa10"
    assert template(a) == template(b)
    c = "failed to compile /tmp/torchinductor_root/ab/cabx2.py: buf12 undefined"
    d = "failed to compile /tmp/torchinductor_bob/zz/cqq9.py: buf7 undefined"
    assert template(c) == template(d)


def test_different_words_stay_apart():
    assert template("index out of range") != template("division by zero")
    assert key_id("a", "b") != key_id("a", "c")
    assert key_id("a", "b") == key_id("a", "b")


def test_a_rank_0_onnx_shape_templates_like_any_other_shape():
    """The exporter's amax error names the input's shape; a 0-d input (``Shape([])``) must not split
    the same missing-argument defect into a cluster of its own."""
    msg = "Args: (SymbolicTensor(name='x', type=Tensor(FLOAT), shape=Shape({})),). Kwargs: {{}}."
    assert template(msg.format("[]")) == template(msg.format("[2, 1026]"))


def test_a_type_constraint_printed_in_a_sets_order_is_one_template():
    """ONNX Script names a type constraint's types in a set's order, which changes per process: the same
    missing-argument defect must not split into clusters (nor, across releases, into a regression and a fix)."""
    msg = ("<class 'ValueError'>: Required parameter 'dim' is not provided. Signature: pkg.onnxscript.torch_lib::"
           "aten_amin(self: TRealOrUInt8, dim: T_dim, keepdim: INT = 0) -> (TRealOrUInt8) where TRealOrUInt8={}, "
           "T_dim=INT32 | INT64")
    a, b = template(msg.format("INT8 | DOUBLE | FLOAT | UINT8")), template(msg.format("UINT8 | FLOAT | INT8 | DOUBLE"))
    assert a == b and "TRealOrUInt8=<types>" in a
    assert template("x: A=INT8 | FLOAT") != template("y: A=INT8 | FLOAT")

"""Error messages reduced to templates, vectorised, so that one defect is one cluster.

The rules run as RE2 regexes in pyarrow over whole columns (a million messages in seconds),
and one message goes through the same code, so a record's stored signature and a cluster
key computed later agree. Kept: the words a person searches for, ONNX and OpenVINO operation
types (``Conv``), dtypes, exception names. Masked: graph operator names, one or a list (the first
one a message names is a part of a failure's key of its own, ``failing_op_array``), numbers,
shapes, addresses, hashes, paths and generated names (FX nodes ``add_3``, Inductor ``buf12``,
ONNX exporter ``node_conv2d_1``, OpenVINO friendly names ``convolution_2/aten.convolution...``, FX
references with or without digits ``%silu_default``, compiled-kernel hashes) and lists, whatever their
length (``[%a, %b]`` and ``[%a, %b, %c]`` are one template).
Boilerplate lines (OpenVINO's ``Check '...' failed at src/...``, the torch.onnx exporter's "next
steps", Python traceback frames, a crash's ``Fatal Python error`` line, which its signal already
says, and the list of extension modules after it, however much of it a tail kept) and terminal
colours are dropped first, so the informative lines make the first ``LINES`` of the template; a
crash that printed nothing else is keyed by its signal (``core.bugs``).
"""
from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

LINES = 3  # informative lines kept
MAX_CHARS = 400

# Whole lines that carry no information of their own (anchored, multi-line mode).
_NOISE = (r"(?m)^[ \t]*(?:Check '.*' failed at .*|Exception from .*:|Details:|Summary:|"
          r"Traceback \(most recent call last\):|File \".*\", line .*|[\^~ ]+|"
          r"During handling of the above exception.*|The above exception was the direct cause.*|"
          r"Set TORCH_LOGS.*|You can suppress this exception.*|For more information.*|"
          r"Original traceback:|from user code:|Current thread 0x.*|Thread 0x.*|Stack \(most recent call first\):|"
          r"Extension modules: .*|\w+(?:\.\w+)+(?:, \w+(?:\.\w+)+){3,}.*|Fatal Python error: .*|\[end of output\]|"
          r"FrontEnd API failed with \w+:|Model wasn't fully converted\.|"
          r"Failed to convert the exported program to an ONNX model\..*|- If there is .*|- Create an error report .*|"
          r"## Exception summary|⬆️|\(Refer to the full stack trace above for more information\.\))"
          r"[ \t]*\r?$")

_RULES: list[tuple[str, str]] = [
    (r"\x1b\[[0-9;]*[A-Za-z]", ""),  # terminal colours
    (_NOISE, ""),
    (r"\r", ""),
    # a type constraint's set of types (ONNX Script's ``T=INT8 | DOUBLE | ...``), printed in a set's order, which
    # changes from one process to the next
    (r"\b([A-Z]\w*)=[A-Z][A-Z0-9_]*(?:\[[A-Z0-9_\[\]]*\])?(?:[ \t]*\|[ \t]*[A-Z][A-Z0-9_]*(?:\[[A-Z0-9_\[\]]*\])?)+",
     r"\1=<types>"),
    (r"\n[ \t]*(?:\n[ \t]*)+", "\n"),  # blank lines
    (r"^\s+", ""),
    (r"(?m)^-- ", ""),
    # the first LINES lines; the rest goes (RE2 has no DOTALL by default: (?s) for the tail)
    (r"^((?:[^\n]*\n){0,%d}[^\n]*)(?s:.*)$" % (LINES - 1), r"\1"),
    (r"[ \t]*\n[ \t]*", " | "),
    # OpenVINO friendly names: <fx node>/<aten op>/<OV type>: keep the op and the type
    (r"\b[\w.]+(/aten\.[\w.]+/)", r"<name>\1"),
    (r"(^|[\s'\"(\[=,:])(?:/[\w.@+~-]+)+/?", r"\1<path>"),  # absolute paths
    (r"\b[\w.@+-]+(?:/[\w.@+-]+)+\.(?:py|pyx|cpp|cc|cxx|c|h|hpp|cu|cuh|so|onnx|xml|bin)\b(?::\d+)*"
     r"|\b[\w@+-]+\.(?:py|cpp|cc|cxx|hpp|cu)\b(?::\d+)*", "<path>"),  # relative source files, line numbers
    (r"\b0x[0-9a-fA-F]+\b", "<addr>"),
    # operator names, one or a list: the failing op is a part of the key of its own (failing_op_array)
    (r"\b(?:aten|prims|torchvision|quantized)(?:\.|::)\w+(?:\.\w+)?(?:\s*,\s*(?:aten|prims|torchvision|quantized)"
     r"(?:\.|::)\w+(?:\.\w+)?)*", "<op>"),
    (r"%[A-Za-z_][\w.]*", "%<name>"),  # FX node references, with or without digits
    (r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)*_default(?:_\d+)?\b", "<name>"),  # FX node names: silu_default
    (r"\b(?:[a-z]{0,19}[0-9])[a-z0-9]{12,}\b", "<hash>"),  # compiled-kernel names: long, with a digit early
    (r"\b[0-9a-f]{8,}\b", "<hex>"),
    (r"(?:torch\.)?Size\(\[[^\]]*\]\)", "<shape>"),
    (r"\bShape\(\[\s*\]\)", "Shape(<shape>)"),  # onnx_ir's rank-0 shape, beside its others' Shape(<shape>)
    (r"(\b[a-z]+\d+)?\[(?:[\d?,\s-]*\d[\d?,\s-]*|[?,\s]*\?[?,\s]*)\]", r"\1<shape>"),  # [1, 3], bf16[?,?]
    (r"\{[\d?,\s-]*\d[\d?,\s-]*\}", "<shape>"),  # {1,3,224,224}
    (r"\(\s*-?\d+(?:\s*,\s*-?\d+)+\s*,?\s*\)", "<shape>"),  # (1, 3, 224)
    (r"\b\d+(?:x\d+)+\b", "<shape>"),  # 2x3, 1x2x2
    # generated names: FX nodes (add_3, arg0_1), Inductor buffers, ONNX exporter nodes, symbols
    (r"\bnode_\w+", "<name>"),
    (r"\b((?:input|output) parameter) \(\w+\)", r"\1 (<name>)"),  # ONNX Runtime names the graph value
    (r"\b(?:buf|tmp|arg|primals|tangents|in_ptr|out_ptr|xindex|x|y|s|u|v|t)\d+(?:_\d+)*\b", "<name>"),
    (r"\b[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z][A-Za-z0-9]*)*_\d+\b", "<name>"),
    (r"\b\d+(?:\.\d+)?(ms|s|[KMGT]i?B)\b", r"<num>\1"),  # 300s, 1.5GiB
    (r"\b[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?\b", "<num>"),
    # lists of masked items, whatever their length: [<name>, <name>], (<num>, <num>, <num>)
    (r"(?:%?<(?:name|num|shape|hex|hash)>(?:\.\w+)*|'[^'\n]{0,80}')(?:\s*,\s*(?:%?<(?:name|num|shape|hex|hash)>"
     r"(?:\.\w+)*|'[^'\n]{0,80}'))+", "<list>"),
    (r"[ \t]+", " "),
]


def template_array(messages: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """The template of every message of a string column (nulls give ``""``)."""
    text = pc.fill_null(pc.cast(messages, pa.large_string()), "")
    text = pc.utf8_slice_codeunits(text, 0, 4000)
    for pattern, repl in _RULES:
        text = pc.replace_substring_regex(text, pattern=pattern, replacement=repl)
    return pc.utf8_trim_whitespace(pc.utf8_slice_codeunits(text, 0, MAX_CHARS))


def _per_distinct(reduce, messages: pa.Array | pa.ChunkedArray) -> pa.Array:
    """``reduce`` applied to each distinct message once (dictionary encoding), then spread back."""
    if isinstance(messages, pa.ChunkedArray):
        messages = messages.combine_chunks()
    encoded = pc.dictionary_encode(pc.fill_null(pc.cast(messages, pa.large_string()), ""))
    return pc.take(reduce(encoded.dictionary), encoded.indices)


def template_unique(messages: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Like ``template_array`` but each distinct message is reduced once."""
    return _per_distinct(template_array, messages)


# The graph operator a failure names, first match wins: an FX node's target, the ONNX exporter's
# OpOverload, a dotted or C++ operator name, then an FX node name (``%silu_1``); the op is kept
# without its overload (``aten.add.Tensor``, ``aten::add`` and ``%add_tensor_2`` are ``aten.add``).
_NAMESPACES = r"(?:aten|prims|quantized|torchvision)"
_OPERATOR_PATTERNS = (
    r"target=torch\.ops\.(?P<op>%s\.\w+)\.\w+" % _NAMESPACES,
    r"OpOverload\(op='(?P<op>%s\.\w+)'" % _NAMESPACES,
    r"\b(?P<op>%s(?:\.|::)\w+)" % _NAMESPACES,
    r"%(?P<op>[a-z][a-z0-9_]*?)(?:_(?:default|tensor|scalar|int|dim|self|other|vec|list|intlist|dim_intlist))?"
    r"(?:_\d+)?\b",
)
_NOT_OPS = r"^aten\.(?:arg\d|primals|tangents|xs|getitem|p_|b_|c_|x\b|input|self|l_|output|_tensor_constant)"


def failing_op_array(messages: pa.Array | pa.ChunkedArray) -> pa.Array:
    """The graph operator each failure message names (``aten.silu``, no overload), "" when it names
    none: structure comes before wording in a failure's identity (``core.bugs``)."""
    text = pc.utf8_slice_codeunits(pc.fill_null(pc.cast(messages, pa.large_string()), ""), 0, 8000)
    found = pa.nulls(len(text), pa.large_string())
    dot = pa.scalar(".", pa.large_string())
    for pattern in _OPERATOR_PATTERNS:
        op = pc.struct_field(pc.extract_regex(text, pattern=pattern), "op")
        if pattern.startswith("%"):  # an FX node is named after its op: silu, silu_1, silu_default
            op = pc.binary_join_element_wise(pa.scalar("aten", pa.large_string()), op, dot)
            op = pc.if_else(pc.fill_null(pc.match_substring_regex(op, _NOT_OPS), False),
                            pa.scalar(None, pa.large_string()), op)  # an input or a getitem names no op
        found = pc.coalesce(found, pc.replace_substring(op, "::", "."))
    return pc.fill_null(found, "")


def failing_op_unique(messages: pa.Array | pa.ChunkedArray) -> pa.Array:
    """``failing_op_array``, each distinct message read once."""
    return _per_distinct(failing_op_array, messages)


def failing_op(message: str | None) -> str:
    """The graph operator one failure message names, "" when none."""
    return failing_op_array(pa.array([message or ""], pa.large_string()))[0].as_py()


def template(message: str | None) -> str:
    """The first informative lines of one message with everything incidental masked."""
    if not message:
        return ""
    return template_array(pa.array([str(message)], pa.large_string()))[0].as_py()

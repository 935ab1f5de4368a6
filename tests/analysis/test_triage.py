"""Clusters from real torch, Inductor, ONNX Runtime and OpenVINO messages; ids, severity, vendor flag, tables."""
from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from gapfuzz.analysis.clusters import clusters
from gapfuzz.analysis.portability import seeds, slowdowns, support, tolerance_curve
from gapfuzz.core.bugs import error_band
from gapfuzz.core.failures import signature
from gapfuzz.core.templates import failing_op, template, template_array

# Pairs of real messages that differ only in numbers, shapes, addresses, paths or generated names.
SAME = {
    "torch matmul": ("mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)",
                     "mat1 and mat2 shapes cannot be multiplied (7x3 and 9x5)"),
    "torch view": ("shape '[4, 50, 7]' is invalid for input of size 151296",
                   "shape '[3, 11, 7]' is invalid for input of size 25600"),
    "torch conv": ("Given groups=1, weight of size [64, 3, 7, 7], expected input[1, 4, 224, 224] to have 3 channels, "
                   "but got 4 channels instead",
                   "Given groups=1, weight of size [16, 3, 3, 3], expected input[2, 5, 32, 32] to have 3 channels, "
                   "but got 5 channels instead"),
    "torch index": ("index 5 is out of bounds for dimension 0 with size 3",
                    "index 17 is out of bounds for dimension 0 with size 10"),
    "inductor lowering": (
        "backend='inductor' raised:\nLoweringException: AssertionError: \n  target: aten.cat.default\n  args[0]: "
        "[TensorBox(StorageBox(\n    InputBuffer(name='arg0_1', layout=FixedLayout('cpu', torch.float32, "
        "size=[1, 3, 8, 8], stride=[192, 64, 8, 1]))\n  ))]",
        "backend='inductor' raised:\nLoweringException: AssertionError: \n  target: aten.cat.default\n  args[0]: "
        "[TensorBox(StorageBox(\n    InputBuffer(name='arg3_1', layout=FixedLayout('cpu', torch.float32, "
        "size=[2, 16, 4, 4], stride=[256, 16, 4, 1]))\n  ))]"),
    "inductor compile": (
        "failed to compile /tmp/torchinductor_root/ab/cabx2qk3.py: buf12 undefined at 0x7f3a2b10",
        "failed to compile /tmp/torchinductor_bob/zz/cqq9a1.py: buf7 undefined at 0x55aa10ff"),
    "onnxruntime invalid graph": (
        "[ONNXRuntimeError] : 10 : INVALID_GRAPH : This is an invalid model. Type Error: Type 'tensor(bfloat16)' of "
        "input parameter (tensors_0) of operator (Conv) in node (node_conv2d) is invalid.",
        "[ONNXRuntimeError] : 10 : INVALID_GRAPH : This is an invalid model. Type Error: Type 'tensor(bfloat16)' of "
        "input parameter (tensors_2) of operator (Conv) in node (node_conv2d_3) is invalid."),
    "onnxruntime parameter names": (
        "[ONNXRuntimeError] : 10 : INVALID_GRAPH : This is an invalid model. Type Error: Type 'tensor(bfloat16)' of "
        "input parameter (x) of operator (HardSwish) in node (n0_19) is invalid.",
        "[ONNXRuntimeError] : 10 : INVALID_GRAPH : This is an invalid model. Type Error: Type 'tensor(bfloat16)' of "
        "input parameter (_to_copy) of operator (HardSwish) in node (node_HardSwish_756) is invalid."),
    "onnxruntime not implemented": (
        "[ONNXRuntimeError] : 9 : NOT_IMPLEMENTED : Could not find an implementation for Equal(19) node with name "
        "'node_Equal_0'",
        "[ONNXRuntimeError] : 9 : NOT_IMPLEMENTED : Could not find an implementation for Equal(13) node with name "
        "'node_Equal_12'"),
    "onnxruntime reshape": (
        "[ONNXRuntimeError] : 1 : FAIL : Non-zero status code returned while running Reshape node. Name:'node_view_2' "
        "Status Message: /onnxruntime_src/onnxruntime/core/providers/cpu/tensor/reshape_helper.h:47 "
        "onnxruntime::ReshapeHelper::ReshapeHelper input_shape_size == size was false. The input tensor cannot be "
        "reshaped to the requested shape. Input shape:{1,197,768}, requested shape:{4,50,7}",
        "[ONNXRuntimeError] : 1 : FAIL : Non-zero status code returned while running Reshape node. Name:'node_view' "
        "Status Message: /onnxruntime_src/onnxruntime/core/providers/cpu/tensor/reshape_helper.h:41 "
        "onnxruntime::ReshapeHelper::ReshapeHelper input_shape_size == size was false. The input tensor cannot be "
        "reshaped to the requested shape. Input shape:{2,8}, requested shape:{3,5}"),
    "torch.onnx exporter": tuple(
        "Failed to convert the exported program to an ONNX model. \x1b[96mThis is step 3/3\x1b[0m of exporting the "
        "model to ONNX. Next steps:\n- If there is a missing ONNX function, implement it and register it to the "
        "registry.\n- If there is an internal error during ONNX conversion, debug the error and submit a PR to "
        "PyTorch.\n\n## Exception summary\n\n<class 'torch.onnx._internal.exporter._errors.DispatchError'>: No ONNX "
        "function found for <OpOverload(op='aten.special_chebyshev_polynomial_w', overload='default')>. Failure "
        "message: No decompositions registered for the real-valued input\n⬆️\n"
        "<class 'torch.onnx._internal.exporter._errors.ConversionError'>: Error when translating node "
        f"%special_chebyshev_polynomial_w : [num_users={n}] = "
        f"call_function[target=torch.ops.aten.special_chebyshev_polynomial_w.default](args = (%tensors_{n}, "
        f"%tensors_{n + 1}), kwargs = {{}})." for n in (0, 4)),
    "openvino conversion": (
        "Check 'false' failed at src/frontends/common_translators/src/unconverted_ops_report.cpp:151:\nFrontEnd API "
        "failed with OpConversionFailure:\nModel wasn't fully converted.\nSummary:\n-- No conversion rule found for "
        "operations: aten._upsample_bicubic2d_aa.default",
        "Check 'false' failed at src/frontends/common_translators/src/unconverted_ops_report.cpp:163:\nFrontEnd API "
        "failed with OpConversionFailure:\nModel wasn't fully converted.\nSummary:\n-- No conversion rule found for "
        "operations: aten._upsample_bicubic2d_aa.default"),
    "openvino cpu plugin": (
        "Exception from src/inference/src/cpp/core.cpp:117:\nException from src/inference/src/dev/plugin.cpp:54:\n"
        "Check 'newNode' failed at src/plugins/intel_cpu/src/node.cpp:1626:\nUnsupported operation of type: "
        "Convolution name: convolution/aten.convolution.default/Convolution\nDetails:\nException from "
        "src/plugins/intel_cpu/src/nodes/conv.cpp:195:\nNot Implemented:\nDoesn't support dynamic weights shape",
        "Exception from src/inference/src/cpp/core.cpp:121:\nException from src/inference/src/dev/plugin.cpp:54:\n"
        "Check 'newNode' failed at src/plugins/intel_cpu/src/node.cpp:1630:\nUnsupported operation of type: "
        "Convolution name: convolution_7/aten.convolution.default/Convolution\nDetails:\nException from "
        "src/plugins/intel_cpu/src/nodes/conv.cpp:199:\nNot Implemented:\nDoesn't support dynamic weights shape"),
}


@pytest.mark.parametrize("name", sorted(SAME))
def test_messages_differing_only_in_numbers_shapes_names_share_a_template(name):
    a, b = SAME[name]
    assert template(a) == template(b), (template(a), template(b))
    assert template(a).strip()


def test_templates_and_failing_ops_keep_what_a_person_searches_for():
    ov = "Check 'false' failed at src/x.cpp:1:\nSummary:\n-- No conversion rule found for operations: aten.{}.default"
    assert signature("convert", "E", ov.format("addbmm")) != signature("convert", "E", ov.format("_trilinear"))
    assert failing_op(ov.format("addbmm")) == "aten.addbmm"
    assert failing_op(ov.format("addbmm") + ", aten.cummax.default") == "aten.addbmm"  # the first it names
    assert template(ov.format("addbmm") + ", aten.cummax.default") == template(ov.format("addbmm"))
    assert "Convolution" in template(SAME["openvino cpu plugin"][0])
    assert failing_op(SAME["openvino cpu plugin"][0]) == "aten.convolution"
    assert "tensor(bfloat16)" in template(SAME["onnxruntime invalid graph"][0])
    assert failing_op(SAME["inductor lowering"][0]) == "aten.cat"
    onnx = template(SAME["torch.onnx exporter"][0])
    assert failing_op(SAME["torch.onnx exporter"][0]) == "aten.special_chebyshev_polynomial_w"
    assert "DispatchError" in onnx and "\x1b" not in onnx
    assert failing_op("no operator named here") == ""
    assert template("conv2d got float16") != template("conv3d got bfloat16")
    assert template("index out of range") != template("division by zero")


def test_generated_names_with_or_without_digits_and_lists_of_any_length_share_a_template():
    a = "planted fault at %silu_default: its users [%mul_2, %add] disagree"
    b = "planted fault at %silu_default_3: its users [%mul_7, %add_1, %cat] disagree"
    assert template(a) == template(b) and failing_op(a) == failing_op(b) == "aten.silu"
    assert failing_op("cannot lower %silu_2 (its users: [%mul])") == "aten.silu"
    assert failing_op("placeholder %arg0_1 is bad") == "" and failing_op("bad %argmax_1") == "aten.argmax"
    assert failing_op("quantized::linear failed") == "quantized.linear"
    assert failing_op("aten::add") == failing_op("aten.add.Tensor") == failing_op("%add_tensor_2") == "aten.add"
    assert template("float32, float16, bfloat16, int8 are the dtypes") == \
        "float32, float16, bfloat16, int8 are the dtypes"
    assert "planted fault" in template(a)
    kernels = ("Exception in kernel cj75wjonhg4kmbq2x6vgyqkjwzj5r3ybcsegm4xzk2gba3n, node 12",
               "Exception in kernel ca2bx7l3jtyn6wq5pvcf5d3muhk6ssbrvqpz3oof4pykfgjkqa, node 7")
    assert template(kernels[0]) == template(kernels[1])


def test_column_and_single_message_agree():
    msgs = [m for pair in SAME.values() for m in pair] + [None, ""]
    assert template_array(pa.array(msgs)).to_pylist() == [template(m) for m in msgs]


def rec(**kw) -> dict:
    """A record dict with the columns clustering reads; the rest take plain defaults."""
    row = {"campaign": "c", "variant_id": "timm/a#1", "seed_id": "timm/a", "seed_source": "timm", "family": "fam",
           "backend": "onnxruntime@cpu", "stack": "onnxruntime", "device": "cpu", "status": "error",
           "stage": "compile", "error_type": "RuntimeError", "message": "boom", "cause": None, "verdict": None,
           "symptom": None, "first_div_op": None, "output_dtype": None, "tol_ratio": None, "tol_needed": None,
           "task_agree": None, "node_count": 10, "mutations": [], "ops": ["aten.add.Tensor"], "latency_ms": None}
    row.update(kw)
    return row


def frame(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(rows)


def test_different_error_type_or_stage_are_different_clusters():
    msg = SAME["onnxruntime not implemented"]
    c = clusters(frame([rec(message=msg[0]), rec(message=msg[1], variant_id="timm/b#0", seed_id="timm/b"),
                        rec(message=msg[0], error_type="ValueError"), rec(message=msg[0], stage="run")]))
    assert len(c) == 3
    merged = c[c["count"] == 2].iloc[0]
    assert merged["seeds"] == 2 and merged["error_type"] == "RuntimeError" and merged["stage"] == "compile"


def test_cluster_ids_are_stable_across_campaigns():
    def campaign(name: str, scale: int) -> pd.DataFrame:
        rows = [rec(campaign=name, variant_id=f"{name}/v{i}#0", seed_id=f"{name}/v{i}", message=pair[i % 2].replace(
                "151296", str(scale))) for i, pair in enumerate(SAME.values())]
        rows.append(rec(campaign=name, status="mismatch", stage="compare", verdict="target-divergent",
                        symptom="numeric", first_div_op="aten.gelu.default", output_dtype="float32",
                        tol_ratio=37.0 * scale, backend="openvino@cpu", stack="openvino"))
        return frame(rows[::-1] if scale > 1 else rows)
    a, b = clusters(campaign("before", 1)), clusters(campaign("after", 2))
    assert len(a) == len(SAME) + 1
    assert sorted(a["cluster"]) == sorted(b["cluster"])


def test_labels_of_one_stack_share_a_cluster_unless_an_option_explains_the_divergence():
    crash = [rec(backend=b, stack="openvino", message=SAME["openvino conversion"][0], stage="convert")
             for b in ("openvino@cpu", "openvino-f32@cpu")]
    div = [rec(backend=b, stack="openvino", status="mismatch", stage="compare", verdict="target-divergent",
               symptom="nonfinite", output_dtype="float32", tol_ratio=300.0, first_div_op="aten.conv2d.default")
           for b in ("openvino@cpu", "openvino-f32@cpu")]
    c = clusters(frame(crash + div))
    assert c[c["kind"] == "crash"]["backends"].tolist() == [["openvino-f32@cpu", "openvino@cpu"]]
    assert c[c["kind"] == "discrepancy"]["backends"].tolist() == [["openvino-f32@cpu", "openvino@cpu"]]
    bf16 = [rec(**{**r, "explanation": "bfloat16", "variant_id": "timm/b#0"}) for r in div[:1]]
    c = clusters(frame(div[1:] + bf16))
    assert sorted(c["explanation"].fillna("-")) == ["-", "bfloat16"]  # the default precision's own behaviour


def test_severity_order_and_vendor_flag():
    rows = [
        rec(status="mismatch", stage="compare", verdict="target-divergent", symptom="numeric", tol_ratio=50.0),
        rec(status="mismatch", stage="compare", verdict="target-divergent", symptom="numeric", tol_ratio=50.0,
            task_agree=0.5, variant_id="timm/a#2"),
        rec(status="crash", stage="run", error_type="SIGSEGV", message="Fatal Python error: Segmentation fault"),
        rec(status="timeout", stage="run", error_type="timeout", cause="limit:timeout 300s", message="x 1"),
        rec(status="error", message="mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)"),
        rec(status="unsupported", message="not supported"),
        rec(status="mismatch", stage="compare", verdict="ill-conditioned", symptom="numeric", tol_ratio=5e4),
        rec(status="mismatch", stage="compare", verdict="amplified", symptom="numeric", tol_ratio=5.0),
        rec(status="mismatch", stage="compare", verdict="reference-divergent", symptom="numeric", tol_ratio=5.0),
    ]
    c = clusters(frame(rows))
    assert c["level"].tolist()[:5] == ["crash", "hang/oom", "error", "wrong answer", "numeric"]
    assert c["severity"].is_monotonic_decreasing
    div = c[c["kind"] == "discrepancy"].set_index("verdict")
    assert div.loc["target-divergent", "vendor"].all()
    assert not div.drop(index="target-divergent")["vendor"].any()
    # the model's top-1 changing is severity, not identity: one cluster, ranked a wrong answer
    assert div.loc["target-divergent", "count"] == 2 and div.loc["target-divergent", "level"] == "wrong answer"


def test_timeouts_cluster_by_limit_not_by_what_the_process_printed():
    rows = [rec(status="timeout", stage="run", error_type="timeout", cause=f"limit:timeout {s}s", message=m)
            for s, m in ((300, "epoch 1 of 9"), (300, "loading weights from /tmp/x/y.bin"), (60, ""))]
    c = clusters(frame(rows))
    assert len(c) == 1 and c["count"].iloc[0] == 3 and c["template"].iloc[0] == "limit:timeout <num>s"


def test_cluster_summary_counts_seeds_families_mutations_and_smallest_representative():
    msg = SAME["torch view"]
    rows = [rec(variant_id="timm/a#1", seed_id="timm/a", family="resnet", node_count=70, mutations=["insert_unary"],
                message=msg[0]),
            rec(variant_id="timm/b#0", seed_id="timm/b", family="vit", node_count=12, mutations=[], message=msg[1]),
            rec(variant_id="timm/b#2", seed_id="timm/b", family="vit", node_count=40,
                mutations=["insert_unary", "transpose_pair"], message=msg[0])]
    c = clusters(frame(rows)).iloc[0]
    assert (c["count"], c["variants"], c["seeds"], c["unmutated"]) == (3, 3, 2, 1)
    assert c["families"] == ["vit", "resnet"] and c["mutations"] == ["insert_unary", "transpose_pair"]
    assert c["representative"] == "timm/b#0" and c["rep_nodes"] == 12


def test_error_band_buckets_by_decade():
    bands = error_band(pa.array([0.5, 1.0, 9.9, 10.0, 3e5, 1e9, np.nan, None, np.inf, 0.0])).to_pylist()
    assert bands == ["<1", "1e0", "1e0", "1e1", "1e5", "1e6+", "-", "-", "1e6+", "<1"]


def test_no_clusters_when_everything_agrees():
    c = clusters(frame([rec(status="ok", stage=None, message=None, verdict="agree")]))
    assert c.empty and "cluster" in c.columns


def portability_frame() -> pd.DataFrame:
    rows = []
    for seed, ops in (("ops/add/0", ["aten.add.Tensor"]), ("ops/conv/0", ["aten.conv2d.default"]),
                      ("timm/m", ["aten.add.Tensor", "aten.conv2d.default"])):
        for b, lat in (("eager@cpu", 1.0), ("ort@cpu", 2.0)):
            fails = b == "ort@cpu" and "aten.conv2d.default" in ops
            rows.append(rec(variant_id=f"{seed}#0", seed_id=seed, seed_source=seed.split("/")[0], backend=b,
                            status="unsupported" if fails else "ok", stage="compile" if fails else None, ops=ops,
                            latency_ms=None if fails else lat,
                            tol_needed=None if fails or b == "eager@cpu" else 1e-6))
    return frame(rows)


def test_support_and_seed_portability_follow_their_definitions():
    df = portability_frame()
    s = support(df).set_index(["op", "backend"])
    assert s.loc[("aten.conv2d.default", "ort@cpu"), "runs"] == 2
    assert not s.loc[("aten.conv2d.default", "ort@cpu"), "supported"]
    assert s.loc[("aten.add.Tensor", "ort@cpu"), "share"] == 0.5  # one of its two graphs also held a conv
    p = seeds(df).set_index("backend")
    assert p.loc["ort@cpu", "works"] == 1 and p.loc["ort@cpu", "relative"] == pytest.approx(1 / 3)
    assert p.loc["ort@cpu", "op_relative"] == 0.5 and p.loc["ort@cpu", "op_fail_share"] == 0.5
    assert p.loc["ort@cpu", "ops_relative"] == 0.5 and p.loc["eager@cpu", "relative"] == 1


def test_slowdowns_and_tolerance_curve():
    df = portability_frame()
    s = slowdowns(df)
    assert s["backend"].unique().tolist() == ["ort@cpu"] and (s["slowdown"] == 2.0).all()
    t = tolerance_curve(df, [1e-7, 1e-6, 1e-5]).set_index("tolerance")
    assert t["pass_rate"].tolist() == [0.0, 1.0, 1.0] and (t["runs"] == 1).all()


def test_analysis_api_does_not_import_torch():
    code = ("import sys; import gapfuzz.analysis.api, gapfuzz.analysis.clusters, gapfuzz.analysis.portability, "
            "gapfuzz.analysis.report, gapfuzz.analysis.triage; heavy = {'torch', 'ray'} & set(sys.modules); "
            "assert not heavy, heavy; print('ok')")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "ok" in proc.stdout, proc.stderr


@pytest.mark.parametrize("command", ["triage", "diff", "report", "bad input"])
def test_reading_a_run_from_the_cli_imports_neither_torch_nor_ray(tmp_path, command):
    run = write_run(tmp_path / "run", [SAME["torch view"][0]])
    args = {"triage": ["triage", run], "diff": ["diff", run, run], "report": ["report", run],
            "bad input": ["triage", tmp_path / "missing"]}[command]
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "gapfuzz.fuzzer.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == (2 if command == "bad input" else 0), proc.stderr[-2000:]
    imported = [line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")]
    heavy = [m for m in imported if m.split(".")[0] in ("torch", "ray")]
    assert imported and not heavy, heavy[:5]


def test_a_cell_holding_a_bar_or_a_newline_stays_in_its_row_and_column():
    from gapfuzz.analysis.table import format_table, markdown_table

    md = markdown_table(pd.DataFrame({"a|b": ["x | y", "two\nlines"], "n": [1.5, float("nan")]})).splitlines()
    assert md == ["| a\\|b | n |", "|---|---|", "| x \\| y | 1.5 |", "| two lines |  |"]
    assert all(len(re.split(r"(?<!\\)\|", line)) == 4 for line in md)  # two cells a row, as in the header
    text = format_table(["cluster", "what"], [["c-1", "a | b\nc"], ["c-22", "x" * 200], ["[red]c[/red]", None]],
                        max_width=20).splitlines()
    assert text[0].split() == ["cluster", "what"] and set(text[1]) == {"-", " "}
    assert text[2:] == ["c-1           a | b c", "c-22          " + "x" * 19 + "…", "[red]c[/red]"]  # no markup


def test_seed_failures_name_the_source_and_limit_of_a_worker_that_hit_one():
    from gapfuzz.analysis.seed_report import top_failures

    df = pd.DataFrame([dict(seed_id=f"timm/m{i}", source="", status="oom", stage="build", message=None,
                            error_type="limit:memory 5.0GiB") for i in range(2)] +
                      [dict(seed_id="timm/x", source="timm", status="error", stage="capture", message="no",
                            error_type="torch._dynamo.exc.Unsupported")])
    rows = top_failures(df)[["source", "error_type", "seeds"]].values.tolist()
    assert rows == [["timm", "limit:memory 5.0GiB", 2], ["timm", "Unsupported", 1]]


def write_run(path, messages: list[str], status: str = "error"):
    """A run folder written through the real store, as a campaign would."""
    from gapfuzz.results.schema import RunRecord
    from gapfuzz.results.store import RecordStore

    path.mkdir(parents=True)
    (path / "campaign.yaml").write_text("name: t\nbackends: {reference: eager@cpu, oracle: eager-fp64@cpu}\n")
    records = [RunRecord(campaign="t", variant_id=f"timm/m{i}#0", seed_id=f"timm/m{i}", backend=b, stack=b[:-4],
                         device="cpu", status="ok", ops=["aten.add.Tensor"], node_count=3, latency_ms=1.0 + i)
               for i in range(len(messages)) for b in ("eager@cpu", "onnxruntime@cpu")]
    for r, msg in zip(records[1::2], messages):
        r.status, r.stage, r.error_type, r.message, r.latency_ms = status, "compile", "RuntimeError", msg, None
    RecordStore(path).write(records)
    return path


def test_cli_triage_report_and_diff(tmp_path, capsys):
    from gapfuzz.fuzzer.cli.main import main

    view, matmul = SAME["torch view"], SAME["torch matmul"]
    before = write_run(tmp_path / "before", [view[0], view[1], matmul[0]])
    after = write_run(tmp_path / "after", [view[1], "a brand new failure", view[0]])
    assert main(["triage", str(before)]) == 0
    out = capsys.readouterr().out
    assert "2 clusters" in out and "is invalid for input of size" in out
    assert main(["diff", str(before), str(after)]) == 0
    out = capsys.readouterr().out
    assert "1 new, 1 gone, 1 still there" in out
    assert main(["report", str(after)]) == 0
    assert capsys.readouterr().out.strip() == str(after / "report.html") and (after / "report.html").stat().st_size
    assert main(["triage", str(tmp_path / "missing")]) == 2
    assert main(["diff", str(before), str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(line.startswith("gapfuzz: ") for line in err)
    assert "no such run folder" in err[0] and "holds no records" in err[1]
    known = tmp_path / "known.yaml"
    known.write_text("_by_message:\n  - {name: view, match: 'is invalid for input', class: defect, note: x}\n")
    assert main(["diff", str(before), str(after), "--known", str(known)]) == 0
    assert "1 new, 1 gone, 1 still there" in capsys.readouterr().out  # the new one is no known issue
    assert main(["triage", str(after), "--known", str(known)]) == 0
    assert "view" in capsys.readouterr().out
    known.write_text("_known:\n  - {name: v, class: defect, where: {explantion: bfloat16}}\n")
    assert main(["triage", str(after), "--known", str(known)]) == 2
    assert main(["triage", str(after), "--catalog", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "did you mean 'explanation'" in err[0] and "holds no seed catalog" in err[1]

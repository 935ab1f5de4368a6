"""analysis.vendor: one issue text per behaviour per stack, a README table and a strict-xfail pytest file."""
from __future__ import annotations

import ast
import base64
import json
import re
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gapfuzz.analysis.api import load_run
from gapfuzz.analysis.vendor import _cell, digest
from gapfuzz.core.text import fenced

CONVERT = ("Check 'false' failed at src/frontends/common_translators/src/unconverted_ops_report.cpp:151:\nFrontEnd API "
           "failed with OpConversionFailure:\nModel wasn't fully converted.\nSummary:\n-- No conversion rule found for "
           "operations: aten.elu.default")
RELU_REPRO = ('"""NaN at relu: ```` in a docstring."""\nimport os, sys\nassert os.path.exists("model.onnx")\n'
              'sys.exit(1)\n')
CONV_REPRO = "import sys\n" + "x = 1\n" * 8 + "sys.exit(0)  # fixed: strict xfail must say XPASS\n"


def _records(n_relu=3):
    """(backend, seed, status, fields) of each run: NaN at two ops and a bfloat16 behaviour at two ops on
    OpenVINO, a convert failure, an integer divergence at an op whose name holds a |; ONNX Runtime's own."""
    div = {"status": "mismatch", "stage": "compare", "verdict": "target-divergent", "output_dtype": "float32",
           "tol_ratio": 10.0, "task_agree": 1.0}
    nan = {**div, "symptom": "nonfinite", "node_symptom": "nonfinite"}
    runs = [("openvino@cpu", f"m{i}", {**nan, "first_div_op": "aten.relu.default"}) for i in range(n_relu)]
    runs += [("openvino@cpu", "m9", {**nan, "first_div_op": "aten.conv2d.default"})]
    runs += [("openvino@cpu", f"b{i}", {**div, "symptom": "numeric", "node_symptom": "numeric",
                                         "explanation": "bfloat16", "first_div_op": op})
             for i, op in enumerate(["aten.linear.default"] * 5 + ["aten.matmul.default"] * 2)]
    runs += [("openvino@cpu", "c0", {"status": "error", "stage": "convert", "error_type": "OpConversionFailure",
                                     "message": CONVERT})]
    runs += [("openvino@cpu", "i0", {**div, "symptom": "integer", "node_symptom": "integer", "first_div_op": "my|op"})]
    runs += [("onnxruntime@cpu", "m0", {**nan, "first_div_op": "aten.relu.default"}),
             ("onnxruntime@cpu", "m1", {**div, "symptom": "value", "node_symptom": "value",
                                        "first_div_op": "aten.gelu.default"})]
    return runs


def write_run(path):
    from gapfuzz.results.schema import RunRecord
    from gapfuzz.results.store import RecordStore

    path.mkdir(parents=True)
    (path / "campaign.yaml").write_text("name: t\nbackends: {reference: eager@cpu, oracle: eager-fp64@cpu}\n")
    records = []
    for i, (backend, seed, fields) in enumerate(_records()):
        common = dict(campaign="t", variant_id=f"timm/{seed}#{i}", seed_id=f"timm/{seed}", seed_source="timm",
                      family="f", ops=["aten.relu.default"], node_count=3, device="cpu")
        records.append(RunRecord(backend="eager@cpu", stack="eager", status="ok", **common))
        records.append(RunRecord(backend=backend, stack=backend.split("@")[0], **common, **fields))
    RecordStore(path).write(records)
    return path


def _ids(run_dir):
    c = load_run(run_dir).clusters(benign=True)
    ov = c[c["backends"].map(lambda b: "openvino@cpu" in b)]
    by = {}
    for row in ov.itertuples():
        key = row.explanation or (row.failing_op if row.kind == "crash" else row.first_div_op)
        by[key] = row.cluster
    return by


def _repro(run_dir, cid, text, status="reproducible", files=None, **shrink):
    folder = run_dir / "repros" / cid
    folder.mkdir(parents=True)
    (folder / "repro.py").write_text(text)
    for name, data in (files or {}).items():
        (folder / name).write_bytes(data)
    (folder / "shrink.json").write_text(json.dumps({"status": status, "form": "onnx file", "lines": text.count("\n"),
                                                    "notes": [], "failures": 3, "tries": 3, **shrink}))


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    run_dir = write_run(tmp_path_factory.mktemp("vendor") / "run")
    ids = _ids(run_dir)
    _repro(run_dir, ids["aten.relu.default"], RELU_REPRO, files={"model.onnx": b"\x00not really onnx\x01"})
    _repro(run_dir, ids["aten.conv2d.default"], CONV_REPRO)
    _repro(run_dir, ids["aten.elu"], "print('flaky')\n", status="flaky", failures=1,
           notes=["index-only: only indices differ"])
    out = run_dir.parent / "digest"
    return run_dir, ids, out, digest(load_run(run_dir), "openvino", out)


def test_one_issue_text_per_behaviour_of_the_stack_only(folder):
    run_dir, ids, out, behaviours = folder
    by = {b.slug: b for b in behaviours}
    assert set(by) == {"nan-inf", "explained-bfloat16", "conversion-gap", "integer"}
    assert sorted(p.name for p in out.iterdir()) == sorted([*(f"{s}.md" for s in by), "README.md",
                                                            "test_openvino_gapfuzz.py"])
    nan = by["nan-inf"]
    assert nan.ops == ["aten.relu.default", "aten.conv2d.default"] and nan.runs == 4 and not nan.explained
    assert sorted(nan.clusters) == sorted([ids["aten.relu.default"], ids["aten.conv2d.default"]])
    assert nan.reproducers == 2 and by["conversion-gap"].reproducers == 0
    assert by["explained-bfloat16"].explained and by["explained-bfloat16"].name == "bfloat16 precision default"
    assert by["explained-bfloat16"].ops == ["aten.linear.default", "aten.matmul.default"]
    assert [b.runs for b in behaviours] == sorted((b.runs for b in behaviours), reverse=True)
    assert "aten.gelu.default" not in "".join(p.read_text() for p in out.glob("*.md"))  # ONNX Runtime's


def test_the_nan_issue_lists_both_operators_shortest_reproducer_first(folder):
    run_dir, ids, out, _ = folder
    text = (out / "nan-inf.md").read_text()
    assert "aten.relu.default" in text.split("\n")[0] and "aten.conv2d.default" in text.split("\n")[0]
    assert "| `aten.relu.default` | 3 | 3 |" in text and "| `aten.conv2d.default` | 1 | 1 |" in text
    lead, conv = text.index(RELU_REPRO.rstrip()), text.index(CONV_REPRO.rstrip())
    assert text.index("## Reproducer") < lead < text.index("## Operators") < conv
    assert "`````python\n" + RELU_REPRO in text  # fenced longer than the four backticks it holds
    assert "model.onnx" in text and "gapfuzz repro" not in text


def test_explained_and_unreproduced_behaviours_say_so(folder):
    run_dir, ids, out, _ = folder
    explained = (out / "explained-bfloat16.md").read_text()
    assert "Explained, not a defect" in explained
    assert f"`gapfuzz repro {run_dir} {ids['bfloat16']}`" in explained
    assert "| `aten.linear.default` | 5 | 5 |" in explained and "| `aten.matmul.default` | 2 | 2 |" in explained
    convert = (out / "conversion-gap.md").read_text()
    assert "flaky (failed 1 of 3 fresh runs)" in convert and "index-only: only indices differ" in convert
    assert "print('flaky')" not in convert and "OpConversionFailure" in convert
    readme = (out / "README.md").read_text()
    assert "bfloat16 precision default](explained-bfloat16.md) (explained, not a defect)" in readme
    rows = [r for r in readme.splitlines() if r.startswith("| [")]
    assert len(rows) == 4 and all(len(re.split(r"(?<!\\)\|", r)) == 7 for r in rows)  # my|op escaped
    assert "my\\|op" in readme


def test_the_pytest_file_embeds_each_reproducer_as_a_strict_xfail(folder, tmp_path):
    run_dir, ids, out, _ = folder
    source = (out / "test_openvino_gapfuzz.py").read_text()
    compile(source, "test_openvino_gapfuzz.py", "exec")
    assert source.count("@pytest.mark.xfail(strict=True") == 2 and "gapfuzz" not in source.split('"""')[2]
    values = {t.id: ast.literal_eval(n.value) for n in ast.parse(source).body if isinstance(n, ast.Assign)
              for t in n.targets}
    assert sorted(v for k, v in values.items() if k.startswith("CODE_")) == sorted([RELU_REPRO, CONV_REPRO])
    files = [v for k, v in values.items() if k.startswith("FILES_") and v]
    assert [base64.b64decode("".join(f["model.onnx"])) for f in files] == [b"\x00not really onnx\x01"]
    (tmp_path / "test_it.py").write_text(source)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_it.py"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert "1 failed, 1 xfailed" in proc.stdout and "XPASS(strict)" in proc.stdout, proc.stdout[-2000:]


def test_a_stack_with_its_device_and_an_older_folder(tmp_path, folder):
    run_dir, ids, out, behaviours = folder
    same = digest(load_run(run_dir), "openvino@cpu", tmp_path / "cpu")
    assert [b.slug for b in same] == [b.slug for b in behaviours]
    assert digest(load_run(run_dir), "openvino@gpu", tmp_path / "gpu") == []
    assert "Nothing to report" in (tmp_path / "gpu" / "README.md").read_text()
    old = tmp_path / "old"  # a schema-2 folder: no stack, device, node symptom, explanation or culprit columns
    (old / "records" / "openvino@cpu").mkdir(parents=True)
    (old / "campaign.yaml").write_text("name: old\n")
    rows = [{"campaign": "old", "variant_id": f"s{i}#0", "seed_id": f"s{i}", "backend": "openvino@cpu",
             "status": "mismatch", "verdict": "target-divergent", "symptom": "nonfinite", "first_div_op": "aten.relu",
             "schema_version": 2} for i in range(2)]
    pq.write_table(pa.Table.from_pylist(rows).replace_schema_metadata({"gapfuzz_schema_version": "2"}),
                   old / "records" / "openvino@cpu" / "part-0.parquet")
    found = digest(load_run(old), "openvino", tmp_path / "o")
    assert [(b.slug, b.ops, b.runs) for b in found] == [("nan-inf", ["aten.relu"], 2)]


def test_cells_and_fences():
    assert _cell("a|b\nc") == "a\\|b c"
    assert fenced("x ``` y").startswith("````\n") and fenced("plain", "py").startswith("```py\n")


def test_the_cli_refuses_a_stack_that_did_not_run_in_one_line_and_writes_nothing(folder):
    run_dir = folder[0]
    proc = subprocess.run([sys.executable, "-m", "gapfuzz.fuzzer.cli", "report", str(run_dir), "--vendor", "tpu"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "no stack 'tpu' ran here" in proc.stderr and "Traceback" not in proc.stderr
    assert not (Path(run_dir) / "vendor" / "tpu").exists()

"""docs/findings.md regenerates from a run folder, keeps the hand-written classes, and rejects bad ones."""
from __future__ import annotations

import datetime
import json
import subprocess
import sys
from pathlib import Path

from gapfuzz.analysis.api import load_run
from gapfuzz.results.schema import RunRecord
from gapfuzz.results.store import RecordStore

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "findings_doc.py"


def _run(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "campaign.yaml").write_text("name: study\nbackends: {reference: eager@cpu, oracle: eager-fp64@cpu}\n")
    recs = []
    for seed, source, op in (("ops/hypot/float32/0", "ops", "aten.hypot.default"),
                             ("ops/add/float32/0", "ops", "aten.add.Tensor"),
                             ("timm/m", "timm", "aten.conv2d.default")):
        for backend in ("eager@cpu", "eager-fp64@cpu", "openvino@cpu"):
            recs.append(RunRecord(campaign="study", variant_id=f"{seed}#0", seed_id=seed, seed_source=source,
                                  backend=backend, stack=backend[:-4], device="cpu", status="ok", ops=[op],
                                  node_count=1, latency_ms=2.0, prepare_s=0.5, run_s=0.1, tol_needed=1e-7,
                                  task_metric="top1" if source == "timm" else None,
                                  task_agree=1.0 if source == "timm" else None))
    fail = recs[2]
    fail.status, fail.stage, fail.error_type, fail.latency_ms, fail.tol_needed = "error", "convert", "X", None, None
    fail.message = "No conversion rule found for operations: aten.hypot.default"
    div = recs[8]
    div.status, div.verdict, div.symptom, div.first_div_op = "mismatch", "target-divergent", "numeric", "aten.conv2d"
    div.output_dtype, div.tol_ratio, div.tol_needed, div.task_agree = "float32", 300.0, 1e-3, 0.0
    RecordStore(path).write(recs)
    (path / "stats").mkdir()
    started = (datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=5)).isoformat()
    (path / "stats" / "session-1.json").write_text(json.dumps({
        "started": started, "wall_s": 3600, "write_s": 0.2, "builds": [{"capture_s": 10, "build_s": 30}],
        "workers": [{"busy_s": 100, "alive_s": 200}]}))
    return path


def _doc(tmp_path, run_dir, notes: str):
    ann = tmp_path / "findings" / "annotations.yaml"
    ann.parent.mkdir(exist_ok=True)
    ann.write_text(notes)
    out = tmp_path / "findings.md"
    proc = subprocess.run([sys.executable, str(SCRIPT), str(run_dir), "--out", str(out), "--annotations", str(ann)],
                          capture_output=True, text=True)
    return proc, out


def test_the_document_regenerates_with_its_classes(tmp_path):
    run_dir = _run(tmp_path / "run")
    crash = load_run(run_dir).clusters(kind="crash")["cluster"].iloc[0]
    (tmp_path / "findings" / crash).mkdir(parents=True)
    (tmp_path / "findings" / crash / "repro.py").write_text("")
    notes = f"_summary: A study.\n{crash}: {{class: defect, note: OpenVINO lacks hypot.}}\n"
    proc, out = _doc(tmp_path, run_dir, notes)
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    for heading in ("## Findings", "## Failures per stack and stage", "## Divergence at each tolerance",
                    "## Task-level disagreement", "## Slowdowns against eager", "## Operator support matrix",
                    "## The campaign's own performance"):
        assert heading in text, heading
    assert f"[{crash}](findings/{crash}/)" in text and "real defect" in text and "OpenVINO lacks hypot." in text
    assert "| aten.hypot.default | FAIL |" in text.replace("  ", " ")
    # shares are of the workers' wall time (3600 s): busy 100 s is 3%, and the rest row makes up 100%
    assert "A study." in text and "3 variants (of the 3 in the folder" in text and "3% of the time they were up" in text
    assert "| the rest: transport, load, compare, bookkeeping, idle | 3.56e+03 | 99.0% |" in text
    assert _doc(tmp_path, run_dir, notes)[1].read_text() == text  # the same folder gives the same document


def test_an_unknown_class_is_one_line(tmp_path):
    proc, out = _doc(tmp_path, _run(tmp_path / "run"), "c-123: {class: bug}\n")
    assert proc.returncode == 2 and not out.exists()
    assert proc.stderr.strip().count("\n") == 0 and "c-123" in proc.stderr


def test_a_message_rule_classes_the_clusters_without_a_note(tmp_path):
    run_dir = _run(tmp_path / "run")
    notes = ("_by_message:\n"
             "  - {name: ov-missing-op, match: 'No conversion rule found', class: defect, note: OpenVINO lacks ops.}\n"
             "  - {name: never, match: 'no such message', class: harness, note: Unused.}\n")
    proc, out = _doc(tmp_path, run_dir, notes)
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    assert "real defect (rule ov-missing-op)" in text and "OpenVINO lacks ops." in text
    assert "**rule ov-missing-op** (real defect; 1 clusters, 1 runs, matched by message)" in text
    assert "Unused." not in text
    bad = notes.replace("class: harness", "class: oops")
    proc, _ = _doc(tmp_path, run_dir, bad)
    assert proc.returncode == 2 and "never: unknown class 'oops'" in proc.stderr and proc.stderr.count("\n") == 1


def test_a_study_has_its_own_title_and_counts_its_defects_per_cpu_hour(tmp_path):
    run_dir = _run(tmp_path / "run")
    crash = load_run(run_dir).clusters(kind="crash")["cluster"].iloc[0]
    notes = f"_title: Operators over values and sizes\n{crash}: {{class: defect, note: OpenVINO lacks hypot.}}\n"
    proc, out = _doc(tmp_path, run_dir, notes)
    assert proc.returncode == 0 and out.read_text().startswith("# Operators over values and sizes\n")
    ann = tmp_path / "findings" / "annotations.yaml"
    study = subprocess.run([sys.executable, str(SCRIPT.parent / "input_axis_study.py"), str(run_dir), str(run_dir),
                            "--annotations", str(ann)], capture_output=True, text=True)
    assert study.returncode == 0, study.stderr
    assert "| 0.028 | 1 | 36 | 1 | 36 |" in study.stdout.replace("  ", " ")  # 1 defect in 100 s of worker time
    assert f"{crash} (1 runs)" in study.stdout

"""analysis.releases: a stack run in several releases, and each cluster marked a regression, fixed or
long-standing across them, in triage, ``--regressions``, the report and the vendor text."""
from __future__ import annotations

import html

import pandas as pd
import pytest

from gapfuzz.analysis.clusters import clusters
from gapfuzz.analysis.releases import COLUMNS, Mark, Release, judge, lines, ordered
from gapfuzz.core.bugs import Kind

OLD, NEW = "onnxruntime-1.31.1@cpu", "onnxruntime@cpu"
TORCH_OLD, TORCH_NEW = "inductor-torch2.13.0@cpu", "inductor@cpu"
VERSIONS = {OLD: "1.31.1", NEW: "1.32.0", TORCH_OLD: "2.5.0", TORCH_NEW: "2.14.1", "eager@cpu": "",
            "openvino@cpu": "2025.1"}
BACKENDS = {"eager@cpu": {"stack": "eager", "device": "cpu", "options": {}},
            "openvino@cpu": {"stack": "openvino", "device": "cpu", "options": {}},
            OLD: {"stack": "onnxruntime", "device": "cpu", "options": {}, "line": NEW,
                  "release": {"onnxruntime": "1.31.1"}},
            NEW: {"stack": "onnxruntime", "device": "cpu", "options": {}, "line": NEW,
                  "release": {"onnxruntime": "1.32.0"}},
            TORCH_OLD: {"stack": "inductor", "device": "cpu", "options": {}, "line": TORCH_NEW,
                        "release": {"torch": "2.5.0"}},  # 2.5.0 < 2.14.1 as versions, not as text
            TORCH_NEW: {"stack": "inductor", "device": "cpu", "options": {}, "line": TORCH_NEW,
                        "release": {"torch": "2.14.1"}}}
DIVERGENT = {"status": "mismatch", "stage": "compare", "verdict": "target-divergent", "symptom": "value",
             "node_symptom": "value", "output_dtype": "float32", "tol_ratio": 50.0, "task_agree": 1.0}


def rec(variant: str, backend: str, **kw) -> dict:
    """A record with the columns clustering reads: an ``ok`` run unless ``kw`` says otherwise."""
    stack = BACKENDS.get(backend, {}).get("stack", backend.split("@")[0])
    row = {"campaign": "t", "variant_id": f"timm/{variant}#0", "seed_id": f"timm/{variant}", "seed_source": "timm",
           "family": "f", "backend": backend, "stack": stack, "device": "cpu", "status": "ok", "stage": None,
           "error_type": None, "message": None, "verdict": None, "symptom": None, "first_div_op": None,
           "output_dtype": None, "tol_ratio": None, "task_agree": None, "node_count": 5, "mutations": [],
           "ops": ["aten.add.Tensor"], "backend_version": VERSIONS.get(backend, ""),
           "torch_version": "2.13.0" if backend == TORCH_OLD else "2.14.1"}
    row.update(kw)
    return row


def error(message: str) -> dict:
    return {"status": "error", "stage": "compile", "error_type": "RuntimeError", "message": message}


def campaign() -> list[dict]:
    """Every variant on eager and both onnxruntime releases; what each cluster is, by its message or op."""
    ran = {v: {OLD: {}, NEW: {}} for v in ("a", "b", "c", "d", "e", "f")}
    ran["a"][NEW] = error("regressed convert of Gather")  # regression: new only
    ran["b"][OLD] = {**DIVERGENT, "first_div_op": "aten.gelu.default"}  # fixed: old only
    ran["c"] = {OLD: error("always broken Resize"), NEW: error("always broken Resize")}  # long-standing
    ran["d"] = {OLD: error("always broken Resize"), NEW: error("always broken Resize")}
    ran["e"] = {OLD: {"status": "skipped", "stage": "run"}, NEW: error("only tried once Slice")}  # old never ran it
    ran["f"] = {OLD: {}, NEW: {}, "openvino@cpu": error("no line here TopK"),  # a stack in one release
                TORCH_OLD: {}, TORCH_NEW: {**DIVERGENT, "first_div_op": "aten.mm.default"}}
    return [rec(v, "eager@cpu") for v in ran] + [rec(v, b, **kw) for v, by in ran.items() for b, kw in by.items()]


def by_message(c: pd.DataFrame, text: str) -> pd.Series:
    return c[c["message"].fillna("").str.contains(text) | c["first_div_op"].fillna("").eq(text)].iloc[0]


@pytest.fixture(scope="module")
def marked() -> pd.DataFrame:
    return clusters(pd.DataFrame(campaign()), backends=BACKENDS)


def test_a_cluster_only_the_newest_release_shows_is_a_regression_naming_that_release(marked):
    c = by_message(marked, "regressed convert")
    assert c["release_mark"] == Mark.REGRESSION and c["first_release"] == "onnxruntime 1.32.0"
    assert c["releases"] == "onnxruntime 1.31.1: absent, 1.32.0: present"
    assert c["release_note"] == "regression: worked in onnxruntime 1.31.1, fails in 1.32.0"
    torch = by_message(marked, "aten.mm.default")  # ordered by version: torch 2.5.0 is the older
    assert torch["release_note"] == "regression: worked in torch 2.5.0, wrong in 2.14.1"


def test_fixed_and_long_standing(marked):
    fixed = by_message(marked, "aten.gelu.default")
    assert fixed["release_mark"] == Mark.FIXED and fixed["first_release"] == "onnxruntime 1.32.0"
    assert fixed["release_note"] == "fixed in onnxruntime 1.32.0"
    old = by_message(marked, "always broken")
    assert old["release_mark"] == Mark.LONG_STANDING and old["count"] == 4
    assert old["first_release"] == "onnxruntime 1.31.1"
    assert old["release_note"] == "long-standing (onnxruntime 1.31.1, 1.32.0)"
    assert sorted(old["backends"]) == [OLD, NEW]  # one defect across releases: one cluster


def test_no_mark_without_a_line_or_with_one_release_tried(marked):
    for text in ("no line here", "only tried once"):  # openvino ran in one release; a skipped run is no try
        row = by_message(marked, text)
        assert row[COLUMNS].isna().all(), text
    plain = clusters(pd.DataFrame(campaign()))  # no run.json: the columns, empty
    assert set(COLUMNS) <= set(plain.columns) and plain[COLUMNS].isna().all().all()
    assert len(plain) == len(marked)
    empty = clusters(pd.DataFrame([rec("a", "eager@cpu")]), backends=BACKENDS)
    assert empty.empty and set(COLUMNS) <= set(empty.columns)


def test_releases_are_ordered_by_version_and_the_last_gap_is_what_a_regression_names():
    found = lines({f"ort-{v}@cpu": {"stack": "onnxruntime", "device": "cpu", "options": {}, "line": "ort@cpu",
                                    "release": {"onnxruntime": v}} for v in ("1.10.0", "1.9.2", "1.32.0")})
    line = found["ort@cpu"]
    assert [r.label() for r in line] == ["onnxruntime 1.9.2", "onnxruntime 1.10.0", "onnxruntime 1.32.0"]
    assert [r.backend for r in ordered([Release("b", (("x", "dev-b"),)), Release("a", (("x", "dev-a"),))])] == \
        ["a", "b"]  # no version: as text
    tried = [Release(f"r{i}", (("onnxruntime", f"1.{i}.0"),)) for i in range(4)]
    m = judge(tried, {"r1", "r3"}, Kind.DISCREPANCY)  # absent, present, absent, present
    assert m["release_mark"] == Mark.REGRESSION and m["first_release"] == "onnxruntime 1.3.0"
    assert m["release_note"] == "regression: worked in onnxruntime 1.2.0, wrong in 1.3.0"
    m = judge(tried, {"r0", "r1"}, Kind.FAILURE)
    assert m["release_mark"] == Mark.FIXED and m["release_note"] == "fixed in onnxruntime 1.2.0"
    assert judge(tried[:1], {"r0"}) is None
    assert lines({"x@cpu": {"line": "x@cpu", "release": {"x": "1"}}}) == {}  # one release: no line


def write_run(path, records: list[dict], backends: dict) -> str:
    """A run folder written through the real store, with the run.json a campaign in releases writes."""
    from gapfuzz.results.folder import Folder
    from gapfuzz.results.manifest import RunManifest
    from gapfuzz.results.schema import RunRecord
    from gapfuzz.results.store import RecordStore

    path.mkdir(parents=True)
    fields = set(RunRecord.__dataclass_fields__)
    RecordStore(path).write([RunRecord(**{k: v for k, v in r.items() if k in fields and v is not None})
                             for r in records])
    RunManifest(campaign="t", reference="eager@cpu", oracle=None, targets=[b for b in backends if b != "eager@cpu"],
                backends=backends, compare={}).write(Folder(path))
    return str(path)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> str:
    return write_run(tmp_path_factory.mktemp("releases") / "run", campaign(), BACKENDS)


def test_triage_regressions_lists_only_the_regressions(run_dir, capsys):
    from gapfuzz.fuzzer.cli.main import main

    assert main(["triage", run_dir]) == 0
    out = capsys.readouterr().out
    assert "long-standing (onnxruntime 1.31.1, 1.32.0)" in out and "fixed in onnxruntime 1.32.0" in out
    assert "across releases: 2 regressions, 1 fixed, 1 long-standing" in out
    assert main(["triage", run_dir, "--regressions"]) == 0
    out = capsys.readouterr().out
    assert "regression: worked in onnxruntime 1.31.1, fails in 1.32.0" in out
    assert "regression: worked in torch 2.5.0, wrong in 2.14.1" in out
    assert "long-standing" not in out and "fixed in" not in out and "2 clusters" in out


def test_regressions_of_a_run_without_lines_say_why_there_are_none(tmp_path, capsys):
    from gapfuzz.analysis.api import load_run
    from gapfuzz.fuzzer.cli.main import main

    plain = {b: {k: v for k, v in e.items() if k not in ("line", "release")} for b, e in BACKENDS.items()}
    folder = write_run(tmp_path / "run", campaign(), plain)
    assert load_run(folder).clusters(mark=Mark.REGRESSION).empty
    assert main(["triage", folder, "--regressions"]) == 0
    assert "no regressions: this run ran no stack in several releases" in capsys.readouterr().out
    assert "releases" not in load_run(folder).why(load_run(folder).clusters()["cluster"].iloc[0])


def test_the_report_and_the_vendor_text_say_the_same_sentence(run_dir, tmp_path):
    from gapfuzz.analysis.api import load_run
    from gapfuzz.analysis.report import render
    from gapfuzz.analysis.vendor import digest

    run = load_run(run_dir)
    regression = run.clusters(mark=Mark.REGRESSION, kind=Kind.FAILURE)["cluster"].iloc[0]
    assert "regression: worked in onnxruntime 1.31.1, fails in 1.32.0" in run.why(regression)
    page = html.unescape(render(run, tmp_path))
    assert "regression: worked in onnxruntime 1.31.1, fails in 1.32.0" in page
    assert "onnxruntime 1.31.1: absent, 1.32.0: present" in page
    digest(run, "onnxruntime", tmp_path / "vendor")
    issue = (tmp_path / "vendor" / "compile-failure.md").read_text()
    assert f"- {regression}: regression: worked in onnxruntime 1.31.1, fails in 1.32.0\n" in issue  # at the top
    assert f"- {regression}: RuntimeError: regressed convert of Gather; regression: worked in" in issue  # its op's
    assert "long-standing (onnxruntime 1.31.1, 1.32.0)" in issue

"""The HTML report: self-contained, one plot per section (a plot without data says so), shown by Chromium."""
from __future__ import annotations

import base64
import html
import importlib.util
import re
from pathlib import Path

import pytest

from gapfuzz.analysis.api import load_run
from gapfuzz.analysis.report import SECTIONS, render, write_report

from .test_triage import SAME, write_run

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "check_report.py"


def _check_report():
    spec = importlib.util.spec_from_file_location("check_report", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    run_dir = write_run(tmp_path_factory.mktemp("report") / "run", [SAME["torch view"][0], SAME["torch view"][1],
                                                                     SAME["openvino conversion"][0]])
    return write_report(load_run(run_dir))


def test_report_is_self_contained_with_one_plot_per_section(report):
    text = report.read_text(encoding="utf-8")
    parsed = _check_report().Sections()
    parsed.feed(text)
    assert list(parsed.sections) == [key for key, _, _ in SECTIONS]
    assert parsed.external == []
    assert not re.search(r"<script|<link|<iframe|@import|url\(", text, re.I)
    for name, imgs in parsed.sections.items():
        assert len(imgs) == 1, name
        src = imgs[0]["src"]
        assert src.startswith("data:image/png;base64,"), name
        assert base64.b64decode(src.split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n", name
    assert "is invalid for input of size" in text and "c-" in text
    assert "<th>probes</th>" in text and "<td>example</td>" in text  # which input sets each cluster showed on


def test_a_plot_without_data_says_so(tmp_path):
    run = load_run(write_run(tmp_path / "run", ["x"], status="error"))
    parsed = _check_report().Sections()
    parsed.feed(render(run))
    alts = {name: imgs[0]["alt"] for name, imgs in parsed.sections.items()}
    assert alts["tolerance"].endswith("no data") and alts["divergence"].endswith("no data")
    assert not alts["status"].endswith("no data") and not alts["clusters"].endswith("no data")


def test_report_renders_every_plot_in_headless_chromium(report, tmp_path):
    check = _check_report()
    if check.browser() is None:
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    ok, lines = check.check(report, tmp_path / "shot.png")
    assert ok, "\n".join(lines)
    assert sum(line.startswith("ok") for line in lines) == len(SECTIONS)
    assert (tmp_path / "shot.png").stat().st_size > 10_000


# ---------------------------------------------------------------- the report agrees with triage
HOSTILE = '<img src=x onerror="alert(1)">'


def write_triaged_run(path: Path) -> Path:
    """A small run folder with every kind of run triage tells apart on OpenVINO: vendor divergences and
    failures, an explained bfloat16 default, a benign ill-conditioned run, a reference-suspect divergence
    shared with ONNX Runtime; an oracle and an Inductor layout probe that recompiles (slow); run.json."""
    from gapfuzz.results.folder import Folder
    from gapfuzz.results.manifest import RunManifest
    from gapfuzz.results.schema import RunRecord
    from gapfuzz.results.store import RecordStore

    versions = {"eager@cpu": "2.9.0", "eager-fp64@cpu": "2.9.0", "inductor@cpu": "2.9.0",
                "onnxruntime@cpu": "1.22.0", "openvino@cpu": f"2025.1 {HOSTILE}"}
    records = []

    def add(i: int, backend: str, probe: str = "example", **kw):
        rec = dict(campaign="t", variant_id=f"timm/m{i}#0", seed_id=f"timm/m{i % 3}", seed_source="timm",
                   family="fam", backend=backend, stack=backend.split("@")[0], device="cpu", probe=probe,
                   mode="inference", status="ok", ops=["aten.conv2d.default", "aten.relu.default"], node_count=5 + i,
                   latency_ms=1.0, backend_version=versions[backend], torch_version="2.9.0",
                   versions={"python": "3.11.7", "os": "Linux", "torch": "2.9.0"})
        rec.update(kw)
        records.append(RunRecord(**rec))

    div = dict(status="mismatch", stage="compare", verdict="target-divergent", output_dtype="float32")
    for i in range(12):
        add(i, "eager@cpu")
        add(i, "eager@cpu", probe="layout:channels-last")
        add(i, "eager-fp64@cpu", verdict="oracle", latency_ms=50.0)
        add(i, "inductor@cpu", latency_ms=0.5)
        add(i, "inductor@cpu", probe="layout:channels-last", latency_ms=3000.0)  # compiled again
        ov = {}
        if i < 3:  # the stack's own finding
            ov = dict(div, symptom="nonfinite", node_symptom="nonfinite", first_div_op="aten.relu.default",
                      tol_ratio=300.0)
        elif i < 8:  # the default precision's behaviour: explained, no finding
            ov = dict(div, symptom="numeric", first_div_op="aten.conv2d.default", tol_ratio=20.0,
                      explanation="bfloat16")
        elif i == 8:  # the variant's, not a stack's
            ov = dict(div, verdict="ill-conditioned", symptom="numeric", tol_ratio=5.0)
        elif i < 11:  # a conversion failure
            ov = dict(status="error", stage="convert", error_type="OpConversionFailure", latency_ms=None,
                      message=f"No conversion rule found for operations: aten.foo {HOSTILE}")
        if i == 11:  # eager's own quirk: ONNX Runtime and OpenVINO agree against it
            ov = dict(div, verdict="reference-suspect", symptom="nonfinite", node_symptom="nonfinite",
                      first_div_op="aten.sign.default", consensus="onnxruntime@cpu,openvino@cpu", tol_ratio=1e9)
        add(i, "openvino@cpu", **ov)
        add(i, "onnxruntime@cpu", **(ov if i == 11 else {}))
    path.mkdir(parents=True)
    (path / "campaign.yaml").write_text("name: t\n")
    RecordStore(path).write(records)
    targets = ["inductor@cpu", "onnxruntime@cpu", "openvino@cpu"]
    RunManifest(campaign="t", reference="eager@cpu", oracle="eager-fp64@cpu", targets=targets,
                backends={b: {"stack": b.split("@")[0], "device": "cpu", "options": {"precision": "f32"} if
                              b == "onnxruntime@cpu" else {}} for b in ["eager@cpu", "eager-fp64@cpu", *targets]},
                compare={"tolerances": {"float32": [1.3e-06, 1e-05]}, "multiplier": 3.0, "far": 1000.0}
                ).write(Folder(path))
    return path


@pytest.fixture(scope="module")
def triaged(tmp_path_factory):
    run_dir = write_triaged_run(tmp_path_factory.mktemp("triaged") / "run")
    vendor = load_run(run_dir).clusters(vendor=True)
    repro = run_dir / "repros" / vendor["cluster"].iloc[0]
    repro.mkdir(parents=True)
    (repro / "report.md").write_text("# a bug\n")
    return load_run(run_dir)


def _triage_runs(run, backend: str, **filters) -> int:
    """The runs triage's own cluster table gives a backend (clusters seen on it alone)."""
    c = run.clusters(benign=True)
    for column, value in filters.items():
        c = c[c[column] == value]
    mine = c[c["backends"].map(lambda b: list(b) == [backend])]
    return int(mine["count"].sum())


def test_vendor_rate_counts_only_triages_vendor_clusters(triaged):
    from gapfuzz.analysis.report_tables import divergence

    d = divergence(triaged).set_index("backend")
    assert triaged.reference not in d.index and triaged.oracle not in d.index
    ov = d.loc["openvino@cpu"]
    assert ov["vendor divergent"] == _triage_runs(triaged, "openvino@cpu", vendor=True, kind="discrepancy") == 3
    assert ov["vendor failures"] == _triage_runs(triaged, "openvino@cpu", vendor=True, kind="crash") == 2
    assert ov["explained"] == 5 and ov["benign"] == 1  # OpenVINO's bfloat16 default and the ill-conditioned run
    assert ov["pytorch"] == 1 and d.loc["onnxruntime@cpu", "pytorch"] == 1  # one cluster, split by backend
    assert ov["completed"] == 10 and ov["mismatches"] == 10
    assert ov["vendor_rate"] == pytest.approx(3 / 10) and ov["explained_rate"] == pytest.approx(5 / 10)
    for backend, row in d.iterrows():  # every target: the vendor runs are exactly triage's
        vendor = triaged.clusters(vendor=True)
        held = vendor[vendor["backends"].map(lambda b: backend in list(b))]
        assert row["vendor divergent"] + row["vendor failures"] == held["count"].sum(), backend
    text = render(triaged)
    assert "<td>openvino@cpu</td><td>10</td><td>10</td><td>3</td><td>2</td><td>5</td><td>1</td><td>1</td>" in text


def test_settings_versions_reproducer_links_and_escaping(triaged, tmp_path):
    text = write_report(triaged).read_text(encoding="utf-8")  # in the run folder: links relative to it
    campaign = html.unescape(text.split('<div id="campaign">', 1)[1].split("<section", 1)[0])
    for part in ("<td>reference</td><td>eager@cpu</td>", "<td>oracle</td><td>eager-fp64@cpu</td>",
                 "float32: 1.3e-06, 1e-05", "<td>1.22.0</td>", "<td>3.11.7</td>", '<td>{"precision": "f32"}</td>'):
        assert part in campaign, part
    assert HOSTILE not in text and HOSTILE in html.unescape(text)  # a version or message is text, never markup
    cid = triaged.clusters(vendor=True)["cluster"].iloc[0]
    assert f'<a href="repros/{cid}/report.md">report.md</a>' in text
    assert text.count("<a href=") == 1  # only the cluster that has a reproducer links to one
    assert f"<code>gapfuzz triage {triaged.folder} --why {cid}</code>" in text
    elsewhere = write_report(triaged, tmp_path / "out" / "r.html")
    links, broken = _check_report().broken_links(elsewhere)
    assert links == 1 and broken == []


def test_slowdown_leaves_out_the_oracle_and_probe_runs(triaged):
    from gapfuzz.analysis.report_tables import slowdowns

    s, summary, left_out = slowdowns(triaged)
    assert triaged.oracle not in set(s["backend"]) and triaged.oracle not in set(summary["backend"])
    assert s["slowdown"].max() < 10  # not the Inductor layout probe's 3000 ms compile
    assert summary.set_index("backend").loc["inductor@cpu", "runs"] == 12
    assert left_out == 24  # the layout probes of eager and Inductor

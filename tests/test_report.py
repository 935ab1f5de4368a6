"""The HTML report: self-contained, one plot per section (a plot without data says so), shown by Chromium."""
from __future__ import annotations

import base64
import importlib.util
import re
from pathlib import Path

import pytest

from analysis.api import load_run
from analysis.report import SECTIONS, render, write_report

from .test_triage import SAME, write_run

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "check_report.py"


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

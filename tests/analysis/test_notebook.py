"""The triage notebook runs top to bottom against a small real campaign; triage, report and diff use it too."""
from __future__ import annotations

import os

import pytest

from tests.conftest import REPO, gapfuzz

pytestmark = pytest.mark.ray

NOTEBOOK = REPO / "analysis" / "notebooks" / "triage.ipynb"
CAMPAIGN = """
name: notebook
seeds: [{source: ops, include: ["ops/ge/float32/0", "ops/unsqueeze/float32/0", "ops/triu/float32/0"]}]
variants: {per_seed: 2, mutations: 1}
sizes: {per_seed: 0, widths: 0}  # the size axis has its own tests (test_sizes, test_probes)
backends:
  targets: [{class: "tests.stacks.faulty_backend:Faulty", device: cpu, label: refuses, options: {fault: raise}}]
pools: {cpu: {workers: 1}}
run: {repeats: 1}
"""


@pytest.fixture(scope="session")
def small_run(tmp_path_factory):
    """A real campaign on the session's Ray: 6 variants on eager, the fp64 oracle and a target that always raises."""
    tmp = tmp_path_factory.mktemp("notebook")
    (tmp / "c.yaml").write_text(CAMPAIGN)
    proc = gapfuzz("run", tmp / "c.yaml", "--out", tmp / "run", "--quiet", cwd=tmp, timeout=600, joins_ray=True)
    assert proc.returncode == 0, proc.stderr
    return tmp / "run"


def test_notebook_runs_top_to_bottom(small_run, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    monkeypatch.setenv("GAPFUZZ_RUN", str(small_run))  # the kernel inherits the environment
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(REPO)}})
    client.execute()
    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    text = "".join(o.get("text", "") for o in outputs)
    assert "c-" in text and "6 runs" in text  # the drilled-into cluster: every run of the refusing target
    assert any("image/png" in o.get("data", {}) for o in outputs)


def test_triage_report_and_diff_on_a_real_campaign(small_run, tmp_path, capsys):
    from gapfuzz.analysis.api import load_run
    from gapfuzz.fuzzer.cli.main import main

    run = load_run(small_run)
    c = run.clusters()
    assert len(c) == 1 and c["error_type"].iloc[0] == "ValueError" and c["vendor"].iloc[0]
    assert c["backends"].iloc[0] == ["refuses@cpu"] and c["seeds"].iloc[0] == 3
    assert len(run.cluster(c["cluster"].iloc[0])) == 6
    assert main(["triage", str(small_run)]) == 0
    assert c["cluster"].iloc[0] in capsys.readouterr().out
    assert main(["diff", str(small_run), str(small_run)]) == 0
    assert "0 new, 0 gone, 1 still there" in capsys.readouterr().out
    assert main(["report", str(small_run), "--out", str(tmp_path / "r.html")]) == 0
    assert (tmp_path / "r.html").exists() and os.path.getsize(tmp_path / "r.html") > 10_000

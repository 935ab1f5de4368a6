"""Every value a campaign, a catalog or a record gives is checked where it is read: probe kinds that would
judge nothing, a training mode a stack lacks, numbers past any sane bound, catalog rows of another table
and probe values no probe has are each one line naming the file, key or value, exit 2, nothing written;
sizes and widths a seed cannot take are said, not dropped.
"""
from __future__ import annotations

import contextlib
import io
import logging
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gapfuzz.core.strict_yaml import load
from gapfuzz.fuzzer.cli.main import main
from gapfuzz.fuzzer.config.campaign import CampaignError, from_dict
from tests.conftest import gapfuzz

SEEDS = "seeds: [{source: timm, include: [test_resnet]}]\n"
OK = "name: h\n" + SEEDS + "backends: {targets: [inductor@cpu]}\n"
BASE = {"seeds": [{"source": "timm", "include": ["test_resnet"]}], "backends": {"targets": ["inductor@cpu"]}}


def _tree(d: Path) -> set:
    return {(str(p.relative_to(d)), p.stat().st_size) for p in d.rglob("*") if p.is_file()}


def _cli(argv: list[str], d: Path) -> str:
    """The CLI in this process: exit 2, one line, no traceback, nothing written; that line."""
    before, err, t0 = _tree(d), io.StringIO(), time.monotonic()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(argv)
    lines = err.getvalue().strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("gapfuzz: "), err.getvalue()
    assert _tree(d) == before, "something was written"
    assert time.monotonic() - t0 < 30
    return lines[0]


# --- probe kinds that would judge nothing

@pytest.mark.parametrize("kinds, needle", [
    ([], "probes.kinds: [] names no probe kind"),
    (["relation"], "probes.kinds: [relation] judge only the graphs they fit"),
    (["layout", "edge", "resize"], "add 'example' or a value kind"),
])
def test_probe_kinds_that_judge_no_graph_are_refused_at_load(kinds, needle):
    with pytest.raises(CampaignError, match=needle.replace("[", r"\[").replace("]", r"\]")):
        from_dict({**BASE, "probes": {"kinds": kinds}})
    from_dict({**BASE, "probes": {"kinds": ["special", "relation"]}})  # a value kind beside them judges


def test_a_graph_none_of_the_kinds_fits_is_judged_on_its_example():
    import torch

    from gapfuzz.workers.run.probes import ProbeSettings, choose

    gm = torch.fx.symbolic_trace(torch.nn.Tanh())
    x = (torch.randn(4),)
    assert [p.kind for p in choose(gm, x, ProbeSettings(per_variant=8, kinds=("integer",)), "v#0")] == ["example"]
    assert [p.kind for p in choose(gm, x, ProbeSettings(per_variant=1, kinds=("special",)), "v#0")] == ["example"]
    assert "example" not in [p.kind for p in choose(gm, x, ProbeSettings(per_variant=3, kinds=("special",)), "v#0")]


def test_kinds_that_judge_nothing_exit_2_from_the_command_line(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(OK + "probes: {kinds: []}\n")
    assert "probes.kinds: []" in _cli(["run", str(path), "--check"], tmp_path)


# --- a training mode a stack lacks

@pytest.mark.parametrize("targets, needle", [
    ([{"backend": "onnxruntime@cpu", "mode": "training"}], "targets[0].mode: onnxruntime@cpu cannot train"),
    (["inductor@cpu", {"backend": "onnxruntime@cpu", "mode": ["inference", "training"]}],
     "targets[1].mode: onnxruntime@cpu cannot train"),
])
def test_a_per_target_training_mode_on_a_stack_that_cannot_train_is_refused(targets, needle):
    with pytest.raises(CampaignError, match=needle.replace("[", r"\[").replace("]", r"\]")):
        from_dict({**BASE, "backends": {"targets": targets}})


def test_the_campaigns_mode_still_leaves_a_stack_that_cannot_train_its_inference_runs():
    c = from_dict({**BASE, "mode": ["inference", "training"], "backends": {"targets": ["inductor@cpu",
                                                                                       "onnxruntime@cpu"]}})
    onnx = next(t for t in c.backends.targets if t.stack == "onnxruntime")
    assert onnx.runs_in("inference") and not onnx.runs_in("training")
    with pytest.raises(CampaignError, match="backends.reference.mode"):
        from_dict({**BASE, "backends": {"reference": {"backend": "eager@cpu", "mode": "training"},
                                        "targets": ["inductor@cpu"]}})


# --- numbers past sane bounds

@pytest.mark.parametrize("line, needle", [
    ("seed: " + "9" * 5000, "seed: a number of 5000 characters"),
    ("seed: 1e5000", "seed: 1e5000 is past the largest number"),
    ("run: {timeout_s: " + "9" * 5000 + ".0}", "run.timeout_s: a number of 5002 characters"),
    ("run: {timeout_s: 1e300}", "run.timeout_s: 1e+300 is greater than the maximum of 604800"),
    ("compare: {bisect_budget_s: 1e20}", "compare.bisect_budget_s"),
    ("capture: {max_params: " + "9" * 90 + "}", "capture.max_params"),
    ("seed: " + "9" * 90, "seed: " + "9" * 90 + " is greater than the maximum"),
    ("compare: {far: 1e200}", "compare.far"),
    ("pools: {cpu: {memory_gb: 1e100}}", "pools.cpu.memory_gb"),
    ("sizes: {values: [1, " + "9" * 200 + "]}", "sizes.values[1]: a number of 200 characters"),
])
def test_a_number_past_any_sane_bound_is_one_line_naming_its_key(line, needle, tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(OK + line + "\n")
    assert needle in _cli(["run", str(path), "--check"], tmp_path)


def test_every_number_of_the_campaign_schema_has_a_maximum():
    from gapfuzz.fuzzer.config.schema import SCHEMA

    def unbounded(s, path=""):
        if isinstance(s, dict):
            types = s.get("type")
            types = {types} if isinstance(types, str) else set(types or ())
            if types & {"integer", "number"} and "maximum" not in s and "exclusiveMaximum" not in s:
                yield path
            for k, v in s.items():
                yield from unbounded(v, f"{path}/{k}")
        elif isinstance(s, list):
            for i, v in enumerate(s):
                yield from unbounded(v, f"{path}[{i}]")

    assert not list(unbounded(SCHEMA))


def test_yaml_infinities_and_ordinary_numbers_still_read():
    assert load("a: .inf\nb: -.nan\nc: 1.5e308\nd: 0x1F\ne: 1_000", "t")["d"] == 31


# --- sizes and widths a seed cannot take

def test_widths_and_sizes_a_seed_cannot_take_are_said_not_dropped(caplog):
    from gapfuzz.fuzzer.config.plan import select_seeds, with_sizes

    c = from_dict({**BASE, "seeds": [{"source": "timm", "include": ["test_resnet", "test_efficientnet"]}],
                   "sizes": {"per_seed": 0, "widths": 1, "width_values": [1024, 100000]}})
    with caplog.at_level(logging.WARNING, logger="gapfuzz.fuzzer"):
        ids = with_sizes(c, select_seeds(c))
    said = [r.getMessage() for r in caplog.records]
    assert any("take none of the widths" in m and "timm/test_efficientnet" in m for m in said), said
    assert any("past capture.max_params" in m and "timm/test_resnet@w100000" in m for m in said), said
    assert "timm/test_resnet@w100000" in ids  # said, and still planned: its build records it as skipped


def test_a_source_that_refuses_the_largest_width_keeps_the_others(monkeypatch):
    from gapfuzz.seeds import registry

    class Narrow(registry.SeedSource):
        def width_points(self, seed_id, widths):  # as timm does: asked for the largest of the list
            return list(widths) if max(widths) <= 2048 else []

    monkeypatch.setattr(registry, "source_of", lambda seed_id: Narrow())
    assert registry.width_points_of("x/y", [1024, 2048, 100000]) == [1024, 2048]


# --- catalog rows on resume

def _catalog_file(path: Path, kind: str) -> None:
    from gapfuzz.results.catalog import CatalogRow, as_row, catalog_schema
    from gapfuzz.results.schema import RunRecord, arrow_schema

    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "null":
        rows = [as_row(CatalogRow(seed_id="timm/x")), as_row(CatalogRow(seed_id="timm/y"))]
        rows[1]["seed_id"] = None
        schema = catalog_schema().set(0, pa.field("seed_id", pa.string(), nullable=True))
        pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
    elif kind == "foreign":
        pq.write_table(pa.table({"a": [1, 2], "b": ["x", "y"]}), path)
    elif kind == "records":
        rec = RunRecord(campaign="h", variant_id="timm/x#0", seed_id="timm/x", backend="b@cpu")
        pq.write_table(pa.Table.from_pylist([rec.to_row()], schema=arrow_schema()), path)
    elif kind == "types":
        pq.write_table(pa.table({"seed_id": [1, 2], "status": ["ok", "ok"]}), path)
    elif kind == "status":
        pq.write_table(pa.table({"seed_id": ["timm/x"], "status": ["banana"]}), path)
    elif kind == "version":
        row = as_row(CatalogRow(seed_id="timm/x", schema_version=99))
        pq.write_table(pa.Table.from_pylist([row], schema=catalog_schema()), path)


CATALOG_CASES = {"null": "row 1: seed_id is null", "foreign": "its column 'a' is not a seed catalog's",
                 "records": "its column 'campaign' is not a seed catalog's",
                 "types": "its column 'seed_id' holds int64", "status": "row 0: status 'banana'",
                 "version": "row 0: schema_version 99"}


@pytest.mark.parametrize("kind", list(CATALOG_CASES))
def test_a_catalog_row_gapfuzz_did_not_write_is_one_line_on_resume(kind, tmp_path):
    run = tmp_path / "run"
    _catalog_file(run / "catalog" / "rows" / "part-1.parquet", kind)
    (run / "campaign.yaml").write_text(OK)
    (tmp_path / "c.yaml").write_text(OK)
    line = _cli(["run", str(tmp_path / "c.yaml"), "--resume", "--out", str(run)], tmp_path)
    assert "part-1.parquet" in line and CATALOG_CASES[kind] in line, line


def test_a_seed_scan_continued_checks_its_catalog_too(tmp_path):
    _catalog_file(tmp_path / "scan" / "catalog" / "rows" / "part-1.parquet", "null")
    line = _cli(["seeds", "scan", "--filter", "timm/test_resnet", "--out", str(tmp_path / "scan"), "--resume"],
                tmp_path)
    assert "row 1: seed_id is null" in line


# --- a record naming a probe value no probe has

@pytest.mark.parametrize("fields, needle", [
    ({"probe": "special:banana"}, "its record's probe 'special:banana': 'banana' is no special probe's value"),
    ({"probe": "special:nan:single", "probe_recipe": '{"kind": "special", "value": "banana", "pattern": "single", '
                                                     '"seed": 1}'}, "'banana' is not a special probe's value"),
    ({"probe_recipe": '{"kind": "resize", "dims": "0.0", "length": 99999999999, "seed": 1}'},
     "is not a resize probe's length"),
    ({"probe": "banana"}, "no probe kind 'banana'"),
])
def test_repro_of_a_record_naming_an_unknown_probe_value_is_one_line(fields, needle, tmp_path):
    from gapfuzz.results.schema import RunRecord, arrow_schema

    rec = RunRecord(**{**dict(campaign="h", variant_id="timm/test_resnet#0", seed_id="timm/test_resnet",
                              backend="inductor@cpu", stack="inductor", device="cpu", status="error", stage="compile",
                              error_type="RuntimeError", message="no kernel",
                              recipe='{"mutations":[],"rng":0,"seed":"timm/test_resnet"}'), **fields})
    path = tmp_path / "run" / "records" / "x" / "part-1.parquet"
    path.parent.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist([rec.to_row()], schema=arrow_schema()), path)
    (tmp_path / "run" / "campaign.yaml").write_text(OK)
    assert needle in _cli(["repro", str(tmp_path / "run"), "c-"], tmp_path)


def test_a_number_past_the_largest_float_exits_2_in_a_fresh_interpreter(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(OK + "seed: 1e5000\n")
    proc = gapfuzz("run", path, "--check", cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1

"""Scripts written from a run folder carry its text as data only, and writes stay inside their folder.

A run folder may come from anyone and ``gapfuzz repro`` runs what it writes: a record value that ended a
string literal used to become a statement of repro.py. Each case is a hostile value or link, as a
stranger's run folder would hold it.
"""
from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

from gapfuzz.core.codegen import ScriptRefused, comment, docstring, strings_in, vet
from gapfuzz.core.files import OutsideFolder, inside

from .test_hostile_inputs import _setup, _tree, in_process

PAYLOAD = '"""\nimport pathlib; pathlib.Path("RAN").touch()\n"""'
PAYLOADS = [PAYLOAD, "x'''\nimport os\n'''", "a\r__import__('os').system('id')#", "\\\"\"\" + __import__('os')",
            "1.0\x0c; import os", "}{__import__('os')}{"]


@pytest.mark.parametrize("value", PAYLOADS)
def test_a_value_as_docstring_or_comment_reads_back_and_is_no_statement(value):
    script = f"{docstring('title ' + value)}\n{comment(value)}\nimport sys\nsys.exit(0)\n"
    tree = ast.parse(script)
    assert [type(n).__name__ for n in tree.body] == ["Expr", "Import", "Expr"]
    assert value.replace("\r", "").replace("\x0c", "") in ast.get_docstring(tree, clean=False)
    vet(script, [value])


@pytest.mark.parametrize("value, raw", [(PAYLOAD, '"""title {} (cut)"""'), (PAYLOADS[1], "'''title {}'''"),
                                        (PAYLOADS[2], "# said: {}"), ("x) or __import__('os').system('id') or (y",
                                                                      "x = f'a{{{}}}'")])
def test_a_value_written_raw_into_a_script_is_refused(value, raw):
    raw = raw.format(value) + "\nimport sys\nsys.exit(0)\n"
    with pytest.raises(ScriptRefused, match="would carry this text as code|does not parse"):
        vet(raw, [value])


def test_a_value_cut_short_where_it_was_written_is_still_found():
    value = PAYLOAD + "y" * 500
    raw = f'"""title {value[:120]}"""\nimport sys\n'
    with pytest.raises(ScriptRefused):
        vet(raw, [value])


def test_values_that_are_names_or_appear_in_the_template_pass():
    script = "import torch\nx = torch.ops.aten.round.default(torch.ones(2))  # aten.round.default\nprint('{}')\n"
    vet(script, ["aten.round.default", "torch", "{}", "()", "cpu", "float32"])


def test_strings_in_finds_nested_keys_and_values():
    assert sorted(strings_in({"a": ["b", ("c", {"d": 1})]}, "e", None, 3)) == ["a", "b", "c", "d", "e"]


def test_native_reproducers_hold_record_values_only_as_literals(captured_vit):
    """The docstring of every native form names the campaign, the variant and the torch release."""
    from gapfuzz.fuzzer.repro.reproducers.case import Case
    from gapfuzz.fuzzer.repro.reproducers.stacks import WRITERS
    from gapfuzz.fuzzer.repro.shrink.passes import cut_after
    from gapfuzz.workers.run.registry import parse_backend

    v = captured_vit.variant
    small = cut_after(v, next(n.name for n in v.gm.graph.nodes if n.op == "call_function"))
    record = {"status": "mismatch", "campaign": PAYLOAD, "variant_id": PAYLOADS[1], "torch_version": PAYLOADS[2],
              "message": PAYLOADS[3], "symptom": "numeric", "output_dtype": "float32"}
    seen = 0
    for stack in ("inductor", "onnxruntime", "openvino"):
        case = Case(small, parse_backend(f"{stack}@cpu", label="t"), record, "title " + PAYLOADS[4], check="close")
        for script in WRITERS[stack](case):
            tree = ast.parse(script.text)
            assert not [n for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id in ("pathlib", "os")]
            assert PAYLOAD in ast.get_docstring(tree, clean=False)
            vet(script.text, strings_in(record, case.title))
            seen += 1
    assert seen >= 3


def test_a_plugin_path_that_is_no_import_gets_no_import_statement(captured_vit):
    from gapfuzz.fuzzer.repro.reproducers.case import Case
    from gapfuzz.fuzzer.repro.reproducers.plugin import plugin
    from gapfuzz.workers.run.registry import parse_backend

    case = Case(captured_vit.variant, parse_backend("eager@cpu", label="t"), {"status": "mismatch"}, "t", "close")
    assert plugin(case, "os; import sys:B") == [] and plugin(case, "m:B(); x") == []


def test_the_vendor_test_file_names_a_hostile_stack_as_text():
    from gapfuzz.analysis.vendor import _tests

    text = _tests(PAYLOAD, [])
    assert PAYLOAD in ast.get_docstring(ast.parse(text), clean=False)


def test_inside_refuses_paths_and_links(tmp_path):
    (tmp_path / "link").symlink_to(tmp_path.parent)
    assert inside(tmp_path, "a", "b.txt") == tmp_path / "a" / "b.txt"
    for parts in (("..",), ("a/../../x",), ("link",), ("link", "x"), ("",), ("a\nb",)):
        with pytest.raises(OutsideFolder):
            inside(tmp_path, *parts)


RECORD = "run/records/x/part-1.parquet"
CAMPAIGN = "name: h\nseeds: [{source: timm, include: [test_resnet]}]\nbackends: {targets: [inductor@cpu]}\n"


@pytest.mark.parametrize("case", ["vendor-name-is-a-path", "vendor-folder-is-a-link", "repros-is-a-link",
                                  "repro-out-holds-other-files"])
def test_no_write_outside_the_run_folder(case, tmp_path, monkeypatch):
    outside = tmp_path / "outside"
    outside.mkdir()
    files = {"run/campaign.yaml": CAMPAIGN,
             RECORD: {"backend": "../../../ESC@cpu" if case == "vendor-name-is-a-path" else "inductor@cpu",
                      "stack": "../../../ESC" if case == "vendor-name-is-a-path" else "inductor"}}
    if case == "repro-out-holds-other-files":
        files["mine/model.onnx"] = "my model"
    _setup(tmp_path, files)
    run = tmp_path / "run"
    if case == "vendor-folder-is-a-link":
        os.symlink(outside, run / "vendor")
    if case == "repros-is-a-link":
        os.symlink(outside, run / "repros")
    argv, needle = {
        "vendor-name-is-a-path": (["report", str(run), "--vendor", "../../../ESC"], "not a plain file name"),
        "vendor-folder-is-a-link": (["report", str(run), "--vendor", "inductor"], "is a symbolic link"),
        "repros-is-a-link": (["repro", str(run), "c-"], "is a symbolic link"),
        "repro-out-holds-other-files": (["repro", str(run), "c-", "--out", str(tmp_path / "mine")],
                                        "holds files gapfuzz repro did not write (model.onnx)"),
    }[case]
    monkeypatch.chdir(tmp_path)
    before = _tree(tmp_path)
    code, err = in_process(argv)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and needle in lines[0] and "Traceback" not in err, err
    assert _tree(tmp_path) == before and not list(outside.iterdir())
    assert (tmp_path / "mine" / "model.onnx").read_text() == "my model" if "mine" in str(argv) else True


def test_shrink_json_as_a_link_is_not_followed(tmp_path):
    from gapfuzz.fuzzer.repro.folder import ReproResult, finish

    target = tmp_path / "victim.txt"
    target.write_text("keep")
    (tmp_path / "repro").mkdir()
    (tmp_path / "repro" / "shrink.json").symlink_to(target)
    with pytest.raises(OutsideFolder, match="symbolic link"):
        finish(ReproResult(str(tmp_path / "repro"), "not-reproduced"), 0.0)
    assert Path(target).read_text() == "keep"

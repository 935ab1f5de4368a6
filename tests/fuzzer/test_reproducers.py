"""Reproducers in the stack's own API: exact literals, plain torch calls, ONNX models built with
onnx.helper, each script run as a vendor would (a fresh interpreter, no gapfuzz on the path)."""
from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from gapfuzz.core.ir import Variant
from gapfuzz.fuzzer.repro.reproducers.case import Case, index_only
from gapfuzz.fuzzer.repro.reproducers.literals import generated, needs_nan_names, torch_literal
from gapfuzz.fuzzer.repro.reproducers.stacks import native_scripts
from gapfuzz.fuzzer.repro.reproducers.torch_code import function_source
from gapfuzz.workers.run.registry import BackendSpec


def _read(text: str) -> torch.Tensor:
    return eval(text, {"torch": torch, "nan": float("nan"), "inf": float("inf")})  # noqa: S307 - our own literal


@pytest.mark.parametrize("t", [
    torch.tensor([float("nan"), -0.0, 1e-40, float("-inf"), 0.1]),
    torch.tensor([1.5, -2.25], dtype=torch.float16),
    torch.tensor([0.1, 3e38], dtype=torch.bfloat16),
    torch.tensor([-(2 ** 63), 7], dtype=torch.int64),
    torch.arange(12.).reshape(3, 4).t(),  # strided
    torch.arange(10.)[3:7],  # a storage offset
])
def test_a_literal_reads_back_bit_for_bit_with_its_layout(t):
    back = _read(torch_literal(t))
    assert back.dtype == t.dtype and back.shape == t.shape and back.stride() == t.stride()
    assert back.storage_offset() == t.storage_offset()
    bits = {torch.float32: torch.int32, torch.float16: torch.int16, torch.bfloat16: torch.int16}.get(t.dtype)
    assert torch.equal(back.view(bits), t.view(bits)) if bits else torch.equal(back, t)


def test_a_nan_with_its_sign_bit_is_written_as_bits():
    t = torch.tensor([1.0, 2.0])
    t.view(torch.int32)[0] = -4194304  # -nan
    text = torch_literal(t)
    assert ".view(torch.float32)" in text and torch.equal(_read(text).view(torch.int32), t.view(torch.int32))


def test_a_large_input_is_generated_with_its_special_values_at_their_positions():
    t = torch.randn(40, 40)
    t[3, 5], t[30, 1] = float("nan"), float("-inf")
    text = generated(t, 0)
    assert "special(" in text and "[125, 1201]" in text and needs_nan_names(text)
    assert not needs_nan_names("float('nan')")


def _gm(fn, *inputs):
    return torch.export.export(fn, inputs).module()


class _Relu(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2


def test_the_graph_reads_as_plain_torch_calls_that_compute_the_same():
    x = torch.tensor([[float("nan"), -1.0], [2.0, 0.5]])
    source, weights = function_source(_gm(_Relu(), x), (x,))
    assert "torch.relu(x)" in source and "torch.ops.aten" not in source and weights == []
    namespace = {"torch": torch}
    exec(source, namespace)  # noqa: S102 - our own text
    assert torch.equal(namespace["f"](x).nan_to_num(), (torch.relu(x) * 2).nan_to_num())


def _case(stack: str, module, x, title="t", check="nonfinite") -> Case:
    gm = _gm(module, x)
    return Case(Variant(gm, (x,), ("out",)), BackendSpec(stack, "cpu"),
                {"status": "mismatch", "campaign": "c", "variant_id": "v#0", "output_dtype": "float32"}, title, check)


def _run(script, tmp_path) -> subprocess.CompletedProcess:
    (tmp_path / "repro.py").write_text(script.text)
    for name, data in script.files.items():
        (tmp_path / name).write_bytes(data)
    block = "import sys\nfor m in ('fuzzer', 'workers', 'seeds', 'analysis', 'core'):\n    sys.modules[m] = None\n"
    return subprocess.run([sys.executable, "-c", block + "exec(open('repro.py').read())"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)


def test_an_onnx_runtime_reproducer_is_an_onnx_helper_model_on_one_screen_without_torch(tmp_path):
    x = torch.tensor([[float("nan"), -1.0, 3.0]])
    scripts = native_scripts(_case("onnxruntime", _Relu(), x))
    assert [s.form for s in scripts] == ["onnx.helper", "model.onnx"]
    first = scripts[0]
    assert first.lines < 40 and "import torch" not in first.text and "helper.make_node('Relu'" in first.text
    proc = _run(first, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr  # ONNX Runtime keeps the NaN: no bug, exit 0
    assert "0 of 3 differ" in proc.stdout


def test_a_check_that_fails_exits_1_and_prints_expected_and_actual(tmp_path):
    x = torch.tensor([[float("nan"), -1.0, 3.0]])
    script = native_scripts(_case("onnxruntime", _Relu(), x))[0]
    script.text = script.text.replace("expected = [np.array([[nan,", "expected = [np.array([[0,")  # a planted answer
    proc = _run(script, tmp_path)
    assert proc.returncode == 1 and "expected [0.0], got [nan]" in proc.stdout, proc.stdout + proc.stderr


@pytest.mark.slow
def test_an_inductor_reproducer_follows_pytorch_s_rules_for_fuzzer_reports(tmp_path):
    x = torch.tensor([[float("nan"), -1.0, 3.0]])
    script = native_scripts(_case("inductor", _Relu(), x, check="close"))[0]
    assert "same(expected, actual, fp64_ref=fp64" in script.text and "torch.compile(f, backend=\"inductor\")" in \
        script.text and script.lines < 40
    proc = _run(script, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


class _Argmax(torch.nn.Module):
    def forward(self, x):
        return torch.argmax(x, 1)


def test_an_argmax_only_divergence_is_marked_index_only():
    x = torch.tensor([[1.0, 1.0, 0.5]])
    case = _case("inductor", _Argmax(), x, check="exact")
    assert index_only(case)
    assert any("index-only" in n for n in native_scripts(case)[0].notes)
    assert not index_only(_case("inductor", _Relu(), x))

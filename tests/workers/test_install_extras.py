"""Dependencies as the field sets them: a core that runs PyTorch's own stacks, an extra per other stack (ONNX
Runtime's GPU build in ``[cuda]``, never beside its CPU build), ``[all]``, ``[read]``, a constraints file of
the releases the docs were measured with; and a stack whose package is missing names its extra."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

tomllib = pytest.importorskip("tomllib")  # Python 3.11's
ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _names(requirements) -> set[str]:
    return {canonicalize_name(Requirement(r).name) for r in requirements}


def test_each_stack_is_an_extra_and_the_core_holds_none_of_them():
    extras, core = PROJECT["optional-dependencies"], _names(PROJECT["dependencies"])
    assert {"torch", "ray", "timm"} <= core and not core & {"onnx", "onnxruntime", "onnxruntime-gpu", "openvino"}
    assert _names(extras["onnxruntime"]) == {"onnx", "onnxscript", "onnxruntime"}
    assert _names(extras["openvino"]) == {"openvino"}
    assert "onnxruntime-gpu" in _names(extras["cuda"]) and "onnxruntime" not in _names(extras["cuda"])
    assert extras["all"][0] == "gapfuzz[onnxruntime,openvino,notebook]"  # every CPU stack; [cuda] conflicts
    assert not _names(extras["read"]) & {"torch", "ray", "torchvision", "onnx"}


def test_the_constraints_pin_every_dependency_at_a_release_the_bounds_allow():
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            req = Requirement(line)
            pins[canonicalize_name(req.name)] = next(iter(req.specifier)).version
    extras = PROJECT["optional-dependencies"]
    wanted = [*PROJECT["dependencies"], *extras["onnxruntime"], *extras["openvino"], *extras["test"]]
    for text in wanted:
        req = Requirement(text)
        name = canonicalize_name(req.name)
        assert name in pins, f"constraints.txt has no pin of {name}"
        assert req.specifier.contains(pins[name], prereleases=True), (name, pins[name], str(req.specifier))


def test_a_stack_whose_package_is_missing_names_its_extra():
    hide = "import sys; sys.modules.update(onnxruntime=None, openvino=None); "  # as an install without them
    out = subprocess.run([sys.executable, "-c", hide + "from gapfuzz.fuzzer.cli.main import main; main(['backends'])"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    rows = {line.split()[0]: line.rstrip() for line in out.stdout.splitlines() if "@" in line}
    assert rows["onnxruntime@cpu"].endswith("not installed (pip install 'gapfuzz[onnxruntime]')")
    assert rows["onnxruntime@cuda"].endswith("not installed (pip install 'gapfuzz[cuda]')")
    assert rows["openvino@cpu"].endswith("not installed (pip install 'gapfuzz[openvino]')")
    assert " yes " in rows["eager@cpu"]


def test_the_hint_for_a_package_no_extra_holds_is_pip_install_of_it():
    from gapfuzz.workers.run.backend import install_hint

    assert install_hint("torch_tensorrt", "cuda") == "pip install torch-tensorrt"
    assert install_hint("onnxscript", "cpu") == "pip install 'gapfuzz[onnxruntime]'"

"""A failure whose cause is the machine (no C++ compiler, no Python headers, no OpenMP, a full disk) is the
environment's: a skipped record that names what to install, with no bug key, so never a vendor finding; a
stack's own failure stays an error with its key."""
from __future__ import annotations

import pytest
import torch

from gapfuzz.core.bugs import Stage, Status, bug_key
from gapfuzz.core.failures import ENVIRONMENT, Failure, describe, environment_cause


def _as_record(f: Failure) -> dict:
    return {"backend": "inductor@cpu", "stack": "inductor", "device": "cpu", "status": f.status, "stage": f.stage,
            "error_type": f.error_type, "message": f.message}


def test_an_inductor_compile_without_its_compiler_is_the_environments():
    from torch._inductor import config

    torch._dynamo.reset()
    with config.patch({"cpp.cxx": ("/nonexistent/bin/g++",), "fx_graph_cache": False}):
        compiled = torch.compile(lambda x: torch.cos(x) * 3 + 1, backend="inductor")
        with pytest.raises(Exception) as raised:
            compiled(torch.randn(7))
    torch._dynamo.reset()
    f = Failure.from_exception(raised.value, Stage.COMPILE)
    assert (f.status, f.stage, f.error_type) == (Status.SKIPPED, Stage.COMPILE, ENVIRONMENT)
    assert f.message.startswith("the host, not the stack: no C++ compiler (install g++); ") and "cxx" in f.message
    assert bug_key(_as_record(f)) is None  # no cluster, so no vendor finding
    sent = Failure.from_error(describe(raised.value), Stage.COMPILE)  # as a sandbox reports it
    assert (sent.status, sent.error_type) == (Status.SKIPPED, ENVIRONMENT)


# what gcc, clang, a linker and the OS print, as Inductor's CppCompileError and Python's OSError carry it
@pytest.mark.parametrize("output, cause", [
    ("C++ compile error\n\nOutput:\n/tmp/torchinductor_root/ab/cab.cpp:2:10: fatal error: Python.h: No such file "
     "or directory\n    2 | #include <Python.h>\ncompilation terminated.", "no Python headers"),
    ("/tmp/x/cx.cpp:1:10: fatal error: 'Python.h' file not found", "no Python headers"),
    ("C++ compile error\n\nOutput:\n/tmp/torchinductor_root/include/omp.h-user.h:3:10: fatal error: omp.h: No such "
     "file or directory", "no OpenMP"),
    ("/usr/bin/ld: cannot find -lgomp: No such file or directory\ncollect2: error: ld returned 1 exit status",
     "no OpenMP"),
    ("clang: error: unsupported option '-fopenmp'", "no OpenMP"),
    ("OSError: [Errno 28] No space left on device: '/tmp/torchinductor_root/fx'", "no space left"),
    ("RuntimeError: Failed to find C compiler. Please specify via CC environment variable.", "no C++ compiler"),
])
def test_what_a_host_lacks_is_read_from_its_tools_words(output, cause):
    assert environment_cause(output).startswith(cause)
    f = Failure.from_error({"error_type": "torch._inductor.exc.InductorError", "message": output}, Stage.COMPILE)
    assert (f.status, f.error_type) == (Status.SKIPPED, ENVIRONMENT) and cause in f.message


def test_the_cause_is_found_in_the_traceback_when_the_message_was_trimmed():
    command = "g++ " + " ".join(f"-I/include/{i}" for i in range(400))  # a compile command longer than the message
    try:
        raise RuntimeError(f"C++ compile error\n\nCommand:\n{command}\n\nOutput:\nx.cpp:1:10: fatal error: Python.h: "
                           "No such file or directory")
    except RuntimeError as e:
        error = describe(e)
    assert "Python.h" not in error["message"]  # trimmed at 2000 characters
    assert Failure.from_error(error, Stage.COMPILE).error_type == ENVIRONMENT


@pytest.mark.parametrize("message", [
    "LoweringException: AssertionError: expected size 3==4, stride 1==2 at dim=0",
    "Could not find an implementation for Conv(11) node with name '/conv/Conv'",
    "No such file or directory: 'model.onnx'",  # a stack's own file, not the host's compiler
])
def test_a_stacks_own_failure_stays_a_finding(message):
    f = Failure.from_error({"error_type": "RuntimeError", "message": message}, Stage.COMPILE)
    assert f.status in (Status.ERROR, Status.UNSUPPORTED) and f.error_type == "RuntimeError"
    assert bug_key(_as_record(f)) is not None


def test_the_toolchain_check_asks_gcc_where_openmp_is(tmp_path):
    import shutil

    from gapfuzz.workers.backends.inductor import openmp_problem

    gxx = shutil.which("g++")
    if gxx is None:
        pytest.skip("no g++ here")
    assert openmp_problem(gxx) is None  # this machine's g++ has omp.h and libgomp
    impostor = tmp_path / "g++"  # a program named g++ that is not GCC: not asked of
    impostor.write_text("#!/bin/sh\nexit 0\n")
    impostor.chmod(0o755)
    assert openmp_problem(str(impostor)) is None

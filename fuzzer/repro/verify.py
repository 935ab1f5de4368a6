"""A reproducer run as a vendor runs it: ``repro.py`` in fresh interpreters, each in a scratch folder.

A run that ends with an exit status meaning "the bug is there" (1; a crash's own signal or status) counts
as reproduced, and so does outlasting the campaign's timeout where the bug is a hang. gapfuzz cannot be
imported there (unless the backend is a plug-in class that needs it), and no file shipped beside the
script can stand in for a module it imports.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from gapfuzz.core.bugs import Kind, Status
from gapfuzz.fuzzer.repro.across import SCRIPT_FAILED
from gapfuzz.fuzzer.repro.folder import FILES
from gapfuzz.fuzzer.repro.record import record_of

BLOCK_GAPFUZZ = "for m in ('fuzzer', 'workers', 'seeds', 'analysis'):\n    sys.modules[m] = None\n"


def verify(folder: Path, tries: int = 3, timeout: float = 300, block_gapfuzz: bool = True,
           reproduced: tuple = (1,), hang_reproduces: bool = False, python: str | None = None) -> tuple[int, str]:
    """Run repro.py ``tries`` times in fresh interpreters (that cannot import gapfuzz, unless the backend
    is a plug-in whose class needs it); returns how many reproduced the bug: ended with an exit status
    in ``reproduced`` (1; a crash's signal as its negative), or, with ``hang_reproduces`` (the bug is a
    hang), ran past ``timeout``, the campaign's. Each runs in a scratch folder holding only ``repro.py``
    and ``inputs.pt``, with no script folder on ``sys.path`` (``-P``): a run folder is data, and a
    ``torch.py`` shipped beside a reproducer must not stand in for torch. ``python``: the interpreter (a
    release's environment's; this one by default)."""
    failures, last = 0, ""
    code = "import sys\n" + (BLOCK_GAPFUZZ if block_gapfuzz else "") + \
        "try:\n    exec(compile(open('repro.py').read(), 'repro.py', 'exec'), {'__name__': '__main__'})\n" \
        "except Exception:  # the script itself failed (exit 1 would read as the bug)\n" \
        f"    import traceback\n    traceback.print_exc()\n    sys.exit({SCRIPT_FAILED})\n"
    for _ in range(tries):
        rc, output = _fresh_run(folder, python or sys.executable, code, timeout)
        if rc is None:
            failures += hang_reproduces
            last = output + f"\n[no result within {timeout:g} s: " + \
                ("the hang is reproduced]" if hang_reproduces else "not the bug]")
        else:
            failures += rc in reproduced
            last = output + f"\n[exit status {rc}]"
    return failures, last


def _fresh_run(folder: Path, python: str, code: str, timeout: float) -> tuple[int | None, str]:
    """One run of ``code`` beside a copy of the folder's files: its exit status (None past ``timeout``) and
    the end of its output."""
    safe_path = ["-P"] if sys.version_info >= (3, 11) else []  # Python 3.10 has no -P; the scratch folder stands
    # output to a file and the process in its own group: a child that a crashing stack forked and
    # left behind (seen with OpenVINO) would otherwise hold the pipes open until the timeout
    with tempfile.TemporaryFile("w+") as log, tempfile.TemporaryDirectory(prefix="gapfuzz-verify-") as scratch:
        for name in FILES:
            if (folder / name).is_file():
                shutil.copyfile(folder / name, Path(scratch) / name)
        proc = subprocess.Popen([python, *safe_path, "-c", code], cwd=scratch, stdout=log,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            rc = None
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
        log.seek(0)
        return rc, log.read()[-4000:]


def reproduced_by(record, key) -> tuple:
    """The exit statuses of repro.py that mean the bug is there: 1, and for a crash what it died of
    (a signal, as Popen gives it: its negative; an exit status). ``record``: a ``RunRecord`` or a row."""
    record = record_of(record)
    cause = str(record.cause or "")
    if key.kind != Kind.FAILURE or record.status != Status.CRASH:
        return (1,)
    if cause.startswith("signal:") and hasattr(signal, cause[7:].split()[0]):
        return 1, -int(getattr(signal, cause[7:].split()[0]))
    if cause.startswith("exit ") and cause[5:].strip().lstrip("-").isdigit():
        return 1, int(cause[5:].strip())
    return (1,)

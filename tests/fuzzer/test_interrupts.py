"""Ctrl-C and SIGTERM end every command with one line and exit status 130 or 143, every ``finally`` run and no
process of the command's making left behind: a sandbox's executor (in a session of its own, so that nothing ends
it with the command) is killed on the way out, and at exit if nothing closed its sandbox."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from gapfuzz.fuzzer.cli import main as cli
from tests.conftest import REPO


def _children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(entry))
            except (OSError, IndexError, ValueError):
                continue
    return out


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("signum, status, word", [(signal.SIGINT, 130, "interrupted"),
                                                  (signal.SIGTERM, 143, "terminated")], ids=["sigint", "sigterm"])
def test_a_stopped_command_says_one_line_with_its_status(signum, status, word, monkeypatch, capsys):
    """In this process: the signal arrives while a command works; ``main`` says one line and returns 128 + the
    signal, and puts the SIGTERM handler it had back."""
    ended = []
    monkeypatch.setattr(cli, "end_children", lambda: ended.append(True))  # not this test process's children

    def working(args):
        os.kill(os.getpid(), signum)
        time.sleep(30)
        raise AssertionError("the signal did not stop the command")

    monkeypatch.setitem(cli.COMMANDS, "mutators", working)
    before = signal.getsignal(signal.SIGTERM)
    assert cli.main(["mutators"]) == status
    err = capsys.readouterr().err
    assert err == f"gapfuzz: {word}\n" and ended == [True]
    assert signal.getsignal(signal.SIGTERM) == before


@pytest.mark.ray  # starts a sandbox
def test_an_executor_nobody_closed_ends_with_this_process():
    from gapfuzz.workers.run import sandbox

    sb = sandbox.Sandbox(keep_spare=False)
    sb.start()
    pid = sb.proc.pid
    assert os.getpgid(pid) == pid  # a session of its own: nothing but gapfuzz ends it
    sandbox._end_executors()  # what atexit calls
    assert not _alive(pid) and sb.proc.returncode is not None


def _slow_repro_run(d):
    """A run folder whose one cluster's target sleeps an hour in its prepare: ``repro`` is inside its
    executor when the signal comes."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from gapfuzz.fuzzer.config.campaign import from_dict
    from gapfuzz.results.schema import RunRecord, arrow_schema

    seed = "ops/nn.functional.relu/float32/0"
    (d / "records" / "x").mkdir(parents=True)
    c = from_dict({"name": "h", "seeds": [{"source": "ops", "include": [seed]}],
                   "backends": {"targets": [{"class": "tests.stacks.slow_backends:SlowToPrepare", "device": "cpu",
                                             "options": {"sleep_s": 3600}}]}}, "t")
    (d / "campaign.yaml").write_text(c.to_yaml())
    rec = RunRecord(campaign="h", variant_id=f"{seed}#0", seed_id=seed, backend="slow-prepare@cpu",
                    stack="slow-prepare", device="cpu", status="error", stage="compile", error_type="RuntimeError",
                    message="no kernel", recipe=f'{{"mutations":[],"rng":0,"seed":"{seed}"}}')
    pq.write_table(pa.Table.from_pylist([rec.to_row()], schema=arrow_schema()), d / "records/x/part-1.parquet")
    return d


@pytest.mark.ray  # starts a sandbox, though not Ray itself (12-16 s a case)
@pytest.mark.parametrize("signum, status, word", [(signal.SIGINT, 130, "interrupted"),
                                                  (signal.SIGTERM, 143, "terminated")], ids=["sigint", "sigterm"])
def test_repro_stopped_in_its_executor_says_one_line_and_leaves_no_process(signum, status, word, tmp_path):
    run = _slow_repro_run(tmp_path / "run")
    proc = subprocess.Popen([sys.executable, "-m", "gapfuzz.fuzzer.cli", "repro", str(run), "c-", "--allow-plugins",
                             "--out", str(tmp_path / "repro")], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline, executor = time.monotonic() + 240, None
        while executor is None and time.monotonic() < deadline and proc.poll() is None:
            for pid in _children(proc.pid):
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        if b"gapfuzz.workers.run.executor" in f.read():
                            executor = pid
                except OSError:
                    continue
            time.sleep(0.2)
        assert executor is not None, proc.communicate()[1][-3000:]
        time.sleep(3)  # the executor imports torch, then prepares: it sleeps there
        descendants = [executor, *_children(executor)]
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    lines = err.strip().splitlines()
    assert proc.returncode == status and lines[-1] == f"gapfuzz: {word}" and "Traceback" not in err, err[-3000:]
    time.sleep(0.5)
    assert not [pid for pid in descendants if _alive(pid)]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["sigint", "sigterm"])
def test_a_records_flush_holds_the_signal_until_its_files_are_marked_written(signum):
    """A signal between a file's rename and the pending list's update would have its records written twice."""
    from gapfuzz.fuzzer.cli.stopping import sigterm_raises
    from gapfuzz.results.sink import deferred_interrupt

    reached = []
    with sigterm_raises(), pytest.raises(KeyboardInterrupt):
        with deferred_interrupt():
            os.kill(os.getpid(), signum)
            time.sleep(0.2)
            reached.append(True)  # the block ends first
    assert reached == [True]

"""The progress display: plain lines in a log, a rich live display on a terminal, nothing with --quiet."""
import io
import re

from gapfuzz.fuzzer.progress import Progress, clock


class Tty(io.StringIO):
    def isatty(self):
        return True


class AsciiTty(io.TextIOWrapper):
    def isatty(self):
        return True


def _fill(p: Progress) -> None:
    p.context = "seeds 1/2  variants 5"
    for i in range(6):
        p.count("ok" if i % 3 else "mismatch", "inductor@cpu" if i % 2 else "onnxruntime@cpu")
        p.update()
    p.status["fault"] += 1  # callers may still add to the counter directly
    p.close()


def test_plain_lines_have_counts_and_eta_and_no_control_characters():
    out = io.StringIO()
    p = Progress(10, unit="pairs", stream=out, every_s=0)
    _fill(p)
    text = out.getvalue()
    lines = text.splitlines()
    assert len(lines) == 7  # every update (every_s=0) and the close (the status added after the last update)
    last = lines[-1]
    assert "pairs 7/10" in last and "seeds 1/2  variants 5" in last
    assert "fault 1 mismatch 2 ok 4" in last and "| inductor@cpu 3 onnxruntime@cpu 3" in last
    assert re.search(r"eta \d+:\d\d", last)
    assert "\x1b" not in text and "\r" not in text
    assert p.done == 7 and p.backend == {"inductor@cpu": 3, "onnxruntime@cpu": 3}


def test_plain_lines_wait_every_s():
    out = io.StringIO()
    p = Progress(10, stream=out, every_s=3600)
    for _ in range(5):
        p.count("ok")
        p.update()
    p.close()
    assert len(out.getvalue().splitlines()) == 2  # the first update, then the close
    out = io.StringIO()
    p = Progress(10, stream=out, every_s=0)
    p.count("ok")
    p.update()
    p.close()
    assert len(out.getvalue().splitlines()) == 1  # the close does not repeat an unchanged last line
    out = io.StringIO()
    p = Progress(10, stream=out, every_s=3600)
    p.update()
    p.count("ok")
    p.update()  # too soon for a line
    p.close()
    assert out.getvalue().splitlines()[-1].split("  ")[-1] == "ok 1"  # but the close shows it


def test_eta_unknown_until_something_is_done():
    p = Progress(10, stream=io.StringIO())
    assert "eta -" in p.line()
    p.total = 0
    p.count("ok")
    assert "eta -" in p.line()
    assert clock(200) == "3:20" and clock(3800) == "1:03:20"


def test_disabled_writes_nothing():
    for stream in (io.StringIO(), Tty()):
        p = Progress(10, stream=stream, every_s=0, enabled=False)
        _fill(p)
        p.update(force=True)
        assert stream.getvalue() == ""


def test_terminal_gets_a_rich_display_with_the_counts(monkeypatch):
    monkeypatch.setenv("COLUMNS", "160")  # rich reads the width of a terminal it cannot ask from here
    out = Tty()
    p = Progress(10, unit="pairs", stream=out)
    p.close()  # nothing was ever updated: only the final state
    out = Tty()
    p = Progress(10, unit="pairs", stream=out)
    assert out.getvalue() == ""  # nothing before the first update
    p.count("ok", "inductor@cpu", 3)
    p.update(force=True)
    assert "pairs 3/10" in out.getvalue() and "ok 3 | inductor@cpu 3" in out.getvalue()
    _fill(p)
    text = re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "", out.getvalue())
    assert "pairs 10/10" in text and "fault 1 mismatch 2 ok 7" in text
    assert "inductor@cpu 6 onnxruntime@cpu 3" in text
    assert "\x1b" in out.getvalue()  # it was a live display, not plain lines
    n = len(out.getvalue())
    p.close()
    assert len(out.getvalue()) == n  # a second close adds nothing


def test_total_zero_more_done_than_total_and_an_ascii_stream_do_not_crash():
    for total in (0, 2, -1):
        raw = io.BytesIO()
        for stream in (io.StringIO(), AsciiTty(raw, encoding="ascii"), io.TextIOWrapper(io.BytesIO(), "ascii")):
            p = Progress(total, stream=stream, every_s=0)
            p.update(force=True)
            p.context = "variants \u2014 5"  # not ascii
            _fill(p)
            assert "runs 7/" in p.line()


def test_the_gpus_utilisation_stands_beside_the_rate_read_at_most_every_few_seconds(monkeypatch):
    monkeypatch.setenv("COLUMNS", "160")
    reads = []

    def reader():
        reads.append(1)
        return [87.4, 3]
    out = io.StringIO()
    p = Progress(10, unit="pairs", stream=out, every_s=0)
    p.gpu_reader = reader
    p.count("ok")
    p.update()
    p.update(force=True)
    assert re.search(r"pairs 1/10 \(\d+/min, gpu 87% 3%\)  eta", out.getvalue().splitlines()[-1])
    assert len(reads) == 1  # one reading per GPU_EVERY_S, however often the line is drawn
    tty = Tty()
    p = Progress(10, unit="pairs", stream=tty)
    p.gpu_reader = lambda: [42]
    p.update(force=True)
    p.close()
    assert re.search(r"/min  gpu 42%  eta", re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "", tty.getvalue()))


def test_no_gpu_reading_shows_nothing_and_never_fails_the_run():
    def broken():
        raise OSError("nvidia-smi: no devices were found")
    for reader in (None, broken, lambda: []):
        p = Progress(10, unit="pairs", stream=io.StringIO(), every_s=0)
        p.gpu_reader = reader
        p.count("ok")
        p.update(force=True)
        assert "gpu" not in p.line() and "/min)" in p.line()
        assert p.gpu_reader is None  # a reader that has nothing to say is not asked again

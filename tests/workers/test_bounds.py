"""Bounded and escaped: whatever gapfuzz writes it reads back (a campaign file's size, run.json, a record's
fields), triage reads an old folder's 20 MB field in bounded memory, a record's text cannot end a Markdown
code block, and no record's terminal escapes reach the terminal."""
from __future__ import annotations

import io
import json
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from markdown_it import MarkdownIt

from gapfuzz.core.bugs import Status
from gapfuzz.core.strict_yaml import CAMPAIGN_MAX_BYTES, MAX_BYTES
from gapfuzz.core.text import MAX_FIELD_CHARS, capped, code_span, fenced, printable
from gapfuzz.fuzzer.cli.main import main
from gapfuzz.fuzzer.config.campaign import CampaignError, load_campaign, read_campaign_file
from gapfuzz.fuzzer.config.pools import Pools
from gapfuzz.results import manifest as run_json
from gapfuzz.results.folder import Folder, ResultsError
from gapfuzz.results.manifest import RunManifest
from gapfuzz.results.schema import RunRecord, arrow_schema
from gapfuzz.results.store import RecordStore

HEAD = "name: big\nseeds:\n  - {source: timm, include: [test_resnet]}\nbackends:\n  reference: eager@cpu\n  targets:\n"
HOSTILE = "\x1b[2J\x1b[31mred\x1b]0;title\x07 then\roverwritten"


def _cli(argv, capsys) -> tuple[int, str, str]:
    rc = main(argv)
    out = capsys.readouterr()
    return rc, out.out, out.err


# -- campaign files and run.json


def test_a_campaign_file_over_the_limit_is_one_line_with_its_size_and_nothing_is_written(tmp_path, capsys):
    path = tmp_path / "c.yaml"
    path.write_text(HEAD + "    - inductor@cpu\n# " + "x" * CAMPAIGN_MAX_BYTES + "\n")
    rc, out, err = _cli(["run", str(path), "--out", str(tmp_path / "run")], capsys)
    size = path.stat().st_size
    assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert f"campaign file of {size} bytes; at most {CAMPAIGN_MAX_BYTES} bytes are read" in err
    assert not (tmp_path / "run").exists()


def test_the_largest_accepted_campaign_round_trips(tmp_path):
    """Labelled targets are what run.json spells out at most length (each a backend entry of its own)."""
    lines, i = [], 0
    while True:
        line = f"    - {{backend: eager@cpu, label: t{i}}}\n"
        if len(HEAD) + sum(map(len, lines)) + len(line) > CAMPAIGN_MAX_BYTES - 64:
            break
        lines.append(line)
        i += 1
    text = HEAD + "".join(lines)
    text += "#" * (CAMPAIGN_MAX_BYTES - len(text) - 1) + "\n"
    path = tmp_path / "c.yaml"
    path.write_text(text)
    assert path.stat().st_size == CAMPAIGN_MAX_BYTES
    campaign = load_campaign(path)
    manifest = Pools(campaign).manifest()
    manifest.write(Folder(tmp_path))
    written = (tmp_path / "run.json").stat().st_size
    assert written <= run_json.MAX_BYTES and RunManifest.read(Folder(tmp_path)) == manifest
    assert len(manifest.targets) == len(lines)
    stored = campaign.to_yaml().encode()  # campaign.yaml, read back on --resume and by repro
    assert len(stored) <= MAX_BYTES and read_campaign_file(tmp_path / "campaign.yaml", data=stored)
    print(f"campaign file {CAMPAIGN_MAX_BYTES} B -> run.json {written} B, campaign.yaml {len(stored)} B")


def test_a_campaign_whose_aliases_would_write_more_than_is_read_back_is_refused_at_load(tmp_path):
    big = "a" * 60_000
    path = tmp_path / "c.yaml"
    aliases = ", ".join(["*d"] * 20)
    path.write_text(f"name: big\ndescription: &d {big}\nseeds:\n  - {{source: timm, include: [{aliases}]}}\n"
                    f"backends: {{reference: eager@cpu, targets: [inductor@cpu]}}\n")
    with pytest.raises(CampaignError, match=rf"campaign.yaml a run stores would be \d+ bytes; at most {MAX_BYTES}"):
        load_campaign(path)


def test_a_run_json_past_what_is_read_back_is_never_written(tmp_path):
    backends = {f"t{i}@cpu": {"stack": "eager", "device": "cpu", "options": {"x": "y" * 1000}} for i in range(1200)}
    m = RunManifest(campaign="m", reference="t0@cpu", oracle=None, targets=list(backends)[1:], backends=backends,
                    compare={})
    with pytest.raises(ResultsError, match=rf"run.json a run writes would be \d+ bytes; at most {run_json.MAX_BYTES}"):
        m.write(Folder(tmp_path))
    assert not (tmp_path / "run.json").exists()


# -- record fields


def _record(i: int, **columns) -> RunRecord:
    return RunRecord(**{"campaign": "m", "variant_id": f"timm/x#{i}", "seed_id": "timm/x", "backend": "inductor@cpu",
                        "stack": "inductor", "device": "cpu", "status": Status.CRASH, "stage": "compile",
                        "error_type": "RuntimeError", "message": f"boom {i}", **columns})


def test_a_record_text_field_is_cut_where_it_is_written_saying_how_much(tmp_path):
    RecordStore(tmp_path).write([_record(0, message="m" * (MAX_FIELD_CHARS + 1000), culprit_info="c" * 10)])
    row = RecordStore(tmp_path).read(["message", "culprit_info"]).to_pylist()[0]
    assert row["message"] == "m" * MAX_FIELD_CHARS + "… [cut: 1000 more characters]"
    assert row["culprit_info"] == "c" * 10 and capped("short") == "short"


def _folder_with_a_huge_field(path, message: str, rows: int = 1, distinct: bool = False) -> None:
    """A run folder of ordinary crashes and one file, written raw as an older gapfuzz (or a hostile writer)
    could, of ``rows`` records with a huge message: the same in each (Parquet stores it once), or ``distinct``."""
    RecordStore(path).write([_record(i) for i in range(20)])
    raw = []
    for i in range(rows):
        row = _record(99 + i).to_row()
        row.update(message=f"{i:04d}{message[4:]}" if distinct else message, time=None)
        raw.append(row)
    pq.write_table(pa.Table.from_pylist(raw, schema=arrow_schema()),
                   path / "records" / "inductor@cpu" / "part-raw-0.parquet")


# The peak of this process alone: ru_maxrss survives exec on Linux (a child forked from pytest starts at
# pytest's size), the high-water mark in /proc does not.
PEAK = """
import resource, sys
from gapfuzz.fuzzer.cli.main import main
rc = main(["triage", sys.argv[1]])
try:
    kb = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:"))
except OSError:
    kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print("PEAK_MB", kb // 1024, file=sys.stderr)
sys.exit(rc)
"""


def _peak_mb(path) -> tuple[int, str]:
    p = subprocess.run([sys.executable, "-c", PEAK, str(path)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    return int(p.stderr.split("PEAK_MB")[1].split()[0]), p.stdout


def test_triage_reads_a_20_mb_field_with_bounded_memory(tmp_path):
    small, huge = tmp_path / "small", tmp_path / "huge"
    RecordStore(small).write([_record(i) for i in range(20)])
    text = ("error at /tmp/x.py line 12: shape [3, 4] vs 0x1f " * 500_000)[:20 << 20]
    _folder_with_a_huge_field(huge, text)
    base, _ = _peak_mb(small)
    peak, out = _peak_mb(huge)
    print(f"triage peak RSS: {base} MB without the 20 MB field, {peak} MB with it")
    assert peak - base < 150, (base, peak)
    assert max(map(len, out.splitlines())) < 400


def test_triage_reads_a_huge_message_repeated_in_many_rows_with_bounded_memory(tmp_path):
    """Parquet holds a value repeated in 16 rows once (a dictionary); read as whole columns it was 16 copies
    (a 2.7 MB folder cost triage 1.5 GB). Text is read dictionary-encoded and capped before it is decoded."""
    small, huge = tmp_path / "small", tmp_path / "huge"
    RecordStore(small).write([_record(i) for i in range(20)])
    _folder_with_a_huge_field(huge, "x" * (20 << 20), rows=16)
    base, _ = _peak_mb(small)
    peak, out = _peak_mb(huge)
    print(f"triage peak RSS: {base} MB without the 16 x 20 MB field, {peak} MB with it")
    assert peak - base < 150, (base, peak)
    assert "[cut: " in out or max(map(len, out.splitlines())) < 400


def test_a_text_column_larger_than_capped_fields_can_be_is_refused_before_it_is_read(tmp_path, capsys,
                                                                                     monkeypatch):
    """Parquet decodes a page whole, and one page may hold a row group's every value: a text column of more
    bytes in a row group than its rows' capped fields could hold (38 MB of 50 MB messages cost diff 3.4 GB) is
    one line naming the file and the column, read from the footer alone."""
    from gapfuzz.results import store

    monkeypatch.setattr(store, "MAX_TEXT_CHUNK", 1 << 20)  # the bound, scaled down: 4 rows may hold 1 MiB
    _folder_with_a_huge_field(tmp_path, "x" * (512 << 10), rows=4, distinct=True)
    for argv in (["triage", str(tmp_path)], ["diff", str(tmp_path), str(tmp_path)]):
        rc, out, err = _cli(argv, capsys)
        assert rc == 2 and len(err.strip().splitlines()) == 1, err
        assert "part-raw-0.parquet: its column message holds 2 MiB of text in a row group of 4 rows, more than " \
               "gapfuzz writes (a field is capped at 65536 characters)" in err, err
    assert RecordStore(tmp_path).read(["variant_id", "status"]).num_rows == 24  # other columns still read


# -- Markdown


def _fences(markdown: str) -> list:
    return [t for t in MarkdownIt("commonmark").parse(markdown) if t.type == "fence"]


@pytest.mark.parametrize("text", ["```\n# Pwned\n```", "````\n[x](http://e)\n````````", "~~~\n# h", "a`b``c```d"])
def test_a_text_cannot_end_its_code_block(text):
    doc = "before\n\n" + fenced(text, "text") + "\n\n# After\n"
    fence, = _fences(doc)
    assert fence.content.rstrip("\n") == text.rstrip()
    heads = [t for t in MarkdownIt("commonmark").parse(doc) if t.type == "heading_open"]
    assert len(heads) == 1  # only "After"


@pytest.mark.parametrize("text", ["`a`", "x``y", "plain", "` lead"])
def test_a_code_span_holds_its_text_whole(text):
    inline = MarkdownIt("commonmark").parseInline(f"see {code_span(text)} here")[0].children
    spans = [t for t in inline if t.type == "code_inline"]
    assert len(spans) == 1 and spans[0].content.strip() == text.strip()


def test_report_md_keeps_a_record_message_inside_its_block(monkeypatch):
    from gapfuzz.fuzzer.repro import report

    monkeypatch.setattr(report, "environment", lambda: "torch x")
    message = "RuntimeError: bad\n```\n# Injected heading\n```\n[click](http://evil)"
    record = {"status": Status.CRASH, "stage": "compile", "message": message, "campaign": "m`x", "seed_id": "s",
              "variant_id": "v`", "recipe": json.dumps({"mutations": [["m`", {}]]}), "probe": None}
    cls = type("Stack", (), {"version": staticmethod(lambda: "1")})
    target = SimpleNamespace(name="t@cpu", options={"a": "`"}, backend_cls=lambda: cls)
    final = SimpleNamespace(node_count=1, ops=["aten.add`"])
    result = SimpleNamespace(status="reproducible", failures=3, tries=3, notes=[], nodes_before=5, nodes_after=1,
                             predicate_calls=4, mutations_dropped=0)
    md = report.bug_report("title", record, target, final, None, "print(1)", HOSTILE, result, {})
    tokens = MarkdownIt("commonmark").parse(md)
    headings = [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open"]
    assert "Injected heading" not in headings and "Error" in headings
    assert any(t.content.strip() == message for t in _fences(md))
    assert "\x1b" not in md and "\r" not in md


# -- the terminal


def test_printable_shows_control_characters_and_keeps_text():
    assert printable(HOSTILE) == "\\x1b[2J\\x1b[31mred\\x1b]0;title\\x07 then\\roverwritten"
    assert printable("a\tb\nc\r\nd") == "a\tb\nc\nd" and printable("a\nb", newlines=False) == "a\\x0ab"
    assert printable("x\x9b31m\u202eevil") == "x\\x9b31m\\u202eevil"


def test_triage_diff_and_why_print_no_control_characters(tmp_path, capsys):
    RecordStore(tmp_path).write([_record(0, error_type=HOSTILE, message=HOSTILE),
                                 _record(1, backend="eager@cpu", stack="eager", status=Status.OK)])
    rc, out, err = _cli(["triage", str(tmp_path)], capsys)
    assert rc == 0 and "\\x1b[2J" in out, err
    cluster = next(line.split()[0] for line in out.splitlines() if line.startswith("c-"))
    rc2, why, _ = _cli(["triage", str(tmp_path), "--why", cluster], capsys)
    rc3, diff, _ = _cli(["diff", str(tmp_path), str(tmp_path)], capsys)
    assert rc2 == rc3 == 0
    for text in (out, why, diff):
        assert not set(text) & {"\x1b", "\r", "\x07"}


def test_an_error_line_and_the_progress_line_show_escapes(tmp_path, capsys):
    from gapfuzz.fuzzer.progress import Progress

    rc, _, err = _cli(["triage", str(tmp_path / "x\x1b[2Jy")], capsys)
    assert rc == 2 and "x\\x1b[2Jy" in err and "\x1b" not in err
    stream = io.StringIO()
    p = Progress(3, stream=stream)
    p.context = "oldest: " + HOSTILE
    p.count(Status.OK, backend="t\x1b[31m@cpu")
    p.update(force=True)
    assert not set(stream.getvalue()) & {"\x1b", "\r", "\x07"} and "\\x1b[2J" in stream.getvalue()


def test_a_table_cell_cannot_clear_the_screen_or_overwrite_its_row():
    from gapfuzz.analysis.table import format_table

    table = format_table(["what"], [[HOSTILE]])
    assert not set(table) & {"\x1b", "\r", "\x07"}
    assert textwrap.dedent(table).splitlines()[2].startswith("\\x1b[2J\\x1b[31mred")

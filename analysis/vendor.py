"""One issue text per behaviour per stack: what a vendor's tracker and test suite take.

Triage keys bugs finely on purpose (one cluster per operator, stage, dtype where it matters); a vendor
reads behaviours: "NaN/Inf handling at relu and conv2d", not two clusters. ``digest(run, stack, out)``
groups one stack's vendor clusters by their node-symptom class (or failure stage), and clusters triage
explains (a precision default, reduction order) by explanation, marked explained rather than defects.
Per behaviour it writes a Markdown issue text listing every operator with its minimised reproducer
(shortest first; the ``gapfuzz repro`` command where there is none), then ``README.md`` (a table of the
behaviours) and ``test_<stack>_gapfuzz.py``: each defect reproducer embedded as a string and run in a
subprocess, ``xfail(strict=True)`` while the bug is there. Repro folders are only read, never run.
Where the campaign ran the stack in several releases, an issue says in which each cluster shows, in
triage's words ("regression: worked in onnxruntime 1.31.1, fails in 1.32.0"): the first release to look at.
"""
from __future__ import annotations

import base64
import json
import re
from dataclasses import astuple, dataclass, field
from pathlib import Path

from gapfuzz.core.bugs import MISSING, VENDOR_STAGES, Kind, ReproStatus, Stage, Status, Symptom, Verdict
from gapfuzz.core.codegen import docstring, strings_in, vet
from gapfuzz.core.files import OutsideFolder, inside
from gapfuzz.core.ids import BackendName
from gapfuzz.core.text import fenced

from .clusters import UNUSABLE_HERE
from .triage import describe, release_note

EXPLAINED = {"bfloat16": "bfloat16 precision default", "float16": "float16 precision default",
             "tf32": "TF32 matmul and convolution precision", "options": "results depend on the stack's options",
             "float32": "reference less exact than the stack (float32)", "reduction-order": "reduction order",
             "ill-conditioned": "ill-conditioned reference", "amplified": "amplified rounding"}
PRECISION = ("precision", "precision below the stack's documented precision")
SYMPTOMS = {Symptom.NONFINITE: ("nan-inf", "NaN/Inf handling"), Symptom.GRAD_NONFINITE: ("nan-inf", "NaN/Inf handling"),
            Symptom.INTEGER: ("integer", "integer results"), Symptom.VALUE: PRECISION, Symptom.NUMERIC: PRECISION,
            Symptom.GRAD: PRECISION, Symptom.TASK: ("task", "task-level answer"),
            **{s: ("structure", "output shape, dtype or structure") for s in (Symptom.SHAPE, Symptom.DTYPE,
                                                                               Symptom.STRUCTURE)}}
STAGES = {Stage.CONVERT: ("conversion-gap", "conversion gap"), Stage.COMPILE: ("compile-failure", "compile failure"),
          Stage.RUN: ("runtime-failure", "runtime failure")}
FAILED = (Status.CRASH, Status.TIMEOUT, Status.OOM, Status.ERROR, Status.UNSUPPORTED)
DATA_FILES = ("inputs.pt", "model.onnx")  # what a repro.py reads beside itself
MAX_TEXT, MAX_DATA = 1 << 20, 8 << 20


@dataclass
class Behaviour:
    name: str
    slug: str
    ops: list[str]
    clusters: list[str]
    runs: int
    explained: bool
    reproducers: int


@dataclass
class _Repro:
    cluster: str
    op: str
    text: str
    status: str = ""  # shrink.json's; "" when the folder has none
    lines: int = 0
    form: str = ""
    notes: list = field(default_factory=list)
    tried: str = ""
    files: dict = field(default_factory=dict)
    included: bool = True


def _given(v) -> bool:
    try:  # None, NaN, pandas NA and "-" are all "not given"
        return v is not None and bool(v == v) and str(v) not in ("", MISSING, "nan", "None", "<NA>")
    except (TypeError, ValueError):
        return False


def _list(v) -> list:
    return [] if v is None or isinstance(v, (float, str)) else list(v)


def _n(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _cell(v) -> str:
    return str(v).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ").strip()


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", str(text).lower()).strip("-") or "x"


def _read(path: Path, limit: int) -> bytes | None:
    """A regular file reached by no link, of a size gapfuzz writes; None otherwise (data, never trusted)."""
    try:
        if path.is_symlink() or path.parent.is_symlink() or not path.is_file() or path.stat().st_size > limit:
            return None
        return path.read_bytes()
    except OSError:
        return None


def _classify(row) -> tuple[str, str, bool]:
    """(slug, name, explained) of the behaviour a cluster shows."""
    explanation = getattr(row, "explanation", None)
    if _given(explanation) or row.kind == Kind.BENIGN:
        e = str(explanation) if _given(explanation) else "benign"
        return f"explained-{_slug(e)}", EXPLAINED.get(e, f"explained: {e}"), True
    if row.kind == Kind.FAILURE:
        status, stage = str(getattr(row, "status", "")), str(getattr(row, "stage", ""))
        if status == Status.CRASH:
            return "crash", "crash", False
        if status in (Status.TIMEOUT, Status.OOM):
            return "hang-oom", "hang or out of memory", False
        return STAGES.get(stage, (f"{_slug(stage)}-failure", f"{stage} failure")) + (False,)
    return SYMPTOMS.get(str(getattr(row, "symptom", "")), PRECISION) + (False,)


def _labels(run) -> dict[str, tuple[str, str]]:
    """Backend label -> (stack, device), from the records; a label's own parts where they say nothing."""
    try:
        df = run.records(["backend", "stack", "device"]).drop_duplicates()
    except Exception:  # noqa: BLE001 - an older folder: the labels alone
        return {}
    return {str(b): (str(s) if _given(s) else BackendName.loose(b).stack,
                     str(d) if _given(d) else BackendName.loose(b).device)
            for b, s, d in zip(df["backend"], df["stack"], df["device"])}


def _selected(run, stack: str) -> list:
    """The stack's vendor clusters and the ones triage explains, PyTorch's own (reference-suspect) and a stack's
    crashes on a host it cannot run on (``unusable here``) left out."""
    want, device = BackendName.loose(stack).stack, BackendName.loose(stack).device
    labels = _labels(run)
    rows = []
    for row in run.clusters(benign=True).itertuples(index=False):
        found = [(BackendName.stack_of(b), *labels.get(str(b), astuple(BackendName.loose(b))))
                 for b in _list(row.backends)]
        if str(getattr(row, "verdict", "")) == Verdict.REFERENCE_SUSPECT or row.level == UNUSABLE_HERE or \
                not any(want in (label, s) and (not device or d == device) for label, s, d in found):
            continue
        failed = row.kind == Kind.FAILURE and str(row.status) in FAILED and str(row.stage) in VENDOR_STAGES
        if bool(row.vendor) or failed or _given(getattr(row, "explanation", None)) or row.kind == Kind.BENIGN:
            rows.append(row)
    return rows


def _op(row) -> str:
    op = getattr(row, "failing_op" if row.kind == Kind.FAILURE else "first_div_op", None)
    ops = _list(getattr(row, "ops", None))
    return str(op) if _given(op) else ops[0] if ops else \
        "(no operator named)" if row.kind == Kind.FAILURE else "(not located)"


def _per_op(run, row) -> dict[str, tuple[int, set]]:
    """op -> (runs, seeds) of a cluster; one over several ops (a behaviour, a compiler pass): from its records."""
    ops, seeds = _list(getattr(row, "ops", None)), set(map(str, _list(getattr(row, "seed_ids", None))))
    if row.kind != Kind.FAILURE and len(ops) > 1:
        try:
            df = run.cluster(row.cluster, ["first_div_op", "seed_id"])
            out: dict[str, tuple[int, set]] = {}
            for op, g in df.groupby(df["first_div_op"].astype(object).where(df["first_div_op"].notna(), MISSING)):
                name = str(op) if _given(op) else "(not located)"
                out[name] = (len(g), set(g["seed_id"].dropna().astype(str)))
            return out
        except Exception:  # noqa: BLE001 - an older folder: the cluster's totals at each op
            return {op: (int(row.count), seeds) for op in ops}
    return {_op(row): (int(row.count), seeds)}


def _repro(run, cid: str, op: str) -> _Repro | None:
    """What ``gapfuzz repro`` left for a cluster: repro.py, its data files, shrink.json's verdict."""
    if getattr(run, "path", None) is None:
        return None
    folder = Path(run.path) / "repros" / cid
    text = _read(folder / "repro.py", MAX_TEXT)
    if text is None:
        return None
    r = _Repro(cid, op, text.decode("utf-8", "replace"))
    r.lines = r.text.count("\n") + (not r.text.endswith("\n"))
    try:
        shrink = json.loads(_read(folder / "shrink.json", MAX_TEXT) or b"null")
    except ValueError:
        shrink = None
    if isinstance(shrink, dict):
        r.status, r.form = str(shrink.get("status", "")), str(shrink.get("form", "") or "")
        r.notes = [str(n) for n in _list(shrink.get("notes")) if n]
        if isinstance(shrink.get("lines"), int) and shrink["lines"] > 0:
            r.lines = shrink["lines"]
        if isinstance(shrink.get("tries"), int) and shrink["tries"]:
            r.tried = f"failed {shrink.get('failures', 0)} of {shrink['tries']} fresh runs"
        r.included = r.status == ReproStatus.REPRODUCIBLE
    r.files = {name: data for name in DATA_FILES if (data := _read(folder / name, MAX_DATA)) is not None}
    return r


def _issue(name, stack, explained, rows, ops, repros, run_dir) -> str:
    runs, seeds = sum(int(r.count) for r in rows), set().union(*(s for _, s, _ in ops.values()))
    backends = sorted({str(b) for r in rows for b in _list(r.backends)})
    lines = [f"# [{stack}] {name}: {', '.join(list(ops)[:4])}{' +' + str(len(ops) - 4) if len(ops) > 4 else ''}", "",
             f"gapfuzz saw **{name}** on `{', '.join(backends)}` at {_n(len(ops), 'operator')}: {_n(runs, 'run')} "
             f"of {_n(len(seeds), 'model seed')} in {_n(len(rows), 'cluster')}, against PyTorch eager and a float64 "
             f"oracle."]
    notes: dict[str, list] = {}  # where the campaign ran the stack in several releases: in which each shows
    for r in rows:
        notes.setdefault(release_note(r), []).append(r.cluster)
    notes.pop("", None)
    if notes:
        lines += ["", "Across the releases the campaign ran:", *(f"- {', '.join(c)}: {n}" for n, c in notes.items())]
    if explained:
        lines += ["", f"> **Explained, not a defect.** Triage reproduces these differences on eager under the "
                  f"`{rows[0].explanation or 'benign'}` hypothesis (docs/triage.md); this documents the stack's "
                  f"behaviour and asks only for it to be confirmed."]
    lead = min((r for r in repros if r.included), key=lambda r: (r.lines, len(r.text)), default=None)
    lines += ["", "| operator | runs | seeds | clusters | reproducer |", "|---|---|---|---|---|"]
    for op, (n, s, cids) in ops.items():
        mine = [r for r in repros if r.op == op and r.included]
        lines.append(f"| `{_cell(op)}` | {n} | {len(s)} | {_cell(', '.join(cids))} | "
                     f"{'yes, ' + str(min(r.lines for r in mine)) + ' lines' if mine else 'no'} |")
    if lead is not None:
        lines += ["", f"## Reproducer (`{_cell(lead.op)}`, cluster {lead.cluster})", "", *_shown(lead)]
    lines += ["", "## Operators"]
    for op, (n, s, cids) in ops.items():
        lines += ["", f"### `{op}`", "", f"{_n(n, 'run')}, {_n(len(s), 'seed')}; cluster(s) {', '.join(cids)}."]
        for row in (r for r in rows if r.cluster in cids):
            try:
                note = release_note(row)
                lines.append(f"- {row.cluster}: {describe(row)}" + (f"; {note}" if note else ""))
            except Exception:  # noqa: BLE001 - an older folder's row: its id is enough
                lines.append(f"- {row.cluster}")
            if row.kind == Kind.FAILURE and _given(getattr(row, "message", None)):
                message = re.sub(r"\x1b\[[0-9;]*m", "", str(row.message))
                lines += ["", fenced("\n".join(message.splitlines()[:15]), "text")]
        for r in sorted((r for r in repros if r.op == op), key=lambda r: (not r.included, r.lines, len(r.text))):
            if r is lead:
                lines += ["", f"Reproducer: the one above (cluster {r.cluster})."]
            elif r.included:
                lines += ["", f"Reproducer (cluster {r.cluster}):", "", *_shown(r)]
            else:
                lines += ["", f"Cluster {r.cluster}'s reproducer is {r.status or 'unverified'}"
                          f"{' (' + r.tried + ')' if r.tried else ''}, so not included; "
                          f"`gapfuzz repro {run_dir} {r.cluster}` tries again."] + [f"- note: {x}" for x in r.notes]
        have = {r.cluster for r in repros}
        for cid in (c for c in cids if c not in have):
            lines += ["", f"No reproducer yet for {cid}: `gapfuzz repro {run_dir} {cid}` makes one."]
    lines += ["", "---", f"Found by gapfuzz in `{run_dir}`; cluster ids are stable across campaigns (`gapfuzz diff`)."]
    return "\n".join(lines) + "\n"


def _shown(r: _Repro) -> list[str]:
    how = ", ".join(x for x in (r.form, f"{r.lines} lines", r.tried or ("unverified: no shrink.json"
                                                                         if not r.status else "")) if x)
    files = f" Beside it: {', '.join(r.files)} (from the repro folder)." if r.files else ""
    return [f"`python repro.py` ({how}).{files}", *[f"- note: {x}" for x in r.notes], "", fenced(r.text, "python")]


def _tests(stack: str, entries: list[tuple[str, _Repro]]) -> str:
    """A pytest file for the vendor's own suite: one xfail(strict=True) test per reproducer, its text embedded."""
    out = [docstring(f"gapfuzz reproducers for {stack}: each test runs one as a subprocess and expects exit status "
                     "0.\n\nxfail(strict=True): a test fails (xfail) while its bug is there, and XPASS fails the run "
                     "once it is\nfixed, so the mark gets removed with the fix. Written by analysis.vendor; needs no "
                     "gapfuzz."),
           "import base64", "import subprocess", "import sys", "", "import pytest", "", "TIMEOUT = 600", "", "",
           "def _run(tmp_path, code, files):",
           "    for name, data in files.items():",
           "        (tmp_path / name).write_bytes(base64.b64decode(''.join(data)))",
           "    (tmp_path / 'repro.py').write_text(code, encoding='utf-8')",
           "    proc = subprocess.run([sys.executable, 'repro.py'], cwd=tmp_path, capture_output=True, text=True,",
           "                          timeout=TIMEOUT)",
           "    assert proc.returncode == 0, (proc.stdout[-3000:] + proc.stderr[-3000:])"]
    used = set()
    for name, r in entries:
        base = re.sub(r"\W+", "_", f"test_{_slug(name)}_{_slug(r.op)}_{r.cluster}").strip("_")
        fn = base if base not in used else f"{base}_{len(used)}"
        used.add(fn)
        var, coded = fn[5:].upper(), {k: base64.b64encode(v).decode() for k, v in r.files.items()}
        files = {k: [v[j:j + 96] for j in range(0, len(v), 96)] for k, v in coded.items()}
        reason = f"gapfuzz {r.cluster}: {name} at {r.op} on {stack} (a known bug; remove the mark with its fix)"
        out += ["", "", f"CODE_{var} = {r.text!r}", f"FILES_{var} = {files!r}", "", "",
                f"@pytest.mark.xfail(strict=True, reason={reason!r})", f"def {fn}(tmp_path):",
                f"    _run(tmp_path, CODE_{var}, FILES_{var})"]
    text = "\n".join(out) + "\n"
    vet(text, strings_in(stack, [(name, r.op, r.cluster) for name, r in entries]), f"test_{stack}_gapfuzz.py")
    return text


def digest(run, stack: str, out_dir) -> list[Behaviour]:
    """Write one issue text per behaviour of ``stack`` (``openvino`` or ``openvino@cpu``) of ``run`` (an
    ``analysis.api.Run``) into ``out_dir``, with README.md and test_<stack>_gapfuzz.py; most runs first."""
    out = Path(out_dir)
    if out.is_symlink():
        raise OutsideFolder(f"{out}: is a symbolic link; gapfuzz follows no link when it writes into a folder")
    out.mkdir(parents=True, exist_ok=True)
    run_dir, name_of = str(run.folder), re.sub(r"\W+", "_", BackendName.stack_of(stack)).strip("_") or "stack"
    groups: dict[str, tuple[str, bool, list]] = {}
    for row in _selected(run, stack):
        slug, name, explained = _classify(row)
        groups.setdefault(slug, (name, explained, []))[2].append(row)
    behaviours, entries = [], []
    for slug, (name, explained, rows) in groups.items():
        ops: dict[str, tuple[int, set, list]] = {}
        repros = []
        for row in rows:
            per = _per_op(run, row)
            for op, (n, seeds) in per.items():
                had = ops.get(op, (0, set(), []))
                ops[op] = (had[0] + n, had[1] | seeds, had[2] + [row.cluster])
            at = _op(row) if _op(row) in per else next(iter(per))
            repros += [r for cid in [row.cluster, *_list(getattr(row, "merged", None))]
                       if (r := _repro(run, str(cid), at)) is not None]
        ops = dict(sorted(ops.items(), key=lambda kv: (-kv[1][0], kv[0])))
        inside(out, f"{slug}.md").write_text(_issue(name, stack, explained, rows, ops, repros, run_dir),
                                             encoding="utf-8")
        kept = sorted((r for r in repros if r.included), key=lambda r: (r.lines, len(r.text)))
        entries += [] if explained else [(name, r) for r in kept]
        behaviours.append(Behaviour(name, slug, list(ops), [r.cluster for r in rows], sum(int(r.count) for r in rows),
                                    explained, len(kept)))
    behaviours.sort(key=lambda b: (-b.runs, b.explained, b.name))
    table = ["| behaviour | operators | clusters | runs | reproducers |", "|---|---|---|---|---|"]
    table += [f"| [{_cell(b.name)}]({b.slug}.md){' (explained, not a defect)' if b.explained else ''} | "
              f"{_cell(', '.join(b.ops))} | {_cell(', '.join(b.clusters))} | {b.runs} | {b.reproducers} |"
              for b in behaviours]
    inside(out, "README.md").write_text(
        f"# gapfuzz findings for {stack}\n\nFrom `{run_dir}`: {len(behaviours)} behaviour(s), most runs first; one "
        f"issue text each. `test_{name_of}_gapfuzz.py` holds the defects' reproducers as strict xfail tests.\n\n"
        + ("\n".join(table) if behaviours else "Nothing to report for this stack.") + "\n", encoding="utf-8")
    inside(out, f"test_{name_of}_gapfuzz.py").write_text(_tests(stack, entries), encoding="utf-8")
    return behaviours

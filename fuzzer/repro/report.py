"""report.md: what a vendor needs to act on a reproducer, in the order they read it, and its title."""
from __future__ import annotations

import functools
import json
import os
import platform

from gapfuzz.core.bugs import EXAMPLE_PROBE, GRADIENT_SYMPTOMS, Kind, ReproStatus, Status, Symptom, Verdict
from gapfuzz.core.templates import template
from gapfuzz.core.text import code_span, fenced, printable
from gapfuzz.fuzzer.repro.across import in_words as release_words
from gapfuzz.fuzzer.repro.record import record_of
from gapfuzz.results.columns import recipe_of
from gapfuzz.results.schema import RunRecord
from gapfuzz.workers.judge.culprit import in_words
from gapfuzz.workers.run.registry import BackendSpec


@functools.lru_cache(maxsize=1)
def environment() -> str:
    """What a maintainer asks first, in a few lines: torch, Python, OS, CPU and GPU model (not
    ``collect_env``'s page of CPU flags and unrelated libraries)."""
    import torch

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
    return (f"torch {torch.__version__}, Python {platform.python_version()}, {platform.platform()}\n"
            f"CPU: {cpu} ({os.cpu_count()} threads); GPU: {gpu}")


def block(text: str, lang: str = "") -> list[str]:
    """``text`` as a code block's lines, fenced so that nothing in it ends the block (``core.text.fenced``), its
    control characters shown as escapes (``cat report.md`` on a terminal obeys none of a record's)."""
    return [fenced(printable(text), lang)]


def expected_text(record) -> str:
    """What the reproducer checks, in words: the one check it holds (``record``: a ``RunRecord`` or a row)."""
    record = record_of(record)
    if record.status not in (Status.MISMATCH, Status.OK):
        return (f"Expected: no {record.status}. `repro.py` exits 1 on the same failure (the same exception type "
                f"and message template; a crash's signal; a hang past the campaign's timeout) and 3 on another one.")
    blame = {Verdict.REFERENCE_DIVERGENT: "; float64 must side with this backend, as it did in the campaign",
             Verdict.ILL_CONDITIONED: "; both must be far from float64, as they were in the campaign"}
    return ("Expected: the outputs of PyTorch eager on the CPU, within the campaign's tolerance for their dtype "
            f"(|actual - expected| <= atol + rtol * |expected|, NaN where eager has NaN)"
            f"{blame.get(record.verdict, '')}. `repro.py` exits 1 while they differ.")


def _consensus(record: RunRecord) -> str:
    stacks = str(record.consensus or "other stacks").replace(",", " and ")
    return stacks + (", and numpy," if record.numpy_agrees is True else "")


def bug_report(title: str, record, target: BackendSpec, final, recipe, code: str, output: str, result,
               cluster: dict, script=None) -> str:
    """report.md's text. ``record``: a ``RunRecord`` or a row; ``recipe``: unused (the record's is reported)."""
    record = record_of(record)
    cls = target.backend_cls()
    version = record.backend_version or cls.version()  # the release it ran (an environment's, maybe)
    verdict = {ReproStatus.REPRODUCIBLE: f"reproduced in {result.failures} of {result.tries} fresh runs",
               ReproStatus.FLAKY: f"FLAKY: reproduced in only {result.failures} of {result.tries} fresh runs",
               ReproStatus.NOT_REPRODUCED: f"NOT reproduced in {result.tries} fresh runs"}[result.status]
    form = getattr(script, "form", "generic")
    needs = "the files beside it" if form == "generic" else \
        "nothing but the stack's package" + (" and model.onnx beside it" if "model.onnx" in form else "")
    lines = [
        f"# {title}", "",
        "## Summary", "",
        f"On {code_span(target.name)} ({cls.__name__} {version}, options {code_span(json.dumps(target.options))}), "
        f"this graph of {final.node_count} operator call(s) ({', '.join(code_span(o) for o in final.ops)}) "
        f"{_what_it_does(record)}. The reproducer {verdict}.", "",
        *[f"**Note:** {n}" for n in getattr(result, "notes", [])], *([""] if getattr(result, "notes", []) else []),
        *(["## Where in the compiler", "", culprit, ""] if (culprit := in_words(vars(record))) else []),
        *(["## Releases", "", *(f"- {r}: {v}" for r, v in result.releases.items()), "",
           *([f"It is {words}.", ""] if (words := release_words(result.releases)) else [])]
          if getattr(result, "releases", None) else []),
        "## Reproduce", "",
        f"`python repro.py` ({form}; it needs {needs}). It exits 1 while the bug is present.", "",
        *(["Rules it meets: " + "; ".join(script.rules) + ".", ""] if getattr(script, "rules", None) else []),
        *block(code, "python"), "",
        "## Expected and actual", "",
        expected_text(record), "", "Actual, as printed by `repro.py`:", "", *block(output.strip()), "",
    ]
    if record.status not in (Status.MISMATCH, Status.OK):
        lines += ["## Error", "", *block((record.message or record.cause or "").strip()[:3000]), ""]
    lines += ["## How it was found", "", _how_found(record, result, cluster),
              "", "## Environment", "", f"{cls.__name__} {version}; " + environment(), ""]
    return "\n".join(lines)


def _what_it_does(record: RunRecord) -> str:
    """What the graph does on the backend, in the summary's words: its failure, or how it diverges."""
    if record.status != Status.MISMATCH:
        return f"ends in {record.status} at the {record.stage} stage"
    if record.symptom == Symptom.MISSING_ERROR:
        raised = ((record.message or "an error").splitlines() or ["an error"])[0][:200]
        return f"returns a result where PyTorch eager checks the input and raises ({code_span(raised)}): " \
               f"the check is dropped"
    return {Verdict.REFERENCE_DIVERGENT: "diverges from PyTorch eager, and float64 sides with this backend: "
                                         "eager is the less accurate",
            Verdict.ILL_CONDITIONED: "diverges from PyTorch eager, and both are far from float64: the graph "
                                     "is ill-conditioned here, so this is not a defect of the backend alone",
            Verdict.REFERENCE_SUSPECT: f"gives what {_consensus(record)} give, and PyTorch eager (with its float64 "
                                       "oracle) is the one apart: a PyTorch behaviour to report to PyTorch"
            }.get(record.verdict, "diverges from PyTorch eager beyond what float64 explains")


def _how_found(record: RunRecord, result, cluster: dict) -> str:
    """The campaign, seed, variant, mutations and probe it was found with, and how far it was minimised."""
    mutations = recipe_of(record.recipe).get("mutations", [])
    found = (f"gapfuzz campaign {code_span(record.campaign)}, seed {code_span(record.seed_id)}, variant "
             f"{code_span(record.variant_id)} (mutations: {', '.join(code_span(m[0]) for m in mutations) or 'none'}), "
             f"input probe {code_span(record.probe or EXAMPLE_PROBE)} ({code_span(record.probe_recipe or '{}')}). "
             f"Minimised from {result.nodes_before} to {result.nodes_after} operator call(s) with "
             f"{result.predicate_calls} checks; {result.mutations_dropped} mutation(s) were not needed.")
    if cluster:
        found += (f" Cluster {code_span(cluster.get('cluster'))}: {cluster.get('count')} run(s) over "
                  f"{cluster.get('seeds')} seed(s).")
    return found


def title(record: RunRecord, backend: str, v) -> str:
    """The report's title: the backend, the op and what it does wrong."""
    op = record.first_div_op or (v.ops[0] if v.ops else "a graph")
    if record.status == Status.MISMATCH and record.symptom in GRADIENT_SYMPTOMS:
        return (f"{backend}: the backward of {op} diverges from PyTorch eager in training "
                f"({record.worst_output or 'a gradient'}, {record.output_dtype})")
    if record.status == Status.MISMATCH and record.symptom == Symptom.MISSING_ERROR:
        raised = (record.message or "an error").splitlines()[0][:100]
        return f"{backend}: {op} returns a result where PyTorch eager raises ({raised})"
    if record.status == Status.MISMATCH:
        blame = " (float64 blames eager)" if record.verdict == Verdict.REFERENCE_DIVERGENT else ""
        return f"{backend}: {op} diverges from PyTorch eager{blame} ({record.symptom}, {record.output_dtype})"
    what = (record.error_type or record.cause or record.status).rsplit(".", 1)[-1]
    message = template(record.message)[:80]
    return f"{backend}: {record.status} at {record.stage} ({what}{': ' + message if message else ''})"


def failure_words(key) -> tuple[str, str]:
    """A failure's exception type (its last name) and the fixed start of its message template."""
    if key.kind != Kind.FAILURE:
        return "", ""
    words = key["template"].split(" | ")[0].split("<")[0].strip()
    return key["error_type"].rsplit(".", 1)[-1], words[:60] if len(words) >= 8 else ""

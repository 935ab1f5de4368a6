"""report.md: what a vendor needs to act on a reproducer, in the order they read it."""
from __future__ import annotations

import functools
import json
import platform

from core.bugs import EXAMPLE_PROBE, ReproStatus, Status, Verdict
from workers.culprit import in_words
from workers.registry import BackendSpec


@functools.lru_cache(maxsize=1)
def environment() -> str:
    """torch.utils.collect_env's report (torch, CUDA, drivers, OS, CPU, libraries)."""
    try:
        from torch.utils import collect_env

        return collect_env.get_pretty_env_info()
    except Exception as e:  # noqa: BLE001 - an environment we cannot fully read is still reported
        import torch

        return f"torch {torch.__version__}, Python {platform.python_version()}, {platform.platform()} ({e})"


def expected_text(record: dict) -> str:
    """What the reproducer checks, in words: the one check it holds."""
    if record["status"] not in (Status.MISMATCH, Status.OK):
        return (f"Expected: no {record['status']}. `repro.py` exits 1 on the same failure (the same exception type "
                f"and message template; a crash's signal; a hang past the campaign's timeout) and 3 on another one.")
    blame = {Verdict.REFERENCE_DIVERGENT: "; float64 must side with this backend, as it did in the campaign",
             Verdict.ILL_CONDITIONED: "; both must be far from float64, as they were in the campaign"}
    return ("Expected: the outputs of PyTorch eager on the CPU, within the campaign's tolerance for their dtype "
            f"(|actual - expected| <= atol + rtol * |expected|, NaN where eager has NaN)"
            f"{blame.get(record.get('verdict'), '')}. `repro.py` exits 1 while they differ.")


def _consensus(record: dict) -> str:
    stacks = str(record.get("consensus") or "other stacks").replace(",", " and ")
    return stacks + (", and numpy," if record.get("numpy_agrees") is True else "")


def bug_report(title: str, record: dict, target: BackendSpec, final, recipe, code: str, output: str, result,
               cluster: dict) -> str:
    cls = target.backend_cls()
    version = cls.version()
    kind = f"ends in {record['status']} at the {record.get('stage')} stage"
    if record["status"] == Status.MISMATCH:
        kind = {Verdict.REFERENCE_DIVERGENT: "diverges from PyTorch eager, and float64 sides with this backend: "
                                             "eager is the less accurate",
                Verdict.ILL_CONDITIONED: "diverges from PyTorch eager, and both are far from float64: the graph "
                                         "is ill-conditioned here, so this is not a defect of the backend alone",
                Verdict.REFERENCE_SUSPECT: f"gives what {_consensus(record)} give, and PyTorch eager (with its float64 "
                                           "oracle) is the one apart: a PyTorch behaviour to report to PyTorch"
                }.get(record.get("verdict"), "diverges from PyTorch eager beyond what float64 explains")
    verdict = {ReproStatus.REPRODUCIBLE: f"reproduced in {result.failures} of {result.tries} fresh runs",
               ReproStatus.FLAKY: f"FLAKY: reproduced in only {result.failures} of {result.tries} fresh runs",
               ReproStatus.NOT_REPRODUCED: f"NOT reproduced in {result.tries} fresh runs"}[result.status]
    error = record.get("message") or ""
    figures = {k: record.get(k) for k in ("symptom", "verdict", "max_abs_err", "tol_ratio", "err_vs_oracle",
                                          "ref_err_vs_oracle", "first_div_node", "first_div_op", "output_dtype")}
    lines = [
        f"# {title}", "",
        "## Summary", "",
        f"On `{target.name}` ({cls.__name__} {version}, options `{json.dumps(target.options)}`), this graph of "
        f"{final.node_count} ATen operator call(s) ({', '.join(f'`{o}`' for o in final.ops)}) {kind}. "
        f"The reproducer {verdict}.", "",
        *(["## Where in the compiler", "", culprit, ""] if (culprit := in_words(record)) else []),
        "## Reproduce", "",
        "```sh\npython repro.py   # needs torch and the backend's package; inputs.pt holds the inputs and weights\n```",
        "", "```python", code.rstrip(), "```", "",
        "## Expected and actual", "",
        expected_text(record), "", "Actual, as printed by `repro.py`:", "",
        "```", output.strip(), "```", "",
    ]
    if record["status"] == Status.MISMATCH:
        lines += ["Figures of the original (unminimised) run:", "", "```json", json.dumps(figures, indent=1,
                                                                                         default=str), "```", ""]
    else:
        lines += ["## Error", "", "```", (error or record.get("cause") or "").strip()[:3000], "```", ""]
    lines += [
        "## How it was found", "",
        f"gapfuzz campaign `{record.get('campaign')}`, seed `{record['seed_id']}` ({record.get('seed_source')}, "
        f"family {record.get('family')}), variant `{record['variant_id']}`, recipe:", "",
        "```json", json.dumps(json.loads(record["recipe"]), indent=1), "```", "",
        f"Input probe `{record.get('probe') or EXAMPLE_PROBE}` (the inputs in `inputs.pt` are that probe's): "
        f"`{record.get('probe_recipe') or '{}'}`.", "",
        f"Minimised from {result.nodes_before} to {result.nodes_after} operator call(s) with "
        f"{result.predicate_calls} checks, each in a fresh process; {result.mutations_dropped} mutation(s) of the "
        f"recipe were not needed (remaining: {[m[0] for m in recipe.mutations] or 'none: the seed itself'}).",
    ]
    if cluster:
        lines += ["", f"Cluster `{cluster.get('cluster')}` holds {cluster.get('count')} run(s) over "
                      f"{cluster.get('seeds')} seed(s)."]
    lines += ["", "## Environment", "", f"Backend: `{target.name}`, {cls.__name__} {version}", "", "```",
              environment().strip(), "```", ""]
    return "\n".join(lines)

"""``gapfuzz explain RUN CLUSTER``: one cluster's representative attributed on demand.

A campaign attributes each defect once (``workers.judge.attribution``, the tier-2 ledger); this runs
that attribution again for one cluster: for a campaign that ran with it off (``judge: {align: false,
bisect: false}``), a pair that ran out of its budget, or a stack changed since. The representative,
replayed from the run folder (``fuzzer.repro.replayed``), runs once on the reference, the oracle and
the target with the hypotheses, tier 2 and bisection on, on the probe its bug showed on.
"""
from __future__ import annotations

import dataclasses
import time

from gapfuzz.fuzzer.repro.record import ReproError
from gapfuzz.fuzzer.repro.replayed import replayed, representative

# what attribution writes, in the order a person reads it: what the run is, what explains it, where, and why
SHOWN = ("status", "verdict", "symptom", "error_type", "explanation", "explain_ratio", "first_div_op",
         "first_div_node", "node_symptom", "culprit", "culprit_subsystem", "culprit_step", "culprit_info",
         "culprit_layer", "bisect_compiles", "align_error", "bisect_error")


@dataclasses.dataclass
class Attribution:
    cluster: str
    backend: str
    variant_id: str
    then: dict  # the campaign's columns
    now: dict  # this run's
    cluster_now: str  # the bug key the run has now
    seconds: float


def attribute_cluster(run_dir, cluster_id: str, allow_plugins: bool = False,
                      allow_exec_options: bool = False) -> Attribution:
    """Run cluster ``cluster_id``'s representative with every attribution on; what it says beside what
    the campaign said."""
    t0 = time.perf_counter()
    found, row, _ = representative(run_dir, cluster_id)
    r = replayed(run_dir, found, allow_plugins, allow_exec_options)
    same_bug = r.same_bug(fresh=False)
    try:
        target = same_bug.target_run(r.variant, dataclasses.replace(r.settings, align=True, explain=True,
                                                                     bisect=True))
    finally:
        same_bug.close()
    if target is None:
        raise ReproError(f"{r.record.variant_id}: {r.target.name} did not run")
    now_key = same_bug.key_of(target)
    return Attribution(row["cluster"], r.target.name, r.record.variant_id,
                       {k: getattr(r.record, k) for k in SHOWN}, {k: getattr(target, k, None) for k in SHOWN},
                       now_key.id if now_key else "", time.perf_counter() - t0)


def lines(a: Attribution) -> list[str]:
    """The attribution as a two-column table (the campaign's, now), the columns that have a value."""
    rows = [(k, a.then[k], a.now[k]) for k in SHOWN if _given(a.then[k]) or _given(a.now[k])]
    width = max(len(k) for k, _, _ in rows) if rows else 0
    out = [f"{a.cluster}: {a.variant_id} on {a.backend}, attributed again in {a.seconds:.0f} s",
           f"{'':<{width}}  {'campaign':<40}  now"]
    out += [f"{k:<{width}}  {_text(then):<40}  {_text(now)}" for k, then, now in rows]
    same = a.cluster_now.startswith(a.cluster[:12]) or a.cluster.startswith(a.cluster_now)
    out.append(f"bug key now: {a.cluster_now or 'none (the run passed)'}" + ("" if same else
                                                                             f" (the campaign's: {a.cluster})"))
    return out


def _given(v) -> bool:
    return v is not None and v == v and v != ""


def _text(v) -> str:
    if not _given(v):
        return "-"
    text = f"{v:.3g}" if isinstance(v, float) else " ".join(str(v).split())
    return text if len(text) <= 40 else text[:39] + "…"

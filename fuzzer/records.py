"""Turn seed facts, variant facts and worker outcomes into run records."""
from __future__ import annotations

import json

from analysis.schema import COLUMNS, RunRecord
from analysis.signature import signature, template

_JSON_FIELDS = {"options": "backend_options", "backend_info": "backend_info", "versions": "versions"}


def _seed_columns(seed: dict | None) -> dict:
    seed = seed or {}
    return {"seed_source": seed.get("source", ""), "family": seed.get("family", ""), "task": seed.get("task", ""),
            "output_kind": seed.get("output_kind", ""), "params": seed.get("params")}


def _variant_columns(v: dict) -> dict:
    return {k: v[k] for k in ("recipe", "mutations", "semantics_preserving", "graph_hash", "node_count", "ops",
                              "metamorphic_err", "gen_s", "capture_s") if k in v}


def run_record(campaign: str, seed_id: str, seed: dict | None, variant: dict, outcome: dict,
               output_names: list | None = None) -> RunRecord:
    cols = {"campaign": campaign, "variant_id": variant["variant_id"], "seed_id": seed_id,
            **_seed_columns(seed), **_variant_columns(variant)}
    for k, v in outcome.items():
        if k in _JSON_FIELDS:
            cols[_JSON_FIELDS[k]] = json.dumps(v, sort_keys=True, default=str)
        elif k == "figures":
            cols.update({fk: fv for fk, fv in v.items() if fk in COLUMNS})
        elif k in COLUMNS:
            cols[k] = v
    cols["torch_version"] = (outcome.get("versions") or {}).get("torch", "")
    if isinstance(cols.get("worst_output"), int) and output_names:
        i = cols["worst_output"]
        cols["worst_output"] = output_names[i] if i < len(output_names) else str(i)
    elif cols.get("worst_output") is not None:
        cols["worst_output"] = str(cols["worst_output"])
    if cols.get("status") not in ("ok", "mismatch"):
        cols["signature"] = signature(cols.get("stage"), cols.get("error_type"), cols.get("message"))
    return RunRecord(**cols)


def seed_failure_record(campaign: str, seed_id: str, result: dict, backend: str, device: str,
                        failure_id: str) -> RunRecord:
    """The one record of a seed that failed to build, fit the budget, capture or run."""
    rec = RunRecord(campaign=campaign, variant_id=failure_id, seed_id=seed_id, backend=backend, device=device,
                    stack=backend.split("@")[0], status=result.get("status", "error"), stage=result.get("stage"),
                    error_type=result.get("error_type"), message=result.get("message"),
                    cause=result.get("cause"), **_seed_columns(result.get("seed")))
    rec.recipe = json.dumps({"seed": seed_id, "mutations": [], "rng": 0})
    rec.signature = signature(rec.stage, rec.error_type, rec.message)
    return rec


def catalog_row(seed_id: str, result: dict):
    """What a campaign's build learned about a seed, as a seed catalog row."""
    from analysis.catalog import CatalogRow

    seed = result.get("seed") or {}
    row = CatalogRow(seed_id=seed_id, source=seed.get("source", seed_id.split("/")[0]), family=seed.get("family", ""),
                     task=seed.get("task", ""), output_kind=seed.get("output_kind", ""), params=seed.get("params"),
                     input_spec=json.dumps(seed.get("input_spec", [])), capture_s=result.get("capture_s"))
    if result.get("status") != "ok":
        row.status = "skipped" if result.get("stage") == "budget" else result.get("status", "error")
        row.stage, row.error_type, row.message = result.get("stage"), result.get("error_type"), result.get("message")
        row.signature = signature(row.stage, row.error_type, row.message)
        return row
    base = result.get("base") or {}
    counts = base.get("op_counts", {})
    row.node_count, row.ops, row.op_counts = base.get("node_count"), sorted(counts), json.dumps(counts, sort_keys=True)
    row.output_names, row.build_s = base.get("output_names", []), result.get("build_s")
    return row


def cluster_key(r: RunRecord) -> str | None:
    """The first-level cluster a run falls in (None when it passed): feeds guidance."""
    if r.status == "ok":
        return None
    if r.status == "mismatch":
        return f"{r.backend}|mismatch|{r.symptom}|{r.verdict}|{r.output_dtype}"
    return f"{r.backend}|{r.status}|{r.stage}|{r.error_type}|{template(r.message)}"

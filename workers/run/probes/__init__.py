"""Input probes: several input sets per prepared (variant, backend), so a defect that depends on the
values fed to a graph is found every time, not when a mutation happens to draw them.

A probe is a kind and the parameters that replay it (``Probe``); each kind is one registered class in
``probes/kinds/`` (``ProbeKind``: its parameters, the role of input it changes, where it applies, how it
makes its inputs, its seeds). ``choose`` picks a variant's probes for a stack: the example first, then
the counted kinds round-robin (a special value, a magnitude, an integer or bool corner, ...), so a few
probes already cover every family that applies, up to ``per_variant``; then, beside them, each other
kind's own (relations, layouts, edges, bounds). ``make_inputs`` turns the capture's example inputs into a
probe's, deterministically, in any process.
"""
from __future__ import annotations

import time

import torch
import torch.fx as fx

from gapfuzz.core.seeding import stable_int
from gapfuzz.workers.run.probes.base import EXAMPLE, RESIZE, Graph, Probe, ProbeKind, ProbeKindError, ProbeRun
from gapfuzz.workers.run.probes.registry import (
    BESIDE,
    COUNTED,
    DEFAULT_KINDS,
    KINDS,
    PROBE_KINDS,
    all_kinds,
    counted_rounds,
    kind,
)
from gapfuzz.workers.run.probes.roles import related_group, roles
from gapfuzz.workers.run.probes.settings import ProbeSettings


def base_seed(settings: ProbeSettings, variant_id: str) -> int:
    """The seed a variant's probes are offset from (each kind's ``offset``)."""
    return stable_int(f"{settings.campaign_seed}/{variant_id}/probes")


def choose(gm: fx.GraphModule, inputs: tuple, settings: ProbeSettings, variant_id: str,
           any_strides: bool | None = True) -> list[Probe]:
    """The variant's probes for a stack (``Backend.any_strides``), the example first; the same list in
    every process. ``per_variant`` counts the example and the counted kinds; each other kind's probes
    come after them, in the kinds' order (relations, layouts, edges, bounds)."""
    graph = Graph(gm, inputs, roles(gm, inputs), settings, any_strides)
    seed, have = base_seed(settings, variant_id), graph.have
    chosen = [Probe()]
    for k, params in counted_rounds():
        if len(chosen) >= settings.per_variant:
            break
        if settings.allows(k.name) and k.needs in have:
            chosen.append(k.probe(seed, params))
    counted = len(chosen) > 1
    for k in all_kinds():
        if not k.counted and k.name != EXAMPLE and settings.allows(k.name):
            chosen += [k.probe(seed, params, at) for at, params in enumerate(k.propose(graph))]
    # the example stays where the campaign names it, or where none of its counted kinds applies to this graph
    # (a list of integer corners on a graph of floats): every graph is judged on some input set
    return chosen if settings.allows(EXAMPLE) or not counted else chosen[1:]


def make_inputs(inputs: tuple, input_roles: list[str], probe: Probe) -> tuple:
    """The probe's inputs (new tensors; the example is left alone), on the example's devices."""
    if probe.kind == EXAMPLE:
        return tuple(inputs)
    g = torch.Generator().manual_seed(probe.seed)
    return kind(probe.kind).make(tuple(inputs), input_roles, dict(probe.params), g)


def probed(variant, probe: Probe):
    """The variant (``core.ir.Variant``) fed with the probe's inputs instead of its example."""
    if probe.kind == EXAMPLE:
        return variant
    return variant.with_graph(variant.gm, make_inputs(variant.inputs, roles(variant.gm, variant.inputs), probe))


def run_probes(call, inputs: tuple, input_roles: list[str], probes: list[Probe]) -> list[ProbeRun]:
    """Each probe through ``call(inputs) -> host outputs`` (the prepared backend); what one raises is its result."""
    from gapfuzz.core.failures import describe, status_of_error
    from gapfuzz.core.ir import checksum

    runs = []
    for probe in probes:
        fed = make_inputs(inputs, input_roles, probe)
        sums = checksum((str(i), t) for i, t in enumerate(fed) if isinstance(t, torch.Tensor))
        t0 = time.perf_counter()
        try:
            outputs = call(fed)
        except Exception as e:  # noqa: BLE001 - anything a backend raises is a record
            d = describe(e)
            runs.append(ProbeRun(probe, None, status_of_error(d["error_type"], d["message"]), d["error_type"],
                                 d["message"], time.perf_counter() - t0, sums))
            continue
        runs.append(ProbeRun(probe, outputs, run_s=time.perf_counter() - t0, input_checksum=sums))
    return runs


__all__ = ["BESIDE", "COUNTED", "DEFAULT_KINDS", "EXAMPLE", "KINDS", "PROBE_KINDS", "RESIZE", "Probe", "ProbeKind",
           "ProbeKindError", "ProbeRun", "ProbeSettings", "base_seed", "choose", "kind", "make_inputs", "probed",
           "related_group", "roles", "run_probes"]

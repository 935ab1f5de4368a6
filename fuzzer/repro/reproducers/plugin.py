"""A plug-in stack (a backend class of its own): its class imported from where the campaign named it,
handed the graph as ``torch.export`` gives it (what gapfuzz hands every backend), its outputs checked
against eager's for the cluster's symptom. The generic reproducer stands where this cannot show the bug."""
from __future__ import annotations

from gapfuzz.fuzzer.repro.reproducers.case import Case, Script
from gapfuzz.fuzzer.repro.reproducers.onnx_stacks import from_torch


def plugin(case: Case, class_path: str) -> list[Script]:
    if case.mode.backward:
        return []  # the generic form runs gapfuzz's training step
    module, _, name = class_path.partition(":")
    if not (name.isidentifier() and all(part.isidentifier() for part in module.split("."))):
        return []  # not names an import statement can hold: the generic form carries it as a literal
    prepare = f"{name}(**{dict(case.options)!r}).prepare(torch.export.export(Model(), inputs).module(), inputs, 'cpu')"
    return from_torch(case, f"{name} (plug-in)", f"torch and {module}", [f"from {module} import {name}"], prepare,
                      "(*inputs)", [f"the stack's own class, {class_path}, as the campaign named it"],
                      actual="[t.detach().cpu().numpy() for t in torch.utils._pytree.tree_leaves({})]")

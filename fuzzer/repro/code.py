"""Write a minimal variant as a stand-alone ``repro.py``: plain PyTorch and the stack's package.

A vendor reads the whole file, so it holds what the bug needs and nothing else: the graph as a
``torch.nn.Module`` (its forward is the graph's own code), the inputs and weights from ``inputs.pt``
rebuilt with their sizes, strides and storage offset, the backend's own ``prepare_fn`` copied
verbatim (``source_copy``), and the one check that shows the bug (``repro_checks``): the outputs
that were wrong against eager at the campaign's tolerance, float64 only where the verdict blames
eager, the task-level judge only for a task-level bug; for a failure, its exception type and
message template. Exit status 1 while the bug is present, 3 on another failure. Everything taken
from a record or a campaign file enters the script as a literal (``core.codegen.literal``), never as source.
"""
from __future__ import annotations

import ast
import importlib
import textwrap

import torch

from gapfuzz.core.bugs import FAILED, Status, Symptom, Verdict, bug_key
from gapfuzz.core.codegen import literal
from gapfuzz.core.ids import BackendName
from gapfuzz.core.ir import Variant, clone_exact
from gapfuzz.core.modes import RunMode
from gapfuzz.core.templates import template
from gapfuzz.core.tolerances import Tolerances
from gapfuzz.fuzzer.repro import checks as repro_checks
from gapfuzz.fuzzer.repro.record import record_of
from gapfuzz.fuzzer.repro.source_copy import SourceCopy
from gapfuzz.results.schema import RunRecord
from gapfuzz.workers.backends.eager import prepare_eager_fp64
from gapfuzz.workers.judge.task import canonicalize, task_agreement
from gapfuzz.workers.run import training
from gapfuzz.workers.run.registry import BackendSpec
from gapfuzz.workers.run.training import draws_randomly, output_names, trainable_parameters

HEADER = '''"""A reproducer written by gapfuzz: `python repro.py` beside inputs.pt, with torch and the backend's stack.
Exit status 1: the bug is present; 0: it is not; 3: the backend failed another way; 4: this script failed."""'''

LOAD = '''def main():
    data = torch.load("inputs.pt", weights_only=True)
    weights, inputs = data["weights"], data["inputs"]
    laid = [(tuple(t.shape), t.stride(), t.storage_offset()) for t in inputs]
    print(f"{TITLE}\\ninputs (sizes, strides, storage offset): {laid}")
    assert laid == LAYOUTS, "inputs.pt does not hold the layouts the bug was found with"'''
PREPARE = '''run, info = PREPARE({graph}, [exact(t, INPUT_DEVICE) for t in {fed}], DEVICE, OPTIONS)'''
DIVERGENCE = '''    with torch.no_grad():
        expected = {reference}
        try:
            {prepare}
            actual = {target}
        except Exception as e:
            print(f"{{BACKEND}} raised {{type(e).__name__}}: {{e}}\\na different failure: not the bug")
            return 3'''
FAILURE = '''    try:
        with torch.no_grad():
            {prepare}
            {target}
    except Exception as e:
        return failure(e, ERROR_TYPE, TEMPLATE)
    print(f"{{BACKEND}} ran without error: the bug is not present")
    return 0'''
ORACLE = '''        run_oracle, _ = prepare_eager_fp64({graph}, [exact(t, "cpu") for t in {fed}], "cpu", {{}})
        oracle = {oracle}'''
CHECK = '''    present = any([differs(name, actual[i], expected[i], TOLERANCES) for i, name in CHECKED.items()])'''
BLAME = '''    verdict = blame(actual, expected, oracle, TOLERANCES, MULTIPLIER, FAR)
    print(f"verdict {verdict} (the campaign's: {VERDICT})")
    present = present and verdict == VERDICT'''
TASK = '''    task = task_agreement(OUTPUT_KIND, actual, expected, NAMES, DETECTION_ADAPTER)
    print(f"task-level agreement with eager: {task}")
    present = task.get("task_agree", 1.0) < 1.0'''
ENTRY = '''if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as e:  # the reproducer itself failed, not the backend: not the bug
        print(f"repro.py could not run: {type(e).__name__}: {e}")
        sys.exit(4)
'''
VERDICT_LINE = '''    said = f"; it reports {info}" if info else ""  # what the stack says of itself (a precision, ...)
    print(f"the bug is {'present' if present else 'not present'} ({BACKEND} against eager on the CPU{said})")
    return int(present)'''


# copied into a reproducer whose backend is a class of its own, not a ``prepare_fn``; never called here
def prepare_plugin(gm, example_inputs, device, options):
    """A third-party backend class, imported from where the campaign named it."""
    module, _, name = CLASS_PATH.partition(":")  # noqa: F821 - a constant of the generated reproducer
    backend = getattr(importlib.import_module(module), name)(**options)
    return backend.prepare(gm, tuple(example_inputs), device), dict(getattr(backend, "info", None) or {})


def _forward_source(v: Variant) -> tuple[str, list[str]]:
    code = v.gm.graph.python_code(root_module="self")
    used = {n.id for n in ast.walk(ast.parse(code.src)) if isinstance(n, ast.Name)}
    lines = [f"{name} = torch.{name}" for name in code.globals if name in ("device", "dtype", "layout")
             and name in used]
    return textwrap.indent(code.src.strip(), "    "), lines


def _main(v: Variant, mode: RunMode, record: RunRecord, failure: bool, oracle: bool, task: bool, random: bool,
          boxes: bool) -> str:
    """main(): its graph, what it is fed and one call, as the mode runs them, and the one check."""
    prepare = PREPARE.format(graph=mode.repro_graph, fed=mode.repro_fed)
    target = mode.repro_call.format(run="run", device="INPUT_DEVICE")
    lines = [LOAD]
    if str(record.device or "").startswith("cuda"):  # the platform's TF32, as the run had it (default: off)
        lines.append(f"    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = "
                     f"{bool(record.tf32)}")
    lines.extend(mode.repro_setup)
    if random:  # random ops (dropout): Inductor draws with eager's generator, which train_step seeds
        lines.append("    import torch._inductor.config\n\n    torch._inductor.config.fallback_random = True")
    if failure:
        lines.append("    faulthandler.enable()  # a crash prints where it happened")
        if record.status == Status.TIMEOUT:
            lines.append("    faulthandler.dump_traceback_later(TIMEOUT_S, exit=True)  # a hang: the stacks, exit 1")
        return "\n".join([*lines, FAILURE.format(prepare=prepare, target=target)])
    against = BackendName.loose(record.judged_against or "").device or "cpu"  # eager there: the reference
    lines.append(DIVERGENCE.format(reference=mode.repro_call.format(run=mode.repro_graph, device=repr(against)),
                                   prepare=prepare, target=target))
    if oracle:
        lines.append(ORACLE.format(graph=mode.repro_graph, fed=mode.repro_fed,
                                   oracle=mode.repro_call.format(run="run_oracle", device='"cpu"')))
    if task:
        if boxes:  # detections in the campaign's canonical order, as its judge compared them
            lines.append("    actual, expected = canonicalize(actual, NAMES), canonicalize(expected, NAMES)")
        lines.append(CHECK.replace("present = ", "_ = ") + "\n" + TASK)
    else:
        lines.append(CHECK + ("\n" + BLAME if oracle else ""))
    return "\n".join([*lines, VERDICT_LINE])


def reproducer(v: Variant, target: BackendSpec, record, title: str, compare, output_kind: str = "tensor",
               detection_adapter: bool = True, timeout_s: float = 300.0) -> str:
    """The text of repro.py for variant ``v`` on backend ``target``, showing the bug of ``record`` (a
    ``RunRecord`` or a row); ``compare`` is the campaign's compare settings (``Tolerances``, or a mapping of
    tolerances, multiplier and far), ``timeout_s`` its timeout (a hang is a run that outlasts it)."""
    record = record_of(record)
    cls = target.backend_cls()
    failure = record.status in FAILED
    task = not failure and record.symptom in (Symptom.TASK, None) and record.task_agree is not None \
        and record.task_agree < 1
    oracle = not failure and not task and record.verdict in (Verdict.REFERENCE_DIVERGENT, Verdict.ILL_CONDITIONED)
    mode = v.mode
    random = mode.backward and draws_randomly(v.gm)
    boxes = output_kind == "boxes" and detection_adapter
    names = list(output_names(v))
    settings = compare if isinstance(compare, Tolerances) else Tolerances.from_dict(compare)
    key = bug_key(record.key_fields()) if failure and record.backend else None
    fed = [clone_exact(t) for t in v.inputs]  # as save_inputs writes them
    constants = [
        ("TITLE", title, True),
        ("BACKEND, DEVICE, INPUT_DEVICE", (target.name, target.device, cls.input_device or target.device), True),
        ("OPTIONS", dict(target.options), True), ("MODE", str(v.mode), bool(mode.entry())),  # not the default
        ("CLASS_PATH", None if cls.prepare_fn is not None else plugin_path(target), cls.prepare_fn is None),
        ("LAYOUTS", layouts(fed), True),
        ("PARAMS", trainable_parameters(v.gm) if mode.backward else None, mode.backward),
        ("ERROR_TYPE", key["error_type"] if key else record.error_type, failure),
        ("TEMPLATE", key["template"] if key else template(record.message), failure),
        ("TIMEOUT_S", float(timeout_s), record.status == Status.TIMEOUT),
        ("CHECKED", {i: str(names[i]) for i in mode.shown_at(names, record.symptom)}, not failure),
        ("TOLERANCES", {k: tuple(t) for k, t in settings.tolerances.items()}, not failure),
        ("VERDICT", record.verdict, oracle),
        ("MULTIPLIER", settings.multiplier, oracle), ("FAR", settings.far, oracle),
        ("NAMES", names, task), ("OUTPUT_KIND", output_kind, task), ("DETECTION_ADAPTER", detection_adapter, task),
    ]
    rules = _rules(record.message if not key or key["template"] == template(record.message) else
                   record.cause) if failure else None
    copy, prepare = _copied(cls, mode, rules, oracle=oracle, task=task, boxes=boxes)
    forward, aliases = _forward_source(v)
    literals = "\n".join(f"{k} = {literal(val)!s}" for k, val, wanted in constants if wanted)
    imports = ("import sys", "import torch", *(["import faulthandler"] if failure else []))
    parts = [
        HEADER + "\n" + copy.import_block(imports),
        "\n".join(aliases),
        literals,
        "class Repro(torch.nn.Module):\n    def __init__(self, weights):\n        super().__init__()\n" +
        ("        for name, t in weights.items():\n            self.register_buffer(name, t)\n" if v.tensors() else "")
        + "\n" + forward + "\n",
        copy.text(with_imports=False),
        _main(v, mode, record, failure, oracle, task, random, boxes),
        f"PREPARE = {prepare}\n" + ENTRY,
    ]
    return "\n\n".join(p.strip() for p in parts if p.strip()) + "\n"  # one screen: one blank line between parts


def _copied(cls, mode: RunMode, rules: str | None, oracle: bool, task: bool, boxes: bool) -> tuple[SourceCopy, str]:
    """The functions the script holds, copied verbatim (``source_copy``): the backend's ``prepare_fn`` (or the
    plug-in class's loader), what the mode's fragment calls, and the checks it makes; and the name it runs the
    backend by. ``rules``: a failure's template rules (None for a divergence)."""
    failure = rules is not None
    copy = SourceCopy({"TEMPLATE_RULES": rules} if failure else {}, separator="\n", stubs=STAGE_STUB)
    prepare = copy.add(cls.prepare_fn if cls.prepare_fn is not None else prepare_plugin)
    for name in mode.repro_helpers:  # what its fragment calls
        copy.add(getattr(training, name))
    for fn, wanted in ((prepare_eager_fp64, oracle),
                       (canonicalize, task and boxes), (task_agreement, task),
                       (repro_checks.exact, True), (repro_checks.host, True),
                       (repro_checks.differs, not failure), (repro_checks.blame, oracle),
                       (repro_checks.failure, failure)):
        if wanted:
            copy.add(fn)
    return copy, prepare


def layouts(inputs) -> list:
    """Each input's (sizes, strides, storage offset), as the reproducer asserts them."""
    return [(tuple(t.shape), tuple(t.stride()), t.storage_offset()) for t in inputs]


def _rules(message: str | None) -> str:
    """The rules of core.templates that change ``message`` (the others leave it, and a message of the
    same template, as it is), one a line, checked to read back as those rules and to template
    ``message`` as core.templates does."""
    used = repro_checks.rules_used(message)
    text = "TEMPLATE_RULES = [\n" + "".join(f"    {rule!r},\n" for rule in used) + "]\n" if used else \
        "TEMPLATE_RULES = []  # nothing in the message is incidental\n"
    listed = ast.literal_eval(text.partition("=")[2]) if used else []  # read back as the script will
    if listed != used or repro_checks.template(message, used) != template(message):
        raise ValueError(f"the reproducer's template of {str(message)[:80]!r} is not core.templates'")
    return text


def plugin_path(target: BackendSpec) -> str:
    """``module:Class`` of a backend whose run logic is its own class, not a ``prepare_fn``."""
    cls = target.backend_cls()
    plugin = cls.plugin or cls
    return target.cls_path or f"{plugin.__module__}:{plugin.__qualname__}"


# The stage a backend marks its code with (``workers.run.backend.stage``) is gapfuzz's bookkeeping, which a
# reproducer's one check does not read: it is written as a no-op, not copied.
STAGE_STUB = {"Stage": 'class Stage:  # where gapfuzz records a failure; nothing here reads it\n'
                       '    CONVERT, COMPILE, RUN = "convert", "compile", "run"\n',
              "stage": "def stage(name):\n    import contextlib\n\n    return contextlib.nullcontext()\n"}


def save_inputs(v: Variant, path) -> None:
    """inputs.pt: each input and weight as the stacks were fed it (``clone_exact``: the wire's copy),
    with its sizes, strides and storage offset; ``torch.save`` keeps a view's layout."""
    torch.save({"inputs": [clone_exact(t) for t in v.inputs],
                "weights": {k: clone_exact(t.detach()) for k, t in v.tensors().items()}}, path)

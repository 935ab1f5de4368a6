"""The layering of the packages, read from the source with ``ast`` (nothing is imported).

Top to bottom: fuzzer > seeds > workers > results > core. A module may import its own layer and any
below it, never one above. analysis reads results and core only (and itself); only fuzzer, at the
top, may import it. Every import counts, at module level or inside a function (a lazy import hides a
dependency, it does not remove one), relative ones resolved, so there is no import cycle among the
project's modules either.
"""
from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("core", "results", "workers", "seeds", "fuzzer", "analysis")
ORDER = ("core", "results", "workers", "seeds", "fuzzer")  # bottom to top
MAY_IMPORT = {
    **{pkg: set(ORDER[:i + 1]) for i, pkg in enumerate(ORDER)},
    "analysis": {"analysis", "results", "core"},
}
MAY_IMPORT["fuzzer"].add("analysis")

# Imports that break the rules in files being rewritten elsewhere: (importer, imported) -> why.
# Each one is being removed; delete its entry with it, so that it cannot come back.
ALLOWED: dict[tuple[str, str], str] = {
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def modules() -> dict[str, Path]:
    found = {}
    for pkg in PACKAGES:
        for path in sorted((REPO / pkg).rglob("*.py")):
            found[module_name(path)] = path
    return found


def _project_module(name: str) -> str | None:
    """The project module ``name`` names, or the nearest package above it that is one."""
    known = modules()
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def _installed(name: str) -> str:
    """``gapfuzz.core.bugs`` -> ``core.bugs``: the installed name of a project module, as its folder."""
    return name.removeprefix("gapfuzz.")


def bare_imports() -> list[str]:
    """Absolute imports of a project package by its folder name (``from core.bugs import``), not ``gapfuzz.``."""
    found = []
    for name, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and not node.level else []
            found += [f"{path.relative_to(REPO)}:{node.lineno} {n}" for n in names
                      if n.split(".")[0] in PACKAGES]
    return found


@cache
def raw_imports(name: str) -> tuple[tuple[str, int], ...]:
    """Every module ``name`` imports (project or not), relative names resolved, with the line of each."""
    path = modules()[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(_installed(alias.name), node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                parts = parts[:len(parts) - (node.level - 1)]
                base = ".".join(parts + ([node.module] if node.module else []))
            else:
                base = _installed(node.module)
            # ``from pkg import name`` imports the submodule pkg.name where there is one, else pkg itself
            found += [(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules() else base, node.lineno)
                      for alias in node.names]
    return tuple(found)


def imports_of(name: str) -> list[tuple[str, int]]:
    """The project modules ``name`` imports, with the line of each import."""
    found = []
    for target, line in raw_imports(name):
        hit = _project_module(target)
        if hit and hit != name:
            found.append((hit, line))
    return found


@cache
def graph() -> dict[str, dict[str, int]]:
    """importer -> {imported: first line}."""
    edges: dict[str, dict[str, int]] = {}
    for name in modules():
        edges[name] = {}
        for target, line in imports_of(name):
            edges[name].setdefault(target, line)
    return edges


def cycles(edges: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each as one cycle through it."""
    index, low, stack, on_stack, components = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(set(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return [_cycle_in(component, edges) for component in components]


def _cycle_in(component: set[str], edges: dict[str, dict[str, int]]) -> list[str]:
    """One cycle through the first module of ``component`` (breadth first, so a shortest one)."""
    start = min(component)
    paths = {start: [start]}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(edges[v]):
            if w == start:
                return paths[v] + [start]
            if w in component and w not in paths:
                paths[w] = paths[v] + [w]
                queue.append(w)
    return sorted(component)


def _shown(cycle: list[str], edges) -> str:
    return " -> ".join(f"{a} (line {edges[a][b]})" for a, b in zip(cycle, cycle[1:])) + f" -> {cycle[-1]}"


def test_the_packages_are_found():
    names = modules()
    assert {"core.bugs", "results.schema", "workers.run.runner", "seeds.registry", "fuzzer.cli.main",
            "analysis.api"} <= set(names)
    assert graph()["seeds.registry"]["seeds.sizes"]  # a relative import, resolved


def test_every_import_is_under_the_gapfuzz_namespace():
    assert not bare_imports(), "imports of a bare top-level name:\n" + "\n".join(bare_imports())


def test_there_is_no_import_cycle():
    edges = {a: {b: line for b, line in targets.items() if (a, b) not in ALLOWED} for a, targets in graph().items()}
    found = cycles(edges)
    assert not found, "import cycles:\n" + "\n".join(_shown(c, edges) for c in found)


def test_no_module_imports_a_layer_above_its_own():
    bad = []
    for name, targets in graph().items():
        layer = name.split(".")[0]
        for target, line in targets.items():
            if target.split(".")[0] not in MAY_IMPORT[layer] and (name, target) not in ALLOWED:
                bad.append(f"{modules()[name].relative_to(REPO)}:{line}: {name} imports {target}")
    assert not bad, "imports against the layers:\n" + "\n".join(bad)


def test_the_allow_list_holds_only_imports_that_still_exist():
    edges = graph()
    stale = [pair for pair in ALLOWED if pair[1] not in edges.get(pair[0], {})]
    assert not stale, f"remove these from ALLOWED, the imports are gone: {stale}"


def test_analysis_never_needs_torch():
    """analysis, and every project module it reaches, runs where torch is not installed."""
    edges, reached, todo = graph(), set(), [m for m in modules() if m.split(".")[0] == "analysis"]
    while todo:
        name = todo.pop()
        if name not in reached:
            reached.add(name)
            todo += list(edges[name])
    bad = [f"{modules()[m].relative_to(REPO)}:{line}: {m} imports {target}" for m in sorted(reached)
           for target, line in raw_imports(m) if target.split(".")[0] == "torch"]
    assert not bad, "analysis reaches torch:\n" + "\n".join(bad)


def test_the_run_mode_is_asked_of_its_strategy_alone():
    """No module but core.modes names a mode ("inference", Mode.TRAINING): it asks the mode's RunMode."""
    found = []
    for name, path in modules().items():
        if name == "core.modes":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Constant) and node.value in ("inference", "training") or \
                    isinstance(node, ast.Attribute) and node.attr in ("INFERENCE", "TRAINING"):
                found.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert not found, "mode named outside core.modes: " + ", ".join(found)

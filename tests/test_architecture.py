"""The package's structure: layers only point down, no import cycles, kernels are used through their public API.

The checks read the source with ``ast`` (every import statement, also those inside functions), so they hold for
code paths the other tests never run.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# source folder -> the package it installs as
PACKAGES = {ROOT / "bayeskern": "bayeskern", ROOT / "models": "bayeskern.models",
            ROOT / "inference": "bayeskern.inference"}
FAMILIES = ("bayeskern.bke", "bayeskern.kbr", "bayeskern.jdl", "bayeskern.compression", "bayeskern.cli",
            "bayeskern.models", "bayeskern.inference")
FOUNDATION = ("bayeskern.kernels", "bayeskern.linalg", "bayeskern.embeddings", "bayeskern.mmd", "bayeskern.hsic",
              "bayeskern._validation", "bayeskern._trees", "bayeskern._config", "bayeskern._kernel_choice",
              "bayeskern.fitted", "bayeskern._workers",
              "bayeskern.conditional", "bayeskern.testresult", "bayeskern.aggregate", "bayeskern.sharding", "bayeskern.datasets",
              "bayeskern.plotting")


def _modules() -> dict[str, tuple[Path, ast.Module]]:
    out = {}
    for folder, package in PACKAGES.items():
        for path in folder.rglob("*.py"):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join([package] + parts)] = (path, ast.parse(path.read_text(), str(path)))
    return out


MODULES = _modules()


def _is_package(name: str) -> bool:
    return MODULES[name][0].name == "__init__.py"


def _imports(name: str) -> set[str]:
    """The bayeskern modules that module ``name`` imports (anywhere in its body)."""
    tree = MODULES[name][1]
    base = name if _is_package(name) else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = base.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                module = ".".join(anchor + ([node.module] if node.module else []))
            else:
                module = node.module
            targets = [f"{module}.{alias.name}" if f"{module}.{alias.name}" in MODULES else module
                       for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in MODULES:  # `import bayeskern.kernels.base as b` etc.
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


GRAPH = {name: _imports(name) for name in MODULES}


def _in(name: str, prefixes) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def test_the_walker_sees_the_package():
    assert {"bayeskern", "bayeskern.kernels.base", "bayeskern.kbr.filter", "bayeskern.models.kbf",
            "bayeskern.inference.nuts"} <= set(MODULES)
    assert "bayeskern.kernels.base" in GRAPH["bayeskern.embeddings"]
    assert "bayeskern.kbr.filter" in GRAPH["bayeskern.models.kbf"]  # relative and absolute imports resolved


def test_no_import_cycles():
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(v):  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in GRAPH[v]:
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
                cycles.append(sorted(component))

    for v in GRAPH:
        if v not in index:
            visit(v)
    assert cycles == []


def test_foundation_imports_no_family_models_or_inference():
    foundation = [name for name in MODULES if _in(name, FOUNDATION)]
    assert len(foundation) > 10
    upward = {name: sorted(t for t in GRAPH[name] if _in(t, FAMILIES)) for name in foundation}
    assert {k: v for k, v in upward.items() if v} == {}


def test_no_private_kernel_api_outside_the_kernels_package():
    private = set()
    for name, (_, tree) in MODULES.items():
        if _in(name, ("bayeskern.kernels",)):
            for node in ast.walk(tree):
                if isinstance(node, ast.FunctionDef):
                    if node.name.startswith("_") and not node.name.startswith("__"):
                        private.add(node.name)
    assert {"_safe_sqrt", "_sqdist_exact"} <= private  # the walker finds the private helpers
    uses = []
    for name, (path, tree) in MODULES.items():
        if _in(name, ("bayeskern.kernels",)):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in private:
                uses.append(f"{path.relative_to(ROOT)}:{node.lineno} .{node.attr}")
            if isinstance(node, ast.ImportFrom) and node.module and "kernels" in node.module:
                uses += [f"{path.relative_to(ROOT)}:{node.lineno} import {a.name}" for a in node.names
                         if a.name.startswith("_")]
    assert uses == []

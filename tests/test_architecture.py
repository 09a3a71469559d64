"""The house rules of docs/architecture.md, checked on the code: imports point down the layers, no import
cycles, modules under 450 lines, functions under 80 lines, and nothing of the lab imported by the product."""
from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("spirv_tools", "vkcoop")

#: The layers, bottom first (docs/architecture.md). A module may import from its own package and from lower
#: layers only; the first matching prefix names a module's layer.
LAYERS = [
    ["spirv_tools"],
    ["vkcoop.errors"],
    ["vkcoop.paths", "vkcoop.progress", "vkcoop.lazy", "vkcoop.tensor", "vkcoop.sparse"],
    ["vkcoop.vk", "vkcoop.shaders"],
    ["vkcoop.gemm", "vkcoop.portable"],
    ["vkcoop.attention"],
    ["vkcoop.samples", "vkcoop.fuzz"],
    ["vkcoop.cuda"],
    ["vkcoop.bench", "vkcoop.inspect", "vkcoop.sanitize"],
    ["vkcoop.cli"],
    ["vkcoop.__main__"],
]
#: The package face: vkcoop/__init__.py may name anything; it only re-exports (and imports nothing upward today).
ROOTS = {"vkcoop", "spirv_tools"}
MAX_MODULE_LINES = 450
MAX_FUNCTION_LINES = 80


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def python_files(root: Path):
    for package in PACKAGES:
        yield from sorted((root / package).rglob("*.py"))


def syntax_tree(path: Path) -> ast.Module:
    """The file's syntax tree, parsed once per text: each check below reads every file of the product."""
    return _parsed(path, path.read_text())


@functools.lru_cache(maxsize=None)
def _parsed(path: Path, text: str) -> ast.Module:
    return ast.parse(text, str(path))


def imports_of(path: Path, name: str, files) -> set[str]:
    """Every module of ours that ``name`` imports, at any depth of the file (lazy imports inside functions
    count). ``from pkg import x`` is an edge to ``pkg.x`` where that is a module, else to ``pkg``."""
    tree = syntax_tree(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(_known(alias.name, files) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                found.add(f"{target}.{alias.name}" if f"{target}.{alias.name}" in files else _known(target, files))
    return found - {None, name}


def import_graph(root: Path) -> dict[str, set[str]]:
    files = {module_name(p, root): p for p in python_files(root)}
    return {name: imports_of(path, name, files) for name, path in files.items()}


def _known(target: str, files) -> str | None:
    """The module a dotted import lands in (``pkg.mod.attr`` -> ``pkg.mod``), or None if not ours."""
    if target.split(".")[0] not in PACKAGES:
        return None
    while target and target not in files:
        target = target.rpartition(".")[0]
    return target or None


def layer_of(module: str) -> int | None:
    best = None
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if module == prefix or module.startswith(prefix + "."):
                if best is None or len(prefix) > best[1]:
                    best = (index, len(prefix))
    return None if best is None else best[0]


def _package(module: str) -> str:
    for prefixes in LAYERS:
        for prefix in prefixes:
            if module == prefix or module.startswith(prefix + "."):
                return prefix
    return module


def upward_imports(graph) -> list[str]:
    problems = []
    for module, targets in graph.items():
        if module in ROOTS:
            continue
        mine = layer_of(module)
        for target in targets:
            if target in ROOTS or _package(target) == _package(module):
                continue
            theirs = layer_of(target)
            if mine is None or theirs is None:
                problems.append(f"{module} -> {target}: not in the layer table")
            elif theirs >= mine:
                problems.append(f"{module} (layer {mine}) -> {target} (layer {theirs})")
    return sorted(problems)


def cycles(graph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
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
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_imports_point_down_the_layers():
    assert upward_imports(import_graph(REPO)) == []


def test_there_are_no_import_cycles():
    graph = {m: {t for t in ts if t not in ROOTS} for m, ts in import_graph(REPO).items()}
    assert cycles(graph) == []


def _plant(tmp_path: Path, files: dict) -> Path:
    for relative, text in files.items():
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for package in PACKAGES:
        (tmp_path / package).mkdir(exist_ok=True)
        (tmp_path / package / "__init__.py").touch()
    return tmp_path


def test_a_planted_upward_import_and_cycle_are_caught(tmp_path):
    root = _plant(tmp_path, {
        "vkcoop/tensor/__init__.py": "",
        "vkcoop/tensor/spec.py": "def f():\n    from ..gemm import tiles\n",   # lazy, still counted
        "vkcoop/gemm/__init__.py": "",
        "vkcoop/gemm/tiles.py": "from ..tensor import spec\n",
        "vkcoop/vk/__init__.py": "from ..samples.runner import Sample\n",
        "vkcoop/samples/__init__.py": "", "vkcoop/samples/runner.py": "Sample = 1\n",
    })
    graph = import_graph(root)
    problems = upward_imports(graph)
    assert any(p.startswith("vkcoop.tensor.spec (layer 2) -> vkcoop.gemm.tiles") for p in problems), problems
    assert any(p.startswith("vkcoop.vk (layer 3) -> vkcoop.samples.runner") for p in problems), problems
    assert ["vkcoop.gemm.tiles", "vkcoop.tensor.spec"] in cycles(graph)


def _function_lengths(path: Path):
    for node in ast.walk(syntax_tree(path)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node.name, node.lineno, node.end_lineno - node.lineno + 1


def test_modules_and_functions_stay_small():
    too_long = []
    for path in python_files(REPO):
        lines = len(path.read_text().splitlines())
        if lines > MAX_MODULE_LINES:
            too_long.append(f"{path.relative_to(REPO)}: {lines} lines")
        for name, line, length in _function_lengths(path):
            if length > MAX_FUNCTION_LINES:
                too_long.append(f"{path.relative_to(REPO)}:{line} {name}: {length} lines")
    assert too_long == []


def lab_imports(root: Path) -> list[str]:
    """Every import of the lab (lab/: developer tools, not in the wheel) by a module of the product."""
    found = []
    for path in python_files(root):
        for node in ast.walk(syntax_tree(path)):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            else:
                continue
            found += [f"{path.relative_to(root)}:{node.lineno} {name}" for name in names
                      if name.split(".")[0] == "lab"]
    return found


def test_the_product_imports_nothing_from_the_lab(tmp_path):
    assert lab_imports(REPO) == []
    root = _plant(tmp_path, {"vkcoop/bench/sweep.py": "def f():\n    from lab import attention_explore\n",
                             "vkcoop/cli/tool.py": "import lab.attention_trace as trace\n"})
    assert lab_imports(root) == ["vkcoop/bench/sweep.py:2 lab", "vkcoop/cli/tool.py:1 lab.attention_trace"]

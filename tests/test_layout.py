"""The package's layout: no import cycle, and each folder imports only from those below it.

Read from the source (every ``import`` and ``from ... import``, also inside functions, where
cycles hide; those under ``if TYPE_CHECKING:`` are annotations, not imports).
"""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "aare_lab"

#: Lowest first: a module may import from its own layer and those before it.
LAYERS = (
    ("_version", "checks", "frames", "flags", "callable_module", "runtime"),
    ("storage",),
    ("sources",),
    ("detector",),
    ("model",),
    ("finders", "gpu"),
    ("pipeline", "analysis", "imaging", "calibration", "interop"),
    ("stream", "campaign", "simulate"),
    ("plots",),
    ("widgets", "demo"),
    ("commands", "cli", "__main__"),
)
RANK = {part: rank for rank, layer in enumerate(LAYERS) for part in layer}
#: What the compute core (everything below `plots`) never imports.
VIEW_ONLY = ("matplotlib", "ipywidgets", "ipympl", "IPython", "aare_lab.plots", "aare_lab.widgets")


def _modules() -> dict[str, Path]:
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


MODULES = _modules()


def _annotation_lines(tree: ast.AST) -> set[int]:
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            lines.update(n.lineno for n in ast.walk(node) if hasattr(n, "lineno"))
    return lines


def imports(module: str) -> list[tuple[str, int]]:
    """The modules ``module`` imports (absolute names, all packages included) and the lines."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _annotation_lines(tree)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Import, ast.ImportFrom)) or node.lineno in skip:
            continue
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
            continue
        base = node.module or ""
        if node.level:
            anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
            base = ".".join(anchor + ([node.module] if node.module else []))
        for alias in node.names:
            name = f"{base}.{alias.name}"
            found.append((name if name in MODULES else base, node.lineno))
    return found


def internal_graph() -> dict[str, set[str]]:
    graph = {module: set() for module in MODULES}
    for module in MODULES:
        for name, _ in imports(module):
            while name not in MODULES and "." in name:
                name = name.rpartition(".")[0]
            if name in MODULES and name not in (module, "aare_lab"):
                graph[module].add(name)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
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

    for v in graph:
        if v not in index:
            visit(v)
    return found


def part(module: str) -> str:
    return module.split(".")[1] if "." in module else "__init__"


def test_the_package_has_no_import_cycle():
    assert cycles(internal_graph()) == []


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_every_top_level_part_has_a_layer():
    assert sorted({part(m) for m in MODULES} - set(RANK) - {"__init__"}) == []


def test_nothing_imports_upward():
    upward = [f"{module} imports {name} (line {line})"
              for module in MODULES if module != "aare_lab"
              for name, line in imports(module)
              if name.startswith("aare_lab.") and RANK[part(name)] > RANK[part(module)]]
    assert upward == []


def test_the_compute_core_never_imports_views():
    core = [m for m in MODULES if m != "aare_lab" and RANK[part(m)] < RANK["plots"]]
    views = [f"{module} imports {name} (line {line})" for module in core
             for name, line in imports(module)
             if name.startswith(VIEW_ONLY)]
    assert views == []


@pytest.mark.parametrize("name", ["analysis", "detector", "interop", "model", "runtime",
                                  "storage", "stream"])
def test_each_folder_is_an_attribute_of_the_package_without_matplotlib(name):
    code = (f"import aare_lab, sys; m = aare_lab.{name}; "
            "assert 'matplotlib' not in sys.modules; print(m.__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == f"aare_lab.{name}"

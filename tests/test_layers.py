"""The package's shape, read from its source with `ast` (nothing is imported):

- layers: every import of an hpdparse module (at module level, inside functions, under
  TYPE_CHECKING alike) goes to the importer's own layer or one below it; the layers are the
  numbered list in `hpdparse/__init__.py`'s docstring, the one place they are written down;
- no import cycle between modules (a module that imports a package imports its __init__);
- no module over 400 lines (all its lines);
- no function over 60 lines of code. Counted: the lines from the first statement of the body
  to the function's last line, less blank lines, comment-only lines and the docstring; the
  signature and decorators are not counted. A nested function's lines count in the enclosing
  function too (and it is checked on its own).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import hpdparse

PACKAGE = Path(hpdparse.__file__).resolve().parent
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def layer_order() -> dict[str, int]:
    """Top-level name (package or module under hpdparse) -> its layer number, from the
    package docstring's numbered list."""
    layers: dict[str, int] = {}
    for line in (hpdparse.__doc__ or "").splitlines():
        match = re.match(r"\s*(\d+)\.\s+(\w+(?:,\s*\w+)*)\s", line)
        if match:
            for name in match.group(2).split(","):
                layers[name.strip()] = int(match.group(1))
    return layers


def imports_of(module: str) -> Iterator[tuple[int, str]]:
    """(line, imported hpdparse module) for every import in `module`, wherever it is."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1])
                base = f"{base}.{node.module}" if node.module else base
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base
                for alias in node.names
            ]
        else:
            continue
        for target in targets:
            if target == "hpdparse" or target.startswith("hpdparse."):
                yield node.lineno, resolve(target)


def resolve(target: str) -> str:
    """The module an import loads: `hpdparse.x.y.Name` is module `hpdparse.x.y`."""
    while target not in MODULES and "." in target:
        target = target.rpartition(".")[0]
    return target


def top(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def test_every_module_has_a_layer() -> None:
    layers = layer_order()
    assert len(set(layers.values())) >= 8, layers  # the docstring's list was read
    missing = {top(m) for m in MODULES if m != "hpdparse"} - set(layers)
    assert not missing, f"not in the layer list of hpdparse/__init__.py: {sorted(missing)}"


def test_no_module_imports_from_a_layer_above_its_own() -> None:
    layers = layer_order()
    upward = [
        f"{module}:{line} imports {target} (layer {layers[top(target)]} > {layers[top(module)]})"
        for module in MODULES
        if module != "hpdparse"
        for line, target in imports_of(module)
        if target != "hpdparse" and layers[top(target)] > layers[top(module)]
    ]
    assert not upward, "\n".join(upward)


def strongly_connected(graph: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's algorithm: the components of `graph` with more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for succ in graph.get(node, ()):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycle() -> None:
    graph = {m: {t for _, t in imports_of(m) if t != m} for m in MODULES}
    cycles = list(strongly_connected(graph))
    assert not cycles, "modules that import each other: " + "; ".join(
        " <-> ".join(sorted(c)) for c in cycles
    )


def test_no_module_over_400_lines() -> None:
    long = {
        m: n
        for m, p in MODULES.items()
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert not long, long


def code_lines(node: ast.FunctionDef | ast.AsyncFunctionDef, lines: list[str]) -> int:
    """Lines of code of a function, counted as the module docstring says."""
    body = node.body
    skip: set[int] = set()
    first = body[0]
    if isinstance(first, ast.Expr) and isinstance(getattr(first.value, "value", None), str):
        skip = set(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    assert node.end_lineno is not None
    count = 0
    for number in range(first.lineno, node.end_lineno + 1):
        text = lines[number - 1].strip()
        if number not in skip and text and not text.startswith("#"):
            count += 1
    return count


def function_sizes() -> dict[str, int]:
    sizes: dict[str, int] = {}
    for module, path in MODULES.items():
        lines = path.read_text(encoding="utf-8").splitlines()

        def walk(node: ast.AST, prefix: str) -> None:
            for child in ast.iter_child_nodes(node):
                name = prefix
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    name = f"{prefix}.{child.name}"
                    sizes[name] = code_lines(child, lines)  # noqa: B023
                elif isinstance(child, ast.ClassDef):
                    name = f"{prefix}.{child.name}"
                walk(child, name)

        walk(ast.parse("\n".join(lines)), module)
    return sizes


def test_counting_of_function_lines() -> None:
    source = (
        "def f(\n    a,\n):\n"
        '    """Doc\n\n    string."""\n'
        "    # a comment\n\n    x = [\n        1,\n    ]\n    return x  # trailing\n"
    )
    node = ast.parse(source).body[0]
    assert isinstance(node, ast.FunctionDef)
    assert code_lines(node, source.splitlines()) == 4


def test_no_function_over_60_lines_of_code() -> None:
    long = {f: n for f, n in function_sizes().items() if n > MAX_FUNCTION_LINES}
    assert not long, long

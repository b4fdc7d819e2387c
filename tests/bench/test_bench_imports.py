"""The `bench` package's imports run one way: no cycle, and only into `bench.common`.

The layout (docs/decisions/0059-benchmark-modules.md): each benchmark, and each program a
benchmark starts as a child process, is a module of `bench` run with `python -m bench.<name>`;
what they are built from is in `bench.common`. Every import statement counts, wherever it is: at
module level, inside a function, or under `if TYPE_CHECKING:` (a cycle there is still two
modules that each need the other).
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


def module_names(package: Path) -> dict[str, Path]:
    """Every module of the package in directory `package`, by dotted name (a package by its own name)."""
    names = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names[".".join(parts)] = path
    return names


def imported(name: str, path: Path, known: Mapping[str, Path]) -> set[str]:
    """The modules among `known` that the module `name` (at `path`) imports.

    `from p import x` counts as importing `p.x` when that is a module, else `p`; relative
    imports are resolved against `name`.
    """
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = name.split(".")
                anchor = anchor[: len(anchor) - node.level + (1 if is_package else 0)]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            else:
                base = node.module or ""
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        for target in targets:
            # `import a.b.c` imports a.b.c; stop at the longest prefix that is one of ours.
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def import_graph(package: Path) -> dict[str, set[str]]:
    """Module -> the modules of the same package it imports."""
    known = module_names(package)
    return {name: imported(name, path, known) for name, path in known.items()}


def find_cycle(graph: Mapping[str, set[str]]) -> list[str]:
    """One import cycle as `[a, b, ..., a]`, or `[]` when there is none (depth-first search)."""
    done: set[str] = set()
    path: list[str] = []

    def visit(node: str) -> list[str]:
        if node in path:
            return [*path[path.index(node) :], node]
        if node in done:
            return []
        path.append(node)
        for target in sorted(graph.get(node, ())):
            cycle = visit(target)
            if cycle:
                return cycle
        path.pop()
        done.add(node)
        return []

    for node in sorted(graph):
        cycle = visit(node)
        if cycle:
            return cycle
    return []


def test_the_bench_package_has_no_import_cycle():
    """Every module of `bench` can be read and changed from the bottom up."""
    graph = import_graph(BENCH)
    assert "bench.turns" in graph and "bench.common.harness" in graph, sorted(graph)
    cycle = find_cycle(graph)
    assert not cycle, "import cycle in bench: " + " -> ".join(cycle)


def test_every_import_points_into_bench_common():
    """No module imports a benchmark or a child program (nor `bench` itself): only what `bench.common` holds."""
    stray = [
        f"{name} imports {target}"
        for name, targets in import_graph(BENCH).items()
        for target in targets
        if not target.startswith("bench.common.")
    ]
    assert not stray, stray


def test_the_check_sees_lazy_type_checking_and_from_package_imports(tmp_path):
    """A cycle made of the three kinds of import the benchmarks use is found; without one of them, none is."""
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "a.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.sub import b\n",
    )
    (package / "sub" / "b.py").write_text("from . import c\n")
    (package / "sub" / "c.py").write_text("def later():\n    import pkg.a.thing\n")
    assert find_cycle(import_graph(package)) == ["pkg.a", "pkg.sub.b", "pkg.sub.c", "pkg.a"]
    (package / "sub" / "c.py").write_text("def later():\n    import json\n")
    assert find_cycle(import_graph(package)) == []

"""Fail when the core (`bot/`) imports a platform SDK, or imports within `bot/` or `adapters/` do not run one way.

ruff's banned-api rule (TID251) catches `import` statements; this also imports every core
module in a fresh interpreter and checks that no platform SDK was loaded on the way, which
catches indirect and dynamic imports too (DESIGN.md "Architecture: ports and adapters").
Within `adapters/`, imports run one way: a platform's modules import the shared words
(`adapters.words`), never the other way round, and no modules import each other in a cycle
(docs/decisions/0060-words-in-one-place.md). Within `bot/`, `bot.base` (the bottom floor) imports
no other `bot` module and no modules import each other in a cycle
(docs/decisions/0061-one-package-per-feature.md).
"""

from __future__ import annotations

import ast
import graphlib
import pkgutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

BANNED = ("discord", "slack_bolt", "slack_sdk")
ROOT = Path(__file__).resolve().parents[1]
PLATFORMS = (["adapters", "slack"], ["adapters", "discord"], ["adapters", "console"])


def static_violations(root: Path = ROOT) -> list[str]:
    """`file:line module` for each import statement of a banned package under `root/bot`."""
    found = []
    for path in sorted((root / "bot").rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            for name in names:
                if name.split(".")[0] in BANNED:
                    found.append(f"{path.relative_to(root)}:{node.lineno} imports {name}")
    return found


def runtime_violations(root: Path = ROOT) -> list[str]:
    """Banned packages present in `sys.modules` after importing every `bot` module."""
    modules = ["bot"] + [m.name for m in pkgutil.walk_packages([str(root / "bot")], prefix="bot.")]
    probe = (
        "import importlib, sys\n"
        f"for name in {modules!r}: importlib.import_module(name)\n"
        f"print(' '.join(sorted({{m.split('.')[0] for m in sys.modules}} & set({BANNED!r}))))\n"
    )
    result = subprocess.run(  # noqa: S603 - our own interpreter and code
        [sys.executable, "-c", probe], cwd=root, capture_output=True, text=True, check=True
    )
    loaded = result.stdout.split()
    return [f"importing bot/ loads {name}" for name in loaded]


def _imported(node: ast.AST, package: str, modules: Mapping[str, Path]) -> list[str]:
    """The modules of `modules` that the import statement `node`, in a module of `package`, imports."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            parts = package.split(".")
            base = ".".join([*parts[: len(parts) - node.level + 1], *([base] if base else [])])
        names = [f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in modules]
        if len(names) < len(node.names):  # some names are attributes of `base`, not its submodules
            names.append(base)
    else:
        return []
    return [name for name in names if name in modules]


def package_imports(root: Path = ROOT, package: str = "adapters") -> dict[str, set[str]]:
    """Each module under `root/<package>` (dotted name) and the modules under it that it imports.

    Every import statement counts, also one under `if TYPE_CHECKING:` or inside a function: a
    cycle that only a deferred import keeps from failing is still a cycle. A module's import of
    its own package (`from adapters.console import messages` in `adapters.console.chat`) counts
    as an import of the module it names, not of the package's `__init__`.
    """
    modules: dict[str, Path] = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    imports: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        home = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            for target in _imported(node, home, modules):
                if target != name and not name.startswith(f"{target}."):
                    imports[name].add(target)
    return imports


def import_cycles(root: Path = ROOT, package: str = "adapters") -> list[str]:
    """An import cycle among the modules under `root/<package>`, as `a imports b imports a`; empty when none."""
    try:
        graphlib.TopologicalSorter(package_imports(root, package)).prepare()
    except graphlib.CycleError as exc:
        cycle = list(reversed(exc.args[1]))
        return [f"import cycle in {package}/: {' imports '.join(cycle)}"]
    return []


def floor_imports(root: Path = ROOT) -> list[str]:
    """`a imports b` for each module `a` of `bot.base`, the core's bottom floor, that imports `b` above it."""
    return [
        f"{name} imports {target}"
        for name, targets in sorted(package_imports(root, "bot").items())
        if name.split(".")[:2] == ["bot", "base"]
        for target in sorted(targets)
        if target.split(".")[:2] != ["bot", "base"] and target != "bot"
    ]


def shared_words_imports(root: Path = ROOT) -> list[str]:
    """`a imports b` for each `adapters.words` module `a` that imports `b` of a platform's package.

    The platforms import the shared words, so the words never import a platform.
    """
    return [
        f"{name} imports {target}"
        for name, targets in sorted(package_imports(root).items())
        if name.startswith("adapters.words")
        for target in sorted(targets)
        if target.split(".")[:2] in PLATFORMS
    ]


def main() -> int:
    """Print violations; exit 1 when there are any."""
    problems = [
        *static_violations(),
        *runtime_violations(),
        *import_cycles(package="bot"),
        *floor_imports(),
        *import_cycles(package="adapters"),
        *shared_words_imports(),
    ]
    for problem in problems:
        print(f"core import check: {problem}", file=sys.stderr)
    if not problems:
        print("core import check: bot/ imports no platform SDK; bot.base no feature; bot/, adapters/ no cycle")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())

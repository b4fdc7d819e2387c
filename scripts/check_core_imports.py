"""Fail when the core (`bot/`) imports a platform SDK, statically or at run time.

ruff's banned-api rule (TID251) catches `import` statements; this also imports every core
module in a fresh interpreter and checks that no platform SDK was loaded on the way, which
catches indirect and dynamic imports too (DESIGN.md "Architecture: ports and adapters").
"""

from __future__ import annotations

import ast
import pkgutil
import subprocess
import sys
from pathlib import Path

BANNED = ("discord", "slack_bolt", "slack_sdk")
ROOT = Path(__file__).resolve().parents[1]


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


def main() -> int:
    """Print violations; exit 1 when there are any."""
    problems = static_violations() + runtime_violations()
    for problem in problems:
        print(f"core import check: {problem}", file=sys.stderr)
    if not problems:
        print("core import check: bot/ imports no platform SDK")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())

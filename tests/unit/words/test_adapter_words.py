"""A sentence Slack and Discord say alike is written once, in `adapters.words`.

docs/decisions/0060-words-in-one-place.md: a platform's modules keep only the sentences whose
words or markup are their own. This check reads every module-level assignment under
`adapters/slack` and `adapters/discord` and fails on a string (a constant, or one inside a dict,
tuple or call) longer than `MIN_CHARS` that both platforms define.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
MIN_CHARS = 20
"""Shorter strings (button labels like "Approve", ids like "reason") may repeat."""


def _strings(path: Path) -> Iterator[tuple[str, int, str]]:
    """(name, line, text) for each string in the module-level assignments of `path`."""
    for node in ast.parse(path.read_text(), filename=str(path)).body:
        if isinstance(node, ast.Assign):
            names = [target.id for target in node.targets if isinstance(target, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            names = [node.target.id]
        else:
            continue
        assert node.value is not None
        for part in ast.walk(node.value):
            if isinstance(part, ast.Constant) and isinstance(part.value, str) and len(part.value) > MIN_CHARS:
                for name in names:
                    yield name, part.lineno, part.value


def sentences_written_twice(root: Path = ROOT) -> list[str]:
    """`slack/x.py:N NAME = discord/y.py:M NAME` for each string both platforms' modules define."""
    found: dict[str, dict[str, str]] = {}
    for platform in ("slack", "discord"):
        for path in sorted((root / "adapters" / platform).rglob("*.py")):
            for name, line, text in _strings(path):
                found.setdefault(text, {}).setdefault(platform, f"{path.relative_to(root)}:{line} {name}")
    return [f"{where['slack']} = {where['discord']}" for where in found.values() if len(where) == 2]


def test_no_sentence_is_written_for_both_slack_and_discord():
    """Each shared sentence lives in adapters/words/, not once per platform."""
    assert sentences_written_twice() == []


def test_the_check_catches_a_sentence_written_twice(tmp_path: Path):
    """The same text in a Slack and a Discord module is reported, also inside a dict; a short label is not."""
    for platform in ("slack", "discord"):
        (tmp_path / "adapters" / platform).mkdir(parents=True)
    (tmp_path / "adapters" / "slack" / "messages.py").write_text(
        'BUTTON = "Approve"\nGONE = "I can\'t find this approval any more."\n'
    )
    (tmp_path / "adapters" / "discord" / "messages.py").write_text(
        'BUTTON = "Approve"\nWHY = {"gone": "I can\'t find this approval any more."}\n'
    )
    assert sentences_written_twice(tmp_path) == [
        "adapters/slack/messages.py:2 GONE = adapters/discord/messages.py:2 WHY"
    ]

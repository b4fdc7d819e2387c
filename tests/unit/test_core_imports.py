"""The core stays free of platform SDKs, and the check that guards it can fail."""

from __future__ import annotations

from pathlib import Path

import pytest

from scripts.check_core_imports import (
    floor_imports,
    import_cycles,
    runtime_violations,
    shared_words_imports,
    static_violations,
)


@pytest.mark.timeout(600)  # imports every core module in a fresh interpreter: slow on a busy machine
def test_the_core_imports_no_platform_sdk():
    """bot/ has no import statement of discord, slack_bolt or slack_sdk, and loads none of them."""
    assert static_violations() == []
    assert runtime_violations() == []


@pytest.mark.timeout(600)  # a fresh interpreter, as above
def test_the_check_catches_a_direct_and_a_dynamic_import(tmp_path: Path):
    """A planted `from slack_sdk import ...` and an importlib load of discord are both reported."""
    core = tmp_path / "bot"
    core.mkdir()
    (core / "__init__.py").write_text("")
    (core / "leaky.py").write_text("from slack_sdk.web import WebClient\n")
    (core / "sneaky.py").write_text("import importlib\nimportlib.import_module('discord')\n")
    assert static_violations(tmp_path) == ["bot/leaky.py:1 imports slack_sdk.web"]
    assert set(runtime_violations(tmp_path)) == {
        "importing bot/ loads discord",
        "importing bot/ loads slack_sdk",
    }


def test_adapters_have_no_import_cycle():
    """Imports within adapters/ run one way, also those under TYPE_CHECKING or inside a function."""
    assert import_cycles() == []
    assert shared_words_imports() == []


def test_the_check_catches_an_import_cycle_only_type_checking_hides(tmp_path: Path):
    """A planted cycle through a TYPE_CHECKING import is reported in import order; a package's
    `__init__` importing its own modules is no cycle."""
    package = tmp_path / "adapters" / "chat"
    package.mkdir(parents=True)
    (tmp_path / "adapters" / "__init__.py").write_text("")
    (package / "__init__.py").write_text("from adapters.chat.cards import Card\n")
    (package / "cards.py").write_text("from adapters.chat import buttons\n\nclass Card: ...\n")
    (package / "buttons.py").write_text("from . import handler\n")
    (package / "handler.py").write_text("from typing import TYPE_CHECKING\n")
    assert import_cycles(tmp_path) == []
    (package / "handler.py").write_text(
        "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from adapters.chat.cards import Card\n"
    )
    [cycle] = import_cycles(tmp_path)
    names = cycle.removeprefix("import cycle in adapters/: ").split(" imports ")
    assert names[0] == names[-1]
    start = names.index("adapters.chat.cards")
    loop = names[start:-1] + names[:start]  # the cycle may be reported from any of its modules
    assert loop == ["adapters.chat.cards", "adapters.chat.buttons", "adapters.chat.handler"]


def test_the_check_catches_shared_words_that_import_a_platform(tmp_path: Path):
    """A module of adapters/words importing a platform's module is reported, even without a cycle."""
    (tmp_path / "adapters" / "words").mkdir(parents=True)
    (tmp_path / "adapters" / "slack").mkdir()
    for init in ("adapters", "adapters/words", "adapters/slack"):
        (tmp_path / init / "__init__.py").write_text("")
    (tmp_path / "adapters" / "slack" / "text.py").write_text("")
    (tmp_path / "adapters" / "words" / "cards.py").write_text("def f():\n    from adapters.slack.text import x\n")
    assert import_cycles(tmp_path) == []
    assert shared_words_imports(tmp_path) == ["adapters.words.cards imports adapters.slack.text"]


def test_the_core_keeps_its_layouts_import_rules():
    """`bot.base` imports no feature, and no `bot` modules import each other in a cycle."""
    assert floor_imports() == []
    assert import_cycles(package="bot") == []


def test_the_layout_checks_catch_an_import_up_from_the_bottom_floor_and_a_cycle(tmp_path: Path):
    """`bot.base` importing a feature is reported, and so is a cycle kept from failing only by a deferred import."""
    core = tmp_path / "bot"
    (core / "base").mkdir(parents=True)
    (core / "reviews").mkdir()
    for package in (core, core / "base", core / "reviews"):
        (package / "__init__.py").write_text("")
    (core / "base" / "values.py").write_text("from bot.base import other\nfrom bot.reviews.cards import Card\n")
    (core / "base" / "other.py").write_text("")
    (core / "reviews" / "cards.py").write_text("def later():\n    from bot.reviews.decide import Decider\n")
    (core / "reviews" / "decide.py").write_text("from bot.reviews import cards\n")
    assert floor_imports(tmp_path) == ["bot.base.values imports bot.reviews.cards"]
    [cycle] = import_cycles(tmp_path, "bot")
    assert "bot.reviews.cards" in cycle and "bot.reviews.decide" in cycle

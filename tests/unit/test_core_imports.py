"""The core stays free of platform SDKs, and the check that guards it can fail."""

from __future__ import annotations

from pathlib import Path

from scripts.check_core_imports import runtime_violations, static_violations


def test_the_core_imports_no_platform_sdk():
    """bot/ has no import statement of discord, slack_bolt or slack_sdk, and loads none of them."""
    assert static_violations() == []
    assert runtime_violations() == []


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

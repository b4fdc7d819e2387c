"""A server-wide condition on a tool without the argument it reads: review, and one warning per rule and tool."""

from __future__ import annotations

import logging

import pytest
from langchain_core.tools import StructuredTool

from bot.base.mode import Mode
from bot.policy.config import ToolRule
from bot.policy.review import effective_mode
from bot.tools.registry import ToolSpec


def mcp_like(name: str, *arguments: str) -> ToolSpec:
    """A reviewed tool named like an MCP server's, taking `arguments` (text each)."""

    def run(**kwargs: str) -> str:
        return "ok"

    schema = {"type": "object", "properties": {a: {"type": "string"} for a in arguments}}
    return ToolSpec(
        tool=StructuredTool.from_function(func=run, name=name, description="A tool.", args_schema=schema),
        default_mode=Mode.REVIEW,
    )


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "bot.policy.review" and r.levelno >= logging.WARNING]


def test_a_missing_argument_needs_review_and_is_warned_once_per_rule_and_tool(caplog: pytest.LogCaptureFixture) -> None:
    """Three calls of a tool without `repo` under `gh__* review when args.repo == ...`: review each, one warning naming both."""
    rule = ToolRule(tool_name="gh__*", mode=Mode.REVIEW, condition="args.repo == 'prod-once'")
    listing, other = mcp_like("gh__list_orgs", "org"), mcp_like("gh__whoami")
    with caplog.at_level(logging.DEBUG, logger="bot.policy.review"):
        modes = [effective_mode(listing, rule, {"org": "acme"}, where=f"t{n}") for n in range(3)]
        assert modes == [Mode.REVIEW] * 3
        [said] = warnings_of(caplog)
        assert "gh__list_orgs" in said and "gh__*" in said and "'repo'" in said and "review" in said
        effective_mode(other, rule, {}, where="t4")  # another tool under the same rule: its own warning
        effective_mode(listing, rule, {"org": "acme"}, where="t5")
    assert len(warnings_of(caplog)) == 2
    with_repo = mcp_like("gh__delete_repo", "repo")
    assert effective_mode(with_repo, rule, {"repo": "prod-once"}) is Mode.REVIEW
    assert effective_mode(with_repo, rule, {"repo": "sandbox"}) is Mode.AUTO

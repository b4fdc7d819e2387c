"""`/countersign` text as Slack sends it, parsed into commands: the `agent` subcommand (issue 8)."""

from __future__ import annotations

import pytest

from adapters.admin_text import error_text
from adapters.slack.commands import SLACK_MARKUP
from bot.admin.commands import SetAgent
from bot.admin.parse import USAGE, CommandError, parse_command
from bot.agents.kind import AgentKind

AGENT_USAGE = "agent react|subagents [in #channel]"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("agent subagents", SetAgent(agent=AgentKind.SUBAGENTS)),
        ("agent react", SetAgent(agent=AgentKind.REACT)),
        ("agent react in <#C123>", SetAgent(agent=AgentKind.REACT, channel_id="C123")),
        ("agent subagents in <#C123|ops>", SetAgent(agent=AgentKind.SUBAGENTS, channel_id="C123")),
        ("  Agent SUBAGENTS IN <#C123>  ", SetAgent(agent=AgentKind.SUBAGENTS, channel_id="C123")),
    ],
)
def test_agent_parses_the_kind_and_an_optional_channel(text, expected):
    """`agent react|subagents [in #channel]` gives SetAgent; without `in` it is workspace-wide (no channel)."""
    assert parse_command(text) == expected


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("agent", "missing react or subagents"),
        ("agent maybe", "expected react or subagents, got `maybe`"),
        ("agent react in nowhere", "`nowhere` is not a channel; name it as #channel"),
        ("agent react in", "`in` needs a value"),
        ("agent react in <#C1> now", "unexpected `now`"),
        ("agent subagents when args.x", "`when` only goes with `policy`"),
    ],
)
def test_agent_refusals_name_the_problem_and_show_the_usage(text, problem):
    """A malformed `agent` command is refused with the reason and the subcommand's usage line."""
    with pytest.raises(CommandError) as info:
        parse_command(text)
    assert (info.value.message, info.value.usage) == (problem, AGENT_USAGE)
    assert USAGE["agent"] == AGENT_USAGE
    assert error_text(info.value, SLACK_MARKUP) == (
        f"That did not work: {problem}. Nothing was changed.\nUsage: `/countersign {AGENT_USAGE}`"
    )

"""`/countersign` text as Slack sends it, parsed into commands: the `agent` subcommand (issue 8)."""

from __future__ import annotations

import pytest

from adapters.admin_text import error_text
from adapters.slack.commands import SLACK_MARKUP
from bot.admin.commands import SetAgent
from bot.admin.parse import USAGE, CommandError, parse_command
from bot.agents.kind import AgentKind

AGENT_USAGE = "agent react|subagents|default [in #channel]"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("agent subagents", SetAgent(agent=AgentKind.SUBAGENTS)),
        ("agent react", SetAgent(agent=AgentKind.REACT)),
        ("agent react in <#C123>", SetAgent(agent=AgentKind.REACT, channel_id="C123")),
        ("agent subagents in <#C123|ops>", SetAgent(agent=AgentKind.SUBAGENTS, channel_id="C123")),
        ("  Agent SUBAGENTS IN <#C123>  ", SetAgent(agent=AgentKind.SUBAGENTS, channel_id="C123")),
        ("agent default", SetAgent(agent=None)),
        ("agent default in <#C123>", SetAgent(agent=None, channel_id="C123")),
    ],
)
def test_agent_parses_the_kind_and_an_optional_channel(text, expected):
    """`agent react|subagents|default [in #channel]` gives SetAgent (None: default); no `in` is workspace-wide."""
    assert parse_command(text) == expected


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("agent", "missing react, subagents or default"),
        ("agent maybe", "expected react, subagents or default, got `maybe`"),
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


def test_audit_lines_name_the_channel_the_subagent_and_the_refused_command():
    """`audit` shows where a setting was changed, which subagent asked for a call, and which command was refused."""
    from datetime import UTC, datetime

    from adapters.admin_text import render
    from bot.admin.views import AuditPage
    from bot.audit import AuditEntry, AuditKind

    at = datetime(2026, 12, 1, tzinfo=UTC)
    entries = (
        AuditEntry(
            kind=AuditKind.CONFIG,
            workspace_id="T1",
            outcome="agent",
            actor_id="UADMIN",
            detail={"channel_id": "C9", "before": None, "after": "subagents"},
            at=at,
        ),
        AuditEntry(
            kind=AuditKind.DECISION,
            workspace_id="T1",
            outcome="approved",
            actor_id="UALICE",
            tool_name="http_request",
            proposed_args={"method": "POST"},
            detail={"source": "operator"},
            at=at,
        ),
        AuditEntry(
            kind=AuditKind.REFUSED,
            workspace_id="T1",
            outcome="not_an_admin",
            actor_id="UBOB",
            detail={"command": "agent"},
            at=at,
        ),
    )
    text = render(AuditPage(entries=entries, tool=None, user_id=None), SLACK_MARKUP)
    config, decision, refused = text.splitlines()[1:]
    assert "agent" in config and "in <#C9>" in config
    assert "`operator` → `http_request`" in decision
    assert "not_an_admin" in refused and "`/countersign agent`" in refused

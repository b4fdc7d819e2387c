"""`/countersign` text as Slack sends it, parsed into commands: the `agent` subcommand (docs/decisions/0008)."""

from __future__ import annotations

import pytest

from adapters.slack.markup import SLACK_MARKUP
from adapters.words.admin import error_text
from bot.admin.commands import AcceptMcp, ResetContext, SetAgent, ShowContext, ShowMcp
from bot.admin.parse import USAGE, CommandError, parse_command
from bot.base.agent_kind import AgentKind

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

    from adapters.words.admin import render
    from bot.admin.views import AuditPage
    from bot.audit.entries import AuditEntry, AuditKind

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


# --- context ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("context", ShowContext()),
        ("  Context  ", ShowContext()),
        ("context reset", ResetContext()),
        ("CONTEXT RESET", ResetContext()),
    ],
)
def test_context_parses_with_an_optional_reset(text, expected):
    """`context [reset]` gives ShowContext, or ResetContext with `reset`."""
    assert parse_command(text) == expected


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("context clear", "expected reset or nothing, got `clear`"),
        ("context reset now", "unexpected `now`"),
        ("context in <#C1>", "expected reset or nothing, got `in`"),
        ("context reset when args.x", "`when` only goes with `policy`"),
    ],
)
def test_context_refusals_show_the_usage_as_each_platform_types_it(text, problem):
    """A malformed `context` is refused with the reason; Slack's usage line names the optional thread link."""
    with pytest.raises(CommandError) as info:
        parse_command(text)
    assert (info.value.message, info.value.usage) == (problem, USAGE["context"]) == (problem, "context [reset]")
    assert error_text(info.value, SLACK_MARKUP).endswith("Usage: `/countersign context [reset] [<link to the thread>]`")


def _view(**fields):
    from bot.admin.views import ContextView

    base = {"thread_id": "slack:T1:C1:1.2", "exists": True, "agent": AgentKind.REACT, "budget_tokens": 24_000}
    return ContextView(**(base | fields))


def test_context_reply_shows_the_agent_the_window_and_the_summary_escaped_and_cut():
    """The reply names the agent, messages, tokens against the budget, and quotes the summary, escaped
    for Slack and cut to what one message holds."""
    from adapters.discord.markup import DISCORD_MARKUP, MESSAGE_CHARS
    from adapters.words.admin import SUMMARY_CHARS, render

    summary = "alice asked <@U1> & bob\n" + "x" * 5000
    text = render(_view(summary=summary, messages=12, tokens=30_000), SLACK_MARKUP)
    assert "Agent: `react` · 12 messages kept verbatim · about 30,000 of 24,000 tokens per model call (125 %)" in text
    assert "Over the window: the next message folds the oldest turns" in text
    assert "> alice asked &lt;@U1&gt; &amp; bob" in text
    assert f"({len(summary):,} characters, the first {SUMMARY_CHARS:,} shown)" in text
    assert len(render(_view(summary=summary), DISCORD_MARKUP)) <= MESSAGE_CHARS


@pytest.mark.parametrize(
    ("view", "expected"),
    [
        (_view(exists=False, agent=None), "No state yet: the bot has not answered in this conversation"),
        (_view(messages=0), "The model's view is empty (new, or reset)"),
        (_view(messages=1, tokens=10), "No summary: no turn has been folded out of the history."),
    ],
)
def test_context_reply_without_state_or_summary_says_so(view, expected):
    """No state, an empty view and a view without a summary each say so plainly."""
    from adapters.words.admin import render

    assert expected in render(view, SLACK_MARKUP)


def test_reset_reply_says_what_was_removed_and_what_is_kept():
    """A reset names the messages and summary removed; one with nothing to clear says so."""
    from adapters.words.admin import render
    from bot.admin.views import ContextReset

    done = render(ContextReset(before=_view(messages=7, summary="abc")), SLACK_MARKUP)
    assert "7 messages and the summary (3 characters) removed from its view" in done
    assert "approvals and tool runs are kept" in done
    nothing = render(ContextReset(before=_view(exists=False), changed=False), SLACK_MARKUP)
    assert nothing == "Nothing to reset: this conversation has no state yet."


@pytest.mark.parametrize("text", ["policy http_request review when args.url == '\x00'", "quorum\x00 2", "\x00"])
def test_a_nul_character_is_refused_before_anything_is_parsed(text):
    """PostgreSQL text cannot hold U+0000: the command is refused in words, not failed at the database."""
    with pytest.raises(CommandError, match="NUL character"):
        parse_command(text)


def test_stop_parses_alone_and_refuses_anything_after_it():
    """`stop` is StopTurn (the conversation comes from where it is typed); words after it are refused."""
    from bot.admin.commands import StopTurn

    assert parse_command("stop") == StopTurn() == parse_command("  STOP ")
    with pytest.raises(CommandError) as info:
        parse_command("stop now")
    assert (info.value.message, info.value.usage) == ("unexpected `now`", "stop")
    assert error_text(info.value, SLACK_MARKUP).endswith("Usage: `/countersign stop [<link to the thread>]`")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("mcp", ShowMcp()),
        ("MCP", ShowMcp()),
        ("mcp status", ShowMcp()),
        ("mcp accept github", AcceptMcp(server="github")),
    ],
)
def test_mcp_lists_or_accepts_one_server(text, expected):
    """`mcp` alone, or `mcp status` as on Discord, lists the servers; `mcp accept <server>` names the one to accept."""
    assert parse_command(text) == expected


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("mcp accept", "missing the server's name (`mcp` lists them)"),
        ("mcp list", "expected accept, status or nothing, got `list`"),
        ("mcp status notes", "unexpected `notes`"),
        ("mcp accept github notes", "unexpected `notes`"),
    ],
)
def test_mcp_refusals_name_the_problem_and_show_the_usage(text, problem):
    """A malformed `mcp` command is refused in words with its usage line; nothing is run."""
    with pytest.raises(CommandError) as refused:
        parse_command(text)
    assert refused.value.message == problem and refused.value.usage == USAGE["mcp"]

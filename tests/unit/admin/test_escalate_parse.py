"""`/countersign escalate` as Slack sends it (and Discord's options through the same helper)."""

from __future__ import annotations

import pytest

from adapters.discord.markup import DISCORD_MARKUP
from adapters.slack.markup import SLACK_MARKUP
from adapters.words.admin import error_text, render
from bot.admin.commands import SetEscalation
from bot.admin.parse import USAGE, CommandError, escalation, parse_command
from bot.admin.views import Changed
from bot.reviews.escalation.rules import EscalationRule, EscalationTarget, TargetKind

ESCALATE_USAGE = "escalate <tool> after <duration like 30m> to <@user|@group|@role|#channel>, or escalate <tool> off"


def _to(kind: TargetKind, subject: str) -> EscalationTarget:
    return EscalationTarget(kind=kind, subject_id=subject)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "escalate send_email after 30m to <@U123|dave>",
            SetEscalation(tool="send_email", after_s=1800, target=_to(TargetKind.USER, "U123")),
        ),
        (
            "escalate http_request after 1h30m to <!subteam^S42|@ops>",
            SetEscalation(tool="http_request", after_s=5400, target=_to(TargetKind.GROUP, "S42")),
        ),
        (
            "escalate http_request after 2d to <#C9|oncall>",
            SetEscalation(tool="http_request", after_s=172800, target=_to(TargetKind.CHANNEL, "C9")),
        ),
        (
            "escalate http_request after 90s to <@&1234>",
            SetEscalation(tool="http_request", after_s=90, target=_to(TargetKind.ROLE, "1234")),
        ),
        (
            "  ESCALATE http_request AFTER 4H TO <#C9>  ",
            SetEscalation(tool="http_request", after_s=14400, target=_to(TargetKind.CHANNEL, "C9")),
        ),
        ("escalate http_request off", SetEscalation(tool="http_request", after_s=None)),
        ("escalate http_request OFF", SetEscalation(tool="http_request", after_s=None)),
    ],
)
def test_escalate_parses_tool_delay_and_target(text, expected):
    """`escalate <tool> after <duration> to <target>` gives the delay in seconds and a typed target; `off` removes."""
    assert parse_command(text) == expected


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("escalate", "missing a tool name"),
        ("escalate http_request", "missing `after <duration>` or `off`"),
        ("escalate http_request soon", "expected `after <duration>` or `off`, got `soon`"),
        ("escalate http_request after", "missing a duration like 30m"),
        ("escalate http_request after 30m", "say where the card goes: `to` @someone, @group, @role or #channel"),
        ("escalate http_request after 30m <@U1>", "expected `to <@user|@group|@role|#channel>`, got `<@U1>`"),
        ("escalate http_request after 30m to", "missing who or where (@user, @group, @role or #channel)"),
        (
            "escalate http_request after 30m to dave",
            "`dave` is not a person, group, role or channel; name it as @someone or #channel",
        ),
        ("escalate http_request after 5s to <@U1>", "an escalation delay must be between 10s and 30d"),
        ("escalate http_request after 31d to <@U1>", "an escalation delay must be between 10s and 30d"),
        ("escalate http_request after soon to <@U1>", "`soon` is not a duration; use e.g. 90s, 30m, 4h or 2d"),
        ("escalate http_request after 30m to <@U1> <@U2>", "unexpected `<@U2>`"),
        ("escalate http_request off to <@U1>", "unexpected `to <@U1>`"),
        ("escalate http_request after 30m to <@U1> when args.x", "`when` only goes with `policy`"),
    ],
)
def test_escalate_refusals_name_the_problem_and_show_the_usage(text, problem):
    """A malformed `escalate` command is refused with the reason and the subcommand's usage line."""
    with pytest.raises(CommandError) as info:
        parse_command(text)
    assert (info.value.message, info.value.usage) == (problem, ESCALATE_USAGE)
    assert USAGE["escalate"] == ESCALATE_USAGE
    assert error_text(info.value, SLACK_MARKUP) == (
        f"That did not work: {problem}. Nothing was changed.\nUsage: `/countersign {ESCALATE_USAGE}`"
    )


def test_discord_options_meet_the_same_checks():
    """Discord's typed options go through the same helper: `off` takes no target, a delay needs one."""
    role = _to(TargetKind.ROLE, "55")
    assert escalation("http_request", "30m", role) == SetEscalation(tool="http_request", after_s=1800, target=role)
    assert escalation("http_request", "off", None) == SetEscalation(tool="http_request", after_s=None)
    for after, target, problem in (
        ("off", role, "`escalate <tool> off` takes no target"),
        ("30m", None, "say where the card goes: `to` @someone, @group, @role or #channel"),
        ("1s", role, "an escalation delay must be between 10s and 30d"),
    ):
        with pytest.raises(CommandError) as info:
            escalation("http_request", after, target)
        assert info.value.message == problem
    discord_usage = "escalate tool:<tool> after:<duration like 30m, or off> [user] [role] [channel]"
    assert DISCORD_MARKUP.usage["escalate"] == discord_usage


def test_the_reply_names_the_target_as_each_platform_writes_it():
    """`Updated escalation for `tool`: after 30m to <target>`, with the platform's mention of the target."""
    rule = EscalationRule(tool_name="send_email", after_s=1800, target=_to(TargetKind.GROUP, "S42"))
    change = Changed(setting="escalation", tool="send_email", channel_id=None, before=None, after=rule)
    assert render(change, SLACK_MARKUP) == (
        "Updated escalation for `send_email`: after 30m to <!subteam^S42> (was: not set). Recorded in the audit log."
    )
    role = EscalationRule(tool_name="send_email", after_s=90, target=_to(TargetKind.ROLE, "55"))
    removed = Changed(setting="escalation", tool="send_email", channel_id=None, before=role, after=None)
    assert render(removed, DISCORD_MARKUP) == (
        "Updated escalation for `send_email`: not set (was: after 90s to <@&55>). Recorded in the audit log."
    )

"""`/countersign` as typed in the terminal: `@name` and `#name`, through the core's parser (`Mentions`)."""

from __future__ import annotations

import pytest

from adapters.console.people import CONSOLE_MARKUP, TERMINAL_MENTIONS, person_name
from adapters.words.admin import error_text, render
from bot.admin.commands import (
    ChangeAdmins,
    ChangeApprovers,
    SetCards,
    SetEscalation,
    SetPolicy,
    Show,
    ShowAudit,
)
from bot.admin.parse import CommandError, parse_command
from bot.admin.views import Changed
from bot.base.mode import Mode
from bot.policy.config import ApproverKind, ApproverRule, CardRouting
from bot.reviews.escalation.rules import EscalationTarget, TargetKind


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("approvers add @alice", ChangeApprovers(add=True, kind=ApproverKind.USER, subject_id="alice")),
        (
            "approvers remove @bob.smith for send",
            ChangeApprovers(add=False, kind=ApproverKind.USER, subject_id="bob.smith", tool="send"),
        ),
        ("admins add @bob", ChangeAdmins(add=True, user_id="bob")),
        (
            "escalate send after 10m to @carol",
            SetEscalation(tool="send", after_s=600, target=EscalationTarget(kind=TargetKind.USER, subject_id="carol")),
        ),
        (
            "escalate send after 1h to #oncall",
            SetEscalation(
                tool="send", after_s=3600, target=EscalationTarget(kind=TargetKind.CHANNEL, subject_id="oncall")
            ),
        ),
        ("show in #terminal", Show(channel_id="terminal")),
        ("cards channel #approvals", SetCards(routing=CardRouting.CHANNEL, channel_id="approvals")),
        ("audit send @bob limit 5", ShowAudit(tool="send", user_id="bob", limit=5)),
        (
            "policy send review in #terminal when args.to == '@x #y'",
            SetPolicy(tool="send", mode=Mode.REVIEW, channel_id="terminal", condition="args.to == '@x #y'"),
        ),
    ],
)
def test_the_terminal_names_people_and_channels_as_at_name_and_hash_name(text, expected):
    """`@name` is a person and `#name` a channel in the terminal; the condition is left as typed."""
    assert parse_command(text, mentions=TERMINAL_MENTIONS) == expected


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("admins add <@U123>", "`<@U123>` is not a person; name them as @someone"),
        ("show in <#C1>", "`<#C1>` is not a channel; name it as #channel"),
        ("escalate send after 10m to <!subteam^S1>", "`<!subteam^S1>` is not a person, group, role or channel"),
        ("approvers add @", "`@` is not a person; name them as @someone"),
        ("admins add @a:b", "`@a:b` is not a person; name them as @someone"),
    ],
)
def test_the_terminal_refuses_slack_and_discord_tokens_and_bad_names(text, problem):
    """Slack and Discord mention tokens mean nothing in the terminal, nor does a name with a colon."""
    with pytest.raises(CommandError) as info:
        parse_command(text, mentions=TERMINAL_MENTIONS)
    assert info.value.message.startswith(problem)


@pytest.mark.parametrize("text", ["admins add @bob", "show in #terminal", "escalate send after 10m to @carol"])
def test_slack_and_discord_do_not_take_terminal_names(text):
    """The default grammar (Slack's and Discord's) is unchanged: a typed `@bob` or `#terminal` is no mention there."""
    with pytest.raises(CommandError):
        parse_command(text)


def test_slack_and_discord_tokens_still_parse_by_default():
    """Without `mentions`, the parser takes Slack's and Discord's tokens as before."""
    assert parse_command("admins add <@U123|bob>") == ChangeAdmins(add=True, user_id="U123")
    assert parse_command("approvers add <@&42>") == ChangeApprovers(add=True, kind=ApproverKind.ROLE, subject_id="42")


def test_replies_name_people_and_channels_as_the_terminal_writes_them():
    """Ids come back as `@name` and `#name`; usage lines show the terminal's spelling."""
    change = Changed(
        setting="approvers",
        tool="send",
        channel_id=None,
        before=None,
        after=ApproverRule(kind=ApproverKind.USER, subject_id="alice", tool_name="send"),
        changed=True,
    )
    assert render(change, CONSOLE_MARKUP).startswith("Updated approvers for `send`: @alice (was: not set).")
    with pytest.raises(CommandError) as info:
        parse_command("approvers add", mentions=TERMINAL_MENTIONS)
    assert error_text(info.value, CONSOLE_MARKUP).endswith(
        "Usage: `/countersign approvers add|remove <@name> [for <tool>]`"
    )


@pytest.mark.parametrize(("text", "name"), [("bob", "bob"), (" @bob ", "bob"), ("bob smith", None), ("", None)])
def test_as_takes_one_name(text, name):
    """`/as bob` and `/as @bob` name bob; anything else is not a name."""
    assert person_name(text) == name

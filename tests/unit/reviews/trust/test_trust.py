"""Trust for a while (docs/decisions/0022): the pure rules, the command words, and how cards draw the offer."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from adapters.discord import messages as discord_messages
from adapters.discord.buttons import card_view, parse_batch_id, parse_button_id
from adapters.discord.cards import decided_line
from adapters.slack import messages as slack_messages
from adapters.slack.blocks import (
    ACTION_APPROVE,
    ACTION_APPROVE_ALL,
    ACTION_EDIT,
    ACTION_REJECT,
    ACTION_REJECT_ALL,
    ACTION_TRUST,
    card_blocks,
)
from adapters.words.decisions import TRUST_REFUSED, decision_error_text
from bot.admin.commands import ListTrust, RevokeTrust, SetTrust
from bot.admin.parse import CommandError, parse_command
from bot.base.errors import TrustRefusedError
from bot.policy.config import TrustSetting, WorkspaceConfig
from bot.ports import ApprovalCard, BatchOffer
from bot.reviews.digest import args_digest
from bot.reviews.lifecycle import (
    ApprovalEvent,
    LifecycleError,
    TrustEvent,
    TrustStatus,
    grants_trust,
    trust_after,
    trust_status,
)
from bot.reviews.records import ApprovalRecord
from bot.reviews.trust.grants import TrustGrant, at_least_as_narrow, key_digest, still_fits, trust_key

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def grant(**changes) -> TrustGrant:
    values = {
        "id": "0a1b2c3d",
        "approval_id": "f" * 32,
        "platform": "slack",
        "workspace_id": "T1",
        "channel_id": "C1",
        "thread_id": "slack:T1:C1:1.2",
        "tool_name": "http_request",
        "requester_id": "U1",
        "requester_name": "alice",
        "matched": {"url": "https://a.example/"},
        "matched_digest": key_digest({"url": "https://a.example/"}, ("url",)),
        "granted_by_id": "U2",
        "granted_by_name": "carol",
        "granted_at": NOW - timedelta(minutes=10),
        "expires_at": NOW + timedelta(minutes=20),
        "matching": ("url",),
    }
    return TrustGrant(**{**values, **changes})


def test_a_grant_is_live_until_it_expires_or_is_revoked():
    """LIVE before expires_at; EXPIRED at it; REVOKED once revoked, whatever the time."""
    assert trust_status(expires_at=NOW, revoked_at=None, now=NOW - timedelta(seconds=1)) is TrustStatus.LIVE
    assert trust_status(expires_at=NOW, revoked_at=None, now=NOW) is TrustStatus.EXPIRED
    assert trust_status(expires_at=NOW, revoked_at=NOW, now=NOW - timedelta(hours=1)) is TrustStatus.REVOKED


def test_only_a_live_grant_can_be_revoked_or_expire():
    """The transition table: revoke and expire leave LIVE only; the end states are final."""
    assert trust_after(TrustStatus.LIVE, TrustEvent.REVOKE) is TrustStatus.REVOKED
    assert trust_after(TrustStatus.LIVE, TrustEvent.EXPIRE) is TrustStatus.EXPIRED
    for state in (TrustStatus.REVOKED, TrustStatus.EXPIRED):
        for event in TrustEvent:
            with pytest.raises(LifecycleError):
                trust_after(state, event)


@pytest.mark.parametrize(
    ("event", "quorum", "expected"),
    [
        (ApprovalEvent.APPROVE, 1, True),
        (ApprovalEvent.APPROVE_EDIT, 1, True),
        (ApprovalEvent.APPROVE, 2, False),
        (ApprovalEvent.VOTE, 2, False),
        (ApprovalEvent.REJECT, 1, False),
        (ApprovalEvent.EXPIRE, 1, False),
    ],
)
def test_only_a_vote_that_approves_alone_grants_trust(event, quorum, expected):
    """A grant goes only with a vote that decided the approval as approved, at quorum 1."""
    assert grants_trust(event, quorum) is expected


def test_the_key_is_every_argument_or_the_named_ones():
    """No names: the whole arguments; names: just those, a missing one as None, order-free."""
    args = {"method": "POST", "url": "https://a.example/", "body": {"x": 1}}
    assert trust_key(args, ()) == args
    assert trust_key(args, ("url", "method")) == {"method": "POST", "url": "https://a.example/"}
    assert trust_key(args, ("headers",)) == {"headers": None}
    assert key_digest(args, ("url", "method")) == key_digest({**args, "body": 2}, ("method", "url"))
    assert key_digest(args, ()) == args_digest(args) != key_digest({**args, "body": 2}, ())


def test_a_grant_is_never_wider_than_the_setting_in_force():
    """Binding all is narrowest; a grant binding fewer names than the setting asks now covers nothing."""
    assert at_least_as_narrow((), ("url",)) and at_least_as_narrow((), ())
    assert at_least_as_narrow(("url", "method"), ("url",))
    assert not at_least_as_narrow(("url",), ("url", "method"))
    assert not at_least_as_narrow(("url",), ())
    setting = TrustSetting(tool_name="http_request", max_s=1800, matching=("url",))
    assert still_fits(grant(), setting, NOW)
    assert not still_fits(grant(), None, NOW)
    assert not still_fits(grant(), TrustSetting(tool_name="http_request", max_s=0), NOW)
    assert not still_fits(grant(), TrustSetting(tool_name="http_request", max_s=1800), NOW)  # now: every argument
    assert not still_fits(grant(), TrustSetting(tool_name="http_request", max_s=300, matching=("url",)), NOW)


def test_a_channel_setting_beats_the_workspace_and_off_switches_it_off():
    """`trust_for`: the channel's setting, else the workspace's; max_s 0 in a channel means none there."""
    workspace = TrustSetting(tool_name="send", max_s=600)
    config = WorkspaceConfig(
        platform="slack",
        workspace_id="T1",
        trust={("", "send"): workspace, ("C2", "send"): TrustSetting(tool_name="send", max_s=0, channel_id="C2")},
    )
    assert config.trust_for("send", "C1") == workspace
    assert config.trust_for("send", "C2") is None
    assert config.trust_for("other", "C1") is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("trust send up-to 30m", SetTrust(tool="send", up_to_s=1800)),
        ("trust send up-to 1h matching to", SetTrust(tool="send", up_to_s=3600, matching=("to",))),
        (
            "trust http_request up-to 2h matching method, url in <#C9|ops>",
            SetTrust(tool="http_request", up_to_s=7200, matching=("method", "url"), channel_id="C9"),
        ),
        ("trust send off in <#C9>", SetTrust(tool="send", up_to_s=0, channel_id="C9")),
        ("trust send default in <#C9>", SetTrust(tool="send", up_to_s=None, channel_id="C9")),
        ("trust list", ListTrust()),
        ("trust list in <#C9>", ListTrust(channel_id="C9")),
        ("trust revoke 0A1B2C3D", RevokeTrust(grant_id="0a1b2c3d")),
    ],
)
def test_trust_commands_parse(text, expected):
    """The DESIGN.md syntax, and off/default, list and revoke."""
    assert parse_command(text) == expected


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("trust", "missing"),
        ("trust send", "missing"),
        ("trust send up-to 10s", "from 1m to 1d"),
        ("trust send up-to 2d", "from 1m to 1d"),
        ("trust send up-to soon", "not a duration"),
        ("trust send forever", "expected up-to"),
        ("trust send up-to 30m matching a-b", "not an argument name"),
        ("trust send off matching to", "unexpected"),
        ("trust revoke nope", "not a trust id"),
        ("trust revoke", "missing"),
    ],
)
def test_bad_trust_commands_are_refused_in_words(text, problem):
    """Each mistake says what is wrong and shows the usage."""
    with pytest.raises(CommandError) as refused:
        parse_command(text)
    assert problem in refused.value.message and refused.value.usage and "trust" in refused.value.usage


def approval(**changes) -> ApprovalRecord:
    values = {
        "id": "a" * 32,
        "review_id": "r",
        "position": 0,
        "thread_id": "slack:T1:C1:1.2",
        "workspace_id": "T1",
        "tool_call_id": "c1",
        "tool_name": "http_request",
        "description": "",
        "proposed_args": {"method": "POST", "url": "https://a.example/"},
        "requester_id": "U1",
        "requester_name": "alice",
        "card_ref": None,
        "status": "pending",
        "decided_by_id": None,
        "decided_by_name": None,
        "decided_at": None,
        "final_args": None,
        "reason": None,
        "created_at": NOW,
    }
    from bot.reviews.lifecycle import ApprovalStatus

    values.update(changes)
    values["status"] = ApprovalStatus(values["status"])
    return ApprovalRecord(**values)


def slack_actions(record: ApprovalRecord) -> list[tuple[str, str]]:
    rendered = card_blocks(ApprovalCard(approval=record, position=1, total=1))
    return [(e["action_id"], e["text"]["text"]) for b in rendered if b["type"] == "actions" for e in b["elements"]]


def test_the_slack_card_offers_trust_only_when_its_approval_does():
    """The fourth button, "Approve and trust for 30 minutes", carries only the approval id like the others."""
    assert [a for a, _ in slack_actions(approval())] == [ACTION_APPROVE, ACTION_EDIT, ACTION_REJECT]
    offered = slack_actions(approval(trust_offer_s=1800))
    assert offered[1] == (ACTION_TRUST, "Approve and trust for 30 minutes")
    assert len(offered) == 4


def test_a_trusted_card_says_so_after_the_decision():
    """Slack and Discord redraw "Approved and trusted for 30 minutes by <approver>"."""
    record = approval(
        status="approved",
        decided_by_id="U2",
        decided_by_name="carol",
        decided_at=NOW,
        trust_id="0a1b2c3d",
        trust_s=1800,
        trusted_until=NOW + timedelta(minutes=30),
    )
    slack = str(card_blocks(ApprovalCard(approval=record, position=1, total=1)))
    assert "Approved and trusted for 30 minutes by <@U2>" in slack
    assert decided_line(record).startswith("Approved and trusted for 30 minutes by <@U2>")


async def test_the_discord_trust_button_names_only_the_approval_and_the_action():
    """`cs:trust:<id>:<version>` fits Discord's 100 characters and parses back to the action."""
    view = card_view("a" * 32, "0123abcd", trust_s=3600)
    buttons = [c for row in view.to_components() for c in row["components"]]
    ids = [str(b["custom_id"]) for b in buttons]
    labels = [b["label"] for b in buttons]
    assert ids[1] == f"cs:trust:{'a' * 32}:0123abcd" and all(len(i) <= 100 for i in ids)
    assert labels[1] == "Approve and trust for 60 minutes"
    match = parse_button_id(ids[1])
    assert match is not None and match["action"] == "trust" and match["approval_id"] == "a" * 32
    assert len(card_view("a" * 32, "0123abcd").children) == 3


@pytest.mark.parametrize("reason", ["not_offered", "quorum", "not_approve", "escalation"])
def test_every_trust_refusal_has_its_own_sentence_on_both_platforms(reason: str) -> None:
    """A refused "Approve and trust" tells the clicker why, in the words Slack and Discord share (no fallback)."""
    assert reason in TRUST_REFUSED
    for msg in (slack_messages, discord_messages):
        assert decision_error_text(TrustRefusedError(reason), msg, str) == TRUST_REFUSED[reason]


async def test_a_first_card_offers_trust_and_the_batch_together():
    """Approve / Approve and trust / Edit / Reject, then Approve all / Reject all: each with its own fixed id.

    Discord: four buttons on the first row (of five) and the batch on the second; every
    `custom_id` parses back to its own button class. Slack: the card's actions block and the
    batch's, with distinct action ids.
    """
    batch = BatchOffer(review_id="b" * 32, pending=2, version="89abcdef")
    view = card_view("a" * 32, "0123abcd", batch=batch, trust_s=1800)
    rows = [[str(c["custom_id"]) for c in row["components"]] for row in view.to_components()]
    assert [len(row) for row in rows] == [4, 2]
    assert [parse_button_id(i)["action"] for i in rows[0]] == ["approve", "trust", "edit", "reject"]  # type: ignore[index]
    assert [parse_batch_id(i)["action"] for i in rows[1]] == ["approve", "reject"]  # type: ignore[index]
    record = approval(trust_offer_s=1800)
    rendered = card_blocks(ApprovalCard(approval=record, position=1, total=2, batch=batch))
    actions = [[e["action_id"] for e in b["elements"]] for b in rendered if b["type"] == "actions"]
    assert actions == [
        [ACTION_APPROVE, ACTION_TRUST, ACTION_EDIT, ACTION_REJECT],
        [ACTION_APPROVE_ALL, ACTION_REJECT_ALL],
    ]

"""Property: no signed Slack click or form, however malformed or forged, decides or breaks anything.

Each example posts a properly signed `block_actions` or `view_submission` payload built from a
valid one and then bent: wrong types, missing fields, huge values, unknown action ids and
callback ids, values that name another workspace's approval, a decided one, or none at all.
Every button the bot draws is clicked: Approve, Approve and trust, Edit, Reject, the batch
buttons (Approve all, Reject all: their value names a pause) and Stop (its value names a turn:
a live one, an ended one, another workspace's, or none). The bot must answer HTTP without a
5xx, tell a clicker it can name in words (never a trace), audit every refusal that names an
approval (and every unknown id), change nothing (no decision, trust grant, stop or tool run),
and still let the requester decide the card afterwards.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from adapters.slack import blocks
from adapters.slack import messages as msg
from adapters.words import stop as stop_words
from adapters.words.decisions import TRUST_REFUSED, UNKNOWN_APPROVAL
from tests.adversarial.hostile import E2E_SETTINGS, hostile_text, looks_like_a_trace, world
from tests.adversarial.slack_hostile import (
    BATCH_ACTIONS,
    CARD_ACTIONS,
    MALLORY,
    NAMED,
    NAMED_PAUSES,
    NAMED_TURNS,
    OUR_ACTIONS,
    UNKNOWN_ID,
    ZED,
    Cards,
    approval_statuses,
    audit_rows,
    cards_fixture,  # noqa: F401 - the `cards` fixture, found by pytest by name
    errors_logged,
    is_refusal,
    named_value,
    post_form,
    still_decidable,
)
from tests.adversarial.slack_support import ephemerals_to, has_buttons
from tests.e2e.conftest import ALICE, BOB, TEAM
from tests.e2e.slack.test_slack_flow import settle
from tests.support.barriers import slack_listeners_done

pytestmark = pytest.mark.e2e

# --- what a payload may carry -------------------------------------------------------------

odd_values = st.one_of(
    st.sampled_from(NAMED),
    st.sampled_from(NAMED_PAUSES + NAMED_TURNS),
    st.sampled_from(["unknown", "pending-upper", "pending-padded", "pending-long", "empty"]),
    hostile_text(max_atoms=4),
    st.integers(),
    st.none(),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.text(min_size=1, max_size=3).map(lambda t: t * 20_000),
)
odd_strings = st.one_of(hostile_text(max_atoms=3), st.integers(), st.none(), st.lists(st.none(), max_size=1))


@st.composite
def clicks(draw: st.DrawFn) -> dict[str, Any]:
    """The parts of a button click; `value` may be a placeholder (see `NAMED`).

    Half the time the value is one of the kind the button carries (an approval id for a card's
    buttons, a pause for the batch buttons, a turn for Stop), so that forged values are tried
    more often than values of the wrong kind."""
    action_id = draw(st.one_of(st.sampled_from(OUR_ACTIONS), hostile_text(max_atoms=3)))
    fitting = NAMED_PAUSES if action_id in BATCH_ACTIONS else NAMED_TURNS if action_id == blocks.ACTION_STOP else NAMED
    return {
        "action_id": action_id,
        "value": draw(st.one_of(st.sampled_from(fitting), odd_values)),
        "who": draw(st.sampled_from([(BOB, TEAM), (MALLORY, "T2"), (MALLORY, TEAM), (ZED, TEAM)])),
        "block_id": draw(st.one_of(st.just("b"), odd_strings, st.just("countersign_x_deadbeef"))),
        "drop": draw(st.sets(st.sampled_from(["channel", "container", "message", "team", "trigger_id"]))),
        "bend": draw(
            st.sampled_from([None, "user-not-object", "user-id-number", "no-user-id", "actions-empty", "actions-odd"])
        ),
    }


def _click_payload(parts: dict[str, Any], cards: Cards) -> dict[str, Any]:
    user, team = parts["who"]
    card = cards.pending
    payload: dict[str, Any] = {
        "type": "block_actions",
        "user": {"id": user, "username": user.lower(), "name": user.lower(), "team_id": team},
        "api_app_id": "A1",
        "token": "verification-token",
        "container": {"type": "message", "message_ts": card.ts, "channel_id": card.channel, "is_ephemeral": False},
        "trigger_id": "1.2.3",
        "team": {"id": team, "domain": "standin"},
        "channel": {"id": card.channel, "name": "general"},
        "message": {"type": "message", "user": "UBOT", "ts": card.ts, "text": "", "thread_ts": card.thread_ts},
        "state": {"values": {}},
        "response_url": "https://hooks.slack.com/actions/T1/1/x",
        "actions": [
            {
                "type": "button",
                "action_id": parts["action_id"],
                "block_id": parts["block_id"],
                "value": named_value(parts["value"], cards),
                "action_ts": "1.2",
            }
        ],
    }
    for key in parts["drop"]:
        payload.pop(key, None)
    bend = parts["bend"]
    if bend == "user-not-object":
        payload["user"] = user
    elif bend == "user-id-number":
        payload["user"]["id"] = 42
    elif bend == "no-user-id":
        del payload["user"]["id"]
    elif bend == "actions-empty":
        payload["actions"] = []
    elif bend == "actions-odd":
        payload["actions"] = {"0": payload["actions"][0]}
    return payload


# --- the properties -----------------------------------------------------------------------


def _drawn(action_id: str, value: object, who: tuple[str, str], *, block_id: str | None = "b") -> dict[str, Any]:
    """An explicit example of `clicks()`: the button, its value, the clicker and team, nothing dropped or bent."""
    return {"action_id": action_id, "value": value, "who": who, "block_id": block_id, "drop": set(), "bend": None}


@pytest.mark.timeout(300)
@E2E_SETTINGS
@given(parts=clicks())
@example(parts=_drawn(blocks.ACTION_APPROVE, "pending", (MALLORY, "T2")))
@example(parts=_drawn(blocks.ACTION_APPROVE, "foreign", (BOB, TEAM)))
@example(parts=_drawn(blocks.ACTION_EDIT, 7, (BOB, TEAM), block_id=None))
@example(
    parts={
        "action_id": blocks.ACTION_REJECT,
        "value": "\x00\ud800",
        "who": (MALLORY, TEAM),
        "block_id": "b",
        "drop": {"channel"},
        "bend": None,
    }
)
# docs/decisions/0022: Approve and trust on another workspace's card
@example(parts=_drawn(blocks.ACTION_TRUST, "foreign", (BOB, TEAM)))
# Approve all on another workspace's pause
@example(parts=_drawn(blocks.ACTION_APPROVE_ALL, "foreign-pause", (BOB, TEAM), block_id="countersign_x_deadbeef"))
# Reject all on this workspace's pause, by someone who may not decide it
@example(parts=_drawn(blocks.ACTION_REJECT_ALL, "pending-pause", (ZED, TEAM)))
# Stop of a live turn of another workspace, and of an ended turn
@example(parts=_drawn(blocks.ACTION_STOP, "pending-turn", (MALLORY, "T2")))
@example(parts=_drawn(blocks.ACTION_STOP, "decided-turn", (BOB, TEAM), block_id=None))
async def test_property_a_bent_or_forged_click_changes_nothing_and_is_answered(
    bot, events, slack, target, cards, caplog, parts
):
    """Any signed click (odd types, missing fields, foreign or unknown ids; any of our buttons, the batch and Stop
    buttons too): no 5xx, a sentence to the clicker, audited, nothing decided, trusted, stopped or run."""
    payload = _click_payload(parts, cards)
    user, team = parts["who"]
    before, audit, runs = await world(bot), await audit_rows(bot), len(target.requests)
    notes, logged, sent = len(ephemerals_to(slack, user)), len(caplog.records), len(slack.calls)
    delivery = await post_form(events, payload)
    await slack_listeners_done()
    await settle(bot)
    assert delivery.status in (200, 400, 404), (delivery.status, delivery.body)
    assert errors_logged(caplog, logged) == []
    assert (await world(bot), len(target.requests)) == (before, runs)
    new_rows = (await audit_rows(bot))[len(audit) :]
    assert [row for row in new_rows if row["kind"] != "refused"] == []
    assert not any(looks_like_a_trace(json.dumps(call.args, default=str)) for call in slack.calls[sent:])
    assert slack.calls_to("views.open") == []
    ours = parts["action_id"] in OUR_ACTIONS and parts["bend"] not in ("actions-empty", "actions-odd")
    named_user = parts["bend"] not in ("user-not-object", "user-id-number", "no-user-id")
    if ours and named_user:
        assert all(row["actor_id"] == user for row in new_rows), new_rows
        if parts["action_id"] in CARD_ACTIONS:
            # Refused in words, and audited as a refusal of this person.
            [row] = new_rows
            named = {getattr(cards, name).approval_id: name for name in NAMED}.get(row["approval_id"])
            # A row about an approval is in the approval's workspace and names a clicker of another
            # workspace in its detail; a row about no known approval is in the clicker's workspace.
            approval_workspace = {"foreign": "T2", "pending": TEAM, "decided": TEAM}.get(named or "")
            assert (row["actor_id"], row["workspace_id"]) == (user, approval_workspace or team), row
            detail = row["detail"] if isinstance(row["detail"], dict) else json.loads(row["detail"] or "{}")
            assert detail.get("actor_workspace_id") == (team if approval_workspace not in (None, team) else None), row
            assert named == parts["value"] or row["outcome"] == "unknown_approval", row
        else:
            # A batch refuses each call of the pause (one here) or names an unknown pause; a Stop of a
            # live turn is refused and audited, of an ended or unknown turn only answered.
            assert len(new_rows) <= 1, new_rows
        if "channel" not in parts["drop"] or "container" not in parts["drop"]:
            [note] = ephemerals_to(slack, user)[notes:]
            assert is_refusal(note), note
    else:
        assert new_rows == [] and len(ephemerals_to(slack, user)) == notes


@pytest.mark.timeout(300)
async def test_after_many_bent_clicks_the_requester_still_decides(bot, events, slack, target, cards):
    """The card survives a burst of bent clicks: afterwards the requester approves it, it runs once."""
    for action in OUR_ACTIONS:
        for value in (UNKNOWN_ID, cards.foreign.approval_id, cards.decided.approval_id, 12, None):
            parts = {"action_id": action, "value": value, "who": (BOB, TEAM), "block_id": "b", "drop": set()}
            assert (await post_form(events, _click_payload({**parts, "bend": None}, cards))).status == 200
    await slack_listeners_done()
    await still_decidable(bot, events, slack, target, cards)


# --- forged interactions are refused and audited --------------------------------------------


async def test_forged_slack_clicks_are_refused_and_audited(bot, events, slack, target, cards):
    """Another workspace's approval and an unknown id: refused in words, one `refused` audit row each, nothing decided."""
    refusals = [
        # Bob (T1) names T2's approval: judged against T2's card, in T2's audit log.
        ((BOB, TEAM), cards.foreign.approval_id, ("T2", cards.foreign.approval_id, "not_permitted", "other_workspace")),
        # Mallory clicks from T2 on T1's card (a Slack Connect channel, say).
        (
            (MALLORY, "T2"),
            cards.pending.approval_id,
            (TEAM, cards.pending.approval_id, "not_permitted", "other_workspace"),
        ),
        # An id no approval has, and a value that is no id at all.
        ((BOB, TEAM), UNKNOWN_ID, (TEAM, UNKNOWN_ID, "unknown_approval", "no such approval")),
        ((BOB, TEAM), "../" * 40, (TEAM, None, "unknown_approval", "no such approval")),
    ]
    statuses, audit = await approval_statuses(bot, cards), await audit_rows(bot)
    for who, value, _ in refusals:
        parts = {"action_id": OUR_ACTIONS[0], "value": value, "who": who, "block_id": "b", "drop": set(), "bend": None}
        assert (await post_form(events, _click_payload(parts, cards))).status == 200
        await slack_listeners_done()
    await settle(bot)
    rows = (await audit_rows(bot))[len(audit) :]
    assert [(r["kind"], r["actor_id"]) for r in rows] == [("refused", who[0]) for who, _, _ in refusals]
    assert [(r["workspace_id"], r["approval_id"], r["outcome"], r["reason"]) for r in rows] == [
        expected for _, _, expected in refusals
    ]
    named = rows[-1]["detail"]["named"]
    assert named.startswith("../") and len(named) <= 80  # what was named, clipped
    assert await approval_statuses(bot, cards) == statuses and has_buttons(slack, cards.pending)
    assert ephemerals_to(slack, BOB)[-1] == UNKNOWN_APPROVAL
    assert ephemerals_to(slack, MALLORY)[-1] == msg.REFUSED_OTHER_WORKSPACE


async def test_the_requesters_own_clicks_that_cannot_apply_change_nothing(bot, events, slack, target, cards):
    """The trust, Stop and batch buttons (docs/decisions/0021 to 0023), clicked by the one person who may decide the card, where they cannot apply: Approve and
    trust on a card that offers no trust, Stop naming an ended or unknown turn, Approve all and Reject all on a pause
    already decided. Each is answered privately in words, and nothing is decided, trusted, stopped or run."""
    clicks = [
        (blocks.ACTION_TRUST, cards.pending.approval_id, TRUST_REFUSED["not_offered"]),
        (blocks.ACTION_STOP, cards.turns["decided"], stop_words.TURN_ENDED),
        (blocks.ACTION_STOP, UNKNOWN_ID, stop_words.TURN_ENDED),
        (blocks.ACTION_APPROVE_ALL, cards.pauses["decided"], "Already decided before your click"),
        (blocks.ACTION_REJECT_ALL, cards.pauses["decided"], "This was already"),
    ]
    for action, value, answer in clicks:
        before, audit, runs = await world(bot), await audit_rows(bot), len(target.requests)
        notes = len(ephemerals_to(slack, ALICE))
        parts = {"action_id": action, "value": value, "who": (ALICE, TEAM), "block_id": "b", "drop": set()}
        assert (await post_form(events, _click_payload({**parts, "bend": None}, cards))).status == 200
        await slack_listeners_done()
        await settle(bot)
        assert (await world(bot), len(target.requests)) == (before, runs), action
        assert all(row["kind"] == "refused" for row in (await audit_rows(bot))[len(audit) :]), action
        [note] = ephemerals_to(slack, ALICE)[notes:]
        assert note.startswith(answer) and is_refusal(note), (action, note)
        assert slack.calls_to("views.open") == []
    await still_decidable(bot, events, slack, target, cards)

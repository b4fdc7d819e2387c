"""Hostile Slack forms and requests: Edit JSON of every kind, odd reasons, replayed and unreadable requests."""

from __future__ import annotations

import json
import logging
import time
from typing import Any
from urllib.parse import urlencode

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from adapters.slack import blocks
from adapters.words.decisions import DECISION_FAILED
from tests.adversarial.hostile import (
    E2E_SETTINGS,
    edit_form_text,
    hostile_text,
    looks_like_a_trace,
    world,
)
from tests.adversarial.slack_hostile import (
    MALLORY,
    NAMED,
    NAMED_PAUSES,
    OUR_VIEWS,
    UNKNOWN_ID,
    ZED,
    Cards,
    approval_statuses,
    audit_rows,
    cards_fixture,  # noqa: F401 - the `cards` fixture, found by pytest by name
    errors_logged,
    named_value,
    post_form,
    still_decidable,
)
from tests.adversarial.slack_support import card_json, card_ready, has_buttons
from tests.e2e.conftest import ALICE, BOB, CHANNEL, TEAM
from tests.e2e.slack.test_slack_flow import settle, wait_answer
from tests.support.barriers import slack_listeners_done

pytestmark = pytest.mark.e2e


def _submission(callback_id: str, metadata: object, values: Any, user: str, team: str) -> dict[str, Any]:
    return {
        "type": "view_submission",
        "team": {"id": team, "domain": "standin"},
        "user": {"id": user, "username": user.lower(), "name": user.lower(), "team_id": team},
        "api_app_id": "A1",
        "token": "verification-token",
        "trigger_id": "1.2.3",
        "view": {
            "id": "V1",
            "team_id": team,
            "type": "modal",
            "callback_id": callback_id,
            "private_metadata": metadata,
            "state": {"values": values},
            "hash": "1.x",
            "app_id": "A1",
        },
        "response_urls": [],
        "is_enterprise_install": False,
    }


def _typed(block: str, action: str, text: object) -> dict[str, Any]:
    return {block: {action: {"type": "plain_text_input", "value": text}}}


@st.composite
def edit_forms(draw: st.DrawFn) -> dict[str, Any]:
    """An Edit form as submitted: typed JSON of any kind, for this or another approval, by anyone."""
    return {
        "text": draw(edit_form_text()),
        "metadata": draw(
            st.one_of(
                st.sampled_from(["pending", "pending", "foreign", "decided", "unknown", "pending-upper"]),
                hostile_text(max_atoms=3),
                st.integers(),
                st.none(),
            )
        ),
        "who": draw(st.sampled_from([(ALICE, TEAM), (ALICE, TEAM), (BOB, TEAM), (MALLORY, "T2")])),
        "shape": draw(st.sampled_from(["typed", "typed", "typed", "no-state", "value-number", "values-list"])),
    }


def _edit_payload(form: dict[str, Any], cards: Cards) -> dict[str, Any]:
    user, team = form["who"]
    values: Any = _typed(blocks.EDIT_BLOCK, blocks.EDIT_INPUT, form["text"])
    if form["shape"] == "value-number":
        values = _typed(blocks.EDIT_BLOCK, blocks.EDIT_INPUT, 12)
    elif form["shape"] == "values-list":
        values = [values]
    payload = _submission(blocks.VIEW_EDIT, named_value(form["metadata"], cards), values, user, team)
    if form["shape"] == "no-state":
        del payload["view"]["state"]
    return payload


@pytest.mark.timeout(300)
@E2E_SETTINGS
@given(form=edit_forms())
@example(form={"text": '{"method": "POST", "url": NaN}', "metadata": "pending", "who": (ALICE, TEAM), "shape": "typed"})
@example(form={"text": "[" * 1400 + "]" * 1400, "metadata": "pending", "who": (ALICE, TEAM), "shape": "typed"})
@example(form={"text": '{"a": "\\ud800"}', "metadata": "pending", "who": (ALICE, TEAM), "shape": "typed"})
@example(form={"text": "{}", "metadata": 42, "who": (ALICE, TEAM), "shape": "typed"})
async def test_property_no_edit_form_breaks_or_decides_anything_it_should_not(
    bot, events, slack, target, cards, caplog, form
):
    """Any Edit submission (broken, deep, huge, non-object JSON; odd metadata; anyone): an error in the form, nothing changed."""
    statuses, audit, runs, logged = (
        await approval_statuses(bot, cards),
        await audit_rows(bot),
        len(target.requests),
        len(caplog.records),
    )
    delivery = await post_form(events, _edit_payload(form, cards))
    await slack_listeners_done()
    await settle(bot)
    assert delivery.status == 200, delivery.body
    assert delivery.json["response_action"] == "errors", delivery.body
    [problem] = delivery.json["errors"].values()
    assert problem and not looks_like_a_trace(problem) and problem != DECISION_FAILED, problem
    assert (await approval_statuses(bot, cards), len(target.requests)) == (statuses, runs)
    assert all(row["kind"] == "refused" for row in (await audit_rows(bot))[len(audit) :])
    assert errors_logged(caplog, logged) == []
    assert has_buttons(slack, cards.pending)


@st.composite
def reject_all_forms(draw: st.DrawFn) -> dict[str, Any]:
    """A Reject all form (docs/decisions/0023) as submitted: any reason, naming this or another pause, or anything, by
    someone who may decide none of the calls it names."""
    return {
        "reason": draw(st.one_of(hostile_text(max_atoms=4), st.integers(), st.none())),
        "metadata": draw(
            st.one_of(
                st.sampled_from([*NAMED_PAUSES, *NAMED_PAUSES, *NAMED, "unknown", "empty"]),
                hostile_text(max_atoms=3),
                st.integers(),
                st.none(),
            )
        ),
        "who": draw(st.sampled_from([(BOB, TEAM), (MALLORY, "T2"), (MALLORY, TEAM), (ZED, TEAM)])),
    }


@pytest.mark.timeout(300)
@E2E_SETTINGS
@given(form=reject_all_forms())
@example(form={"reason": "no", "metadata": "foreign-pause", "who": (BOB, TEAM)})
@example(form={"reason": "\x00\ud800", "metadata": "pending-pause", "who": (MALLORY, "T2")})
@example(form={"reason": None, "metadata": "decided-pause", "who": (ZED, TEAM)})
async def test_property_no_reject_all_form_by_a_stranger_decides_anything(
    bot, events, slack, target, cards, caplog, form
):
    """Any Reject all submission by someone who may decide none of its calls (another workspace's pause, an unknown
    or decided one, odd metadata and reasons): 200, errors or a summary in the form without a trace, only refusals
    audited, nothing decided, trusted, stopped or run, no error logged."""
    user, team = form["who"]
    values = _typed(blocks.REASON_BLOCK, blocks.REASON_INPUT, form["reason"])
    payload = _submission(blocks.VIEW_REJECT_ALL, named_value(form["metadata"], cards), values, user, team)
    before, audit, runs, logged = await world(bot), await audit_rows(bot), len(target.requests), len(caplog.records)
    delivery = await post_form(events, payload)
    await slack_listeners_done()
    await settle(bot)
    assert delivery.status == 200, delivery.body
    assert delivery.json["response_action"] in ("errors", "update"), delivery.body
    shown = json.dumps(delivery.json)
    assert not looks_like_a_trace(shown) and DECISION_FAILED not in shown, shown
    assert (await world(bot), len(target.requests)) == (before, runs)
    new_rows = (await audit_rows(bot))[len(audit) :]
    assert all(row["kind"] == "refused" and row["actor_id"] == user for row in new_rows), new_rows
    assert errors_logged(caplog, logged) == []
    assert has_buttons(slack, cards.pending)


async def test_many_bent_forms_leave_the_card_decidable(bot, events, slack, target, cards):
    """After odd Edit and Reject forms by strangers, the requester still approves; it runs once."""
    for callback in (*OUR_VIEWS, "countersign_other_view"):
        for metadata in (
            cards.pending.approval_id,
            cards.foreign.approval_id,
            cards.pauses["pending"],
            cards.pauses["foreign"],
            UNKNOWN_ID,
            "",
            None,
        ):
            values = {
                **_typed(blocks.EDIT_BLOCK, blocks.EDIT_INPUT, "{}"),
                **_typed(blocks.REASON_BLOCK, blocks.REASON_INPUT, "x"),
            }
            delivery = await post_form(events, _submission(callback, metadata, values, BOB, TEAM))
            assert delivery.status in (200, 404)
    await slack_listeners_done()
    await still_decidable(bot, events, slack, target, cards)


@pytest.mark.parametrize("reason", ["\x00", "why\x00not \ud800", "\u202eevil\u202c", "<!channel> " + "\u200b" * 1000])
async def test_a_reject_reason_with_nul_surrogates_or_marks_is_recorded_readably(
    bot, events, slack, target, gemini, reason
):
    """The requester's reason with NUL, a lone surrogate or bidi marks rejects the call; the card and the model get it readable."""
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> post widget")
    [card] = await card_ready(bot, slack)
    reply = await post_form(
        events,
        _submission(
            blocks.VIEW_REJECT, card.approval_id, _typed(blocks.REASON_BLOCK, blocks.REASON_INPUT, reason), ALICE, TEAM
        ),
    )
    assert reply.status == 200 and not reply.body, reply.body
    await wait_answer(slack, mention.ts)
    await settle(bot)
    assert target.requests == [] and "Rejected" in card_json(slack, card)
    shown = card_json(slack, card)
    assert "\x00" not in shown and "\\u0000" not in shown
    assert "<!channel>" not in shown
    row = await bot.runtime.database.pool.fetchrow(
        "SELECT status, reason FROM approvals WHERE id = $1", card.approval_id
    )
    assert row["status"] == "rejected" and row["reason"]


# --- requests that fail Bolt's checks -----------------------------------------------------


def _signed(events, body: bytes, *, at: int) -> dict[str, str]:
    return {"Content-Type": "application/x-www-form-urlencoded", **events.sign(body, timestamp=at)}


@pytest.mark.parametrize("offset_s", [-301, -3600, 400, -(10**9)])
async def test_a_replayed_click_with_an_old_or_future_timestamp_is_refused_and_logged_without_its_body(
    bot, events, slack, target, caplog, offset_s
):
    """A correctly signed click whose timestamp is over five minutes away: 401, nothing decided, one warning, no body in the log."""
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> post widget")
    [card] = await card_ready(bot, slack)
    hook = slack.new_response_url(CHANNEL, user=ALICE)
    payload = {
        "type": "block_actions",
        "user": {"id": ALICE, "team_id": TEAM},
        "team": {"id": TEAM},
        "channel": {"id": CHANNEL},
        "container": {"type": "message", "channel_id": CHANNEL, "message_ts": card.ts},
        "message": {"ts": card.ts, "thread_ts": card.thread_ts},
        "response_url": hook,
        "token": "verification-token",
        "trigger_id": "1.2.3",
        "actions": [{"type": "button", "action_id": blocks.ACTION_APPROVE, "block_id": "b", "value": card.approval_id}],
    }
    body = urlencode({"payload": json.dumps(payload)}).encode()
    # At LOG_LEVEL=INFO, Bolt's verification logger logs at INFO (it copies the root's level).
    with caplog.at_level(logging.INFO), caplog.at_level(logging.INFO, logger="slack_bolt.RequestVerification"):
        replayed = await events.send_raw(body, _signed(events, body, at=int(time.time()) + offset_s))
        await slack_listeners_done()
        await settle(bot)
    assert replayed.status == 401
    assert target.requests == [] and has_buttons(slack, card)
    [warning] = [r.getMessage() for r in caplog.records if "failed signature verification" in r.getMessage()]
    assert "timestamp" in warning and ("old" in warning or "no valid timestamp" in warning)
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert hook not in logged and "verification-token" not in logged and card.approval_id not in logged
    fresh = await events.send_raw(body, _signed(events, body, at=int(time.time())))
    assert fresh.status == 200  # the same click signed now is a click like any other
    await wait_answer(slack, mention.ts)
    assert len(target.requests) == 1


@pytest.mark.parametrize(
    ("body", "headers"),
    [
        (b"payload=%FF%FE", {}),
        (b"\xff\xfe\x00", {}),
        (b"payload=" + b"%7B%22type%22%3A%22block_actions%22%2C%22actions%22%3A%5B%5D%7D", {}),
        (b"payload=not-json", {}),
        (b"{}", {"X-Slack-Request-Timestamp": "yesterday"}),
        (b"{}", {"X-Slack-Request-Timestamp": "9" * 400}),
    ],
    ids=["bad-utf8-form", "bad-utf8-raw", "no-actions", "not-json", "word-timestamp", "huge-timestamp"],
)
async def test_an_unreadable_request_gets_a_4xx_and_a_warning_not_a_traceback(bot, events, caplog, body, headers):
    """Undecodable bodies, payloads Bolt cannot match, and timestamps that are not numbers: 4xx, no traceback."""
    signed = {"Content-Type": "application/x-www-form-urlencoded", **events.sign(body), **headers}
    delivery = await events.send_raw(body, signed)
    await slack_listeners_done()
    assert 400 <= delivery.status < 500, (delivery.status, delivery.body)
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []

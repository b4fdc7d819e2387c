"""Shared pieces of the hostile-input property tests on Slack: approvals to aim at, and checks."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import pytest

from adapters.slack import blocks
from adapters.slack import messages as msg
from adapters.words import stop as stop_words
from adapters.words.batch import BATCH_NOTHING
from adapters.words.decisions import (
    REFUSED_NOT_AN_APPROVER,
    REFUSED_SELF_APPROVAL,
    STALE_VOTE,
    TRUST_REFUSED,
    UNKNOWN_APPROVAL,
)
from tests.adversarial.hostile import pauses_and_turns
from tests.adversarial.slack_support import card_ready, has_buttons, sender
from tests.e2e.conftest import ALICE, CHANNEL
from tests.e2e.slack.test_slack_flow import Card, click, settle, wait_answer

MALLORY = "UMALLORY"
"""A member of team T2 (no admin rights anywhere)."""
ZED = "UZED"
"""T2's requester."""
CARD_ACTIONS = (blocks.ACTION_APPROVE, blocks.ACTION_TRUST, blocks.ACTION_EDIT, blocks.ACTION_REJECT)
"""The buttons of one card: their value is an approval id."""
BATCH_ACTIONS = (blocks.ACTION_APPROVE_ALL, blocks.ACTION_REJECT_ALL)
"""The batch buttons of a pause's first card (docs/decisions/0023): their value is a review (pause) id."""
OUR_ACTIONS = (*CARD_ACTIONS, *BATCH_ACTIONS, blocks.ACTION_STOP)
"""Every button the bot draws; Stop (on the progress message) names a turn id."""
OUR_VIEWS = (blocks.VIEW_EDIT, blocks.VIEW_REJECT, blocks.VIEW_REJECT_ALL)
NAMED = ("pending", "foreign", "decided")
"""Placeholders for the approvals the fixture makes: this team's pending card, team T2's pending
card, and one of this team's that is decided. `<name>-pause` and `<name>-turn` stand for the
pause (review id, a batch button's value) and the conversation's turn id (a Stop button's value)
of the same card; `decided-turn` has ended."""
NAMED_PAUSES = tuple(f"{name}-pause" for name in NAMED)
NAMED_TURNS = tuple(f"{name}-turn" for name in NAMED)
UNKNOWN_ID = "0123456789abcdef0123456789abcdef"
REFUSALS = {
    msg.REFUSED_NOT_PERMITTED,
    msg.REFUSED_OTHER_WORKSPACE,
    UNKNOWN_APPROVAL,
    REFUSED_NOT_AN_APPROVER,
    REFUSED_SELF_APPROVAL,
    *TRUST_REFUSED.values(),
    BATCH_NOTHING,
    STALE_VOTE,
    stop_words.TURN_ENDED,
    stop_words.REFUSED_OTHER_WORKSPACE,
}
REFUSAL_STARTS = (
    "This was already",  # msg.ALREADY_DECIDED
    "You can't stop this turn: only",  # stop_words.REFUSED, naming the requester
    "This turn was already stopped",  # stop_words.ALREADY_STOPPED
    "Left pending: ",  # a batch whose calls the clicker may not decide (msg.BATCH_LEFT)
    "Already decided before your click",  # msg.BATCH_SKIPPED
)


def is_refusal(note: str) -> bool:
    """Whether an ephemeral note is one of the bot's refusals (a sentence saying nothing changed)."""
    return note in REFUSALS or note.startswith(REFUSAL_STARTS)


@dataclass
class Cards:
    pending: Card
    mention_ts: str
    foreign: Card
    decided: Card
    pauses: dict[str, str]
    """Review id (32 hex digits) by `NAMED` name."""
    turns: dict[str, str]
    """Turn id of the card's conversation by `NAMED` name (the decided card's turn has ended)."""


@pytest.fixture(name="cards")
async def cards_fixture(bot, events, slack, target) -> Cards:
    """A pending card in T1 (alice's), a pending card in T2 (zed's), and a decided one in T1."""
    slack.add_user(MALLORY, "mallory")
    slack.add_user(ZED, "zed")
    slack.add_channel("C2", name="t2-general")
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> post widget")
    [pending] = await card_ready(bot, slack)
    second = await events.app_mention(CHANNEL, ALICE, "<@UBOT> post gadget")
    [_, decided] = await card_ready(bot, slack, count=2)
    await click(events, slack, ALICE, blocks.ACTION_APPROVE, decided)
    await wait_answer(slack, second.ts)
    async with sender(bot.port, team_id="T2") as t2:
        await t2.app_mention("C2", ZED, "<@UBOT> post gizmo")
    posted = await slack.wait_for("chat.postMessage", lambda a: a.get("channel") == "C2" and bool(a.get("blocks")))
    foreign_blocks = posted[0].args["blocks"]
    approve = next(b for b in foreign_blocks if b.get("type") == "actions")["elements"][0]
    foreign = Card("C2", posted[0].response["ts"], posted[0].args.get("thread_ts"), approve["value"], foreign_blocks)
    await settle(bot)
    pauses, turns = await pauses_and_turns(
        bot, {"pending": pending.approval_id, "foreign": foreign.approval_id, "decided": decided.approval_id}
    )
    return Cards(pending=pending, mention_ts=mention.ts, foreign=foreign, decided=decided, pauses=pauses, turns=turns)


def named_value(choice: object, cards: Cards) -> object:
    """The payload value a placeholder stands for."""
    ids = {name: getattr(cards, name).approval_id for name in NAMED}
    special = {
        "unknown": UNKNOWN_ID,
        "pending-upper": cards.pending.approval_id.upper(),
        "pending-padded": f" {cards.pending.approval_id}\n",
        "pending-long": cards.pending.approval_id + "0",
        "empty": "",
    }
    if isinstance(choice, str) and choice in ids:
        return ids[choice]
    if isinstance(choice, str) and choice in NAMED_PAUSES:
        return cards.pauses[choice.removesuffix("-pause")]
    if isinstance(choice, str) and choice in NAMED_TURNS:
        return cards.turns[choice.removesuffix("-turn")]
    return special.get(choice, choice) if isinstance(choice, str) else choice


async def post_form(events, payload: dict[str, Any]):
    body = urlencode({"payload": json.dumps(payload)}).encode()
    return await events.send_raw(body, {"Content-Type": "application/x-www-form-urlencoded", **events.sign(body)})


async def audit_rows(bot) -> list[dict[str, Any]]:
    rows = await bot.runtime.database.pool.fetch("SELECT * FROM audit_log ORDER BY id")
    return [dict(row) for row in rows]


async def approval_statuses(bot, cards: Cards) -> dict[str, str]:
    ids = [getattr(cards, name).approval_id for name in NAMED]
    rows = await bot.runtime.database.pool.fetch("SELECT id, status FROM approvals WHERE id = ANY($1::text[])", ids)
    return {row["id"]: row["status"] for row in rows}


def errors_logged(caplog, since: int) -> list[str]:
    return [f"{r.name}: {r.getMessage()}" for r in caplog.records[since:] if r.levelname in ("ERROR", "CRITICAL")]


async def still_decidable(bot, events, slack, target, cards: Cards) -> None:
    """The requester can still approve her card; it runs once and is answered."""
    before = len(target.requests)
    assert has_buttons(slack, cards.pending)
    await click(events, slack, ALICE, blocks.ACTION_APPROVE, cards.pending)
    await wait_answer(slack, cards.mention_ts)
    await settle(bot)
    assert len(target.requests) == before + 1

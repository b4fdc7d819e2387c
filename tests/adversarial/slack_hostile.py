"""Shared pieces of the hostile-input property tests on Slack: approvals to aim at, and checks."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import pytest

from adapters.slack import blocks
from adapters.slack import messages as msg
from tests.adversarial.slack_support import card_ready, has_buttons, sender
from tests.e2e.conftest import ALICE, CHANNEL
from tests.e2e.test_slack_flow import Card, click, settle, wait_answer

MALLORY = "UMALLORY"
"""A member of team T2 (no admin rights anywhere)."""
ZED = "UZED"
"""T2's requester."""
OUR_ACTIONS = (blocks.ACTION_APPROVE, blocks.ACTION_EDIT, blocks.ACTION_REJECT)
OUR_VIEWS = (blocks.VIEW_EDIT, blocks.VIEW_REJECT)
NAMED = ("pending", "foreign", "decided")
"""Placeholders for the approvals the fixture makes: this team's pending card, team T2's pending
card, and one of this team's that is decided."""
UNKNOWN_ID = "0123456789abcdef0123456789abcdef"
REFUSALS = {
    msg.REFUSED_NOT_PERMITTED,
    msg.REFUSED_OTHER_WORKSPACE,
    msg.UNKNOWN_APPROVAL,
    msg.REFUSED_NOT_AN_APPROVER,
    msg.REFUSED_SELF_APPROVAL,
}


@dataclass
class Cards:
    pending: Card
    mention_ts: str
    foreign: Card
    decided: Card


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
    return Cards(pending=pending, mention_ts=mention.ts, foreign=foreign, decided=decided)


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

"""Attacks on /metrics: nothing people type may become a label (unbounded cardinality, injected series)."""

from __future__ import annotations

import httpx
import pytest

from adapters.slack import blocks
from tests.e2e.conftest import ALICE, BOB, CHANNEL
from tests.e2e.slack.test_slack_flow import click, settle, wait_answer, wait_card
from tests.support.barriers import GENEROUS_S, slack_listeners_done

pytestmark = pytest.mark.e2e

MARK = "LBL-INJECT"


async def test_typed_text_never_becomes_a_metric_label(bot, events, slack, target):
    """A mention, a refused click and a reject reason, each carrying text shaped like an exposition line.

    `/metrics` must count them all (approvals requested, refusals, decisions) under the tool's
    name and fixed outcomes only: none of the typed text appears in it.
    """
    evil = f'{MARK}"}} countersign_fake 1\n{MARK}'
    mention = await events.app_mention(CHANNEL, ALICE, f"<@UBOT> post widget {evil}")
    [card] = await wait_card(slack)
    await click(events, slack, BOB, blocks.ACTION_APPROVE, card)  # refused: not permitted
    await click(events, slack, ALICE, blocks.ACTION_REJECT, card)
    [opened] = await slack.wait_for("views.open", timeout=GENEROUS_S)
    reply = await events.view_submission(
        ALICE,
        blocks.VIEW_REJECT,
        opened.args["view"]["private_metadata"],
        {blocks.REASON_BLOCK: {blocks.REASON_INPUT: evil}},
    )
    assert reply.status == 200
    await wait_answer(slack, mention.ts)
    await settle(bot)
    await slack_listeners_done()
    async with httpx.AsyncClient(timeout=GENEROUS_S) as client:
        text = (await client.get(f"http://127.0.0.1:{bot.port}/metrics")).text
    assert 'countersign_decisions_refused_total{reason="not_permitted",tool="http_request"}' in text
    assert 'outcome="rejected",tool="http_request"' in text
    assert MARK not in text and "countersign_fake" not in text
    assert target.requests == []

"""Attacks over Slack Socket Mode: disconnect storms, a click delivered twice."""

from __future__ import annotations

import pytest

from adapters.slack import blocks
from tests.e2e.conftest import ALICE, CHANNEL, TEAM
from tests.e2e.slack.test_slack_flow import click, settle, wait_answer, wait_card
from tests.e2e.slack.test_slack_socket_mode import (  # noqa: F401 - fixtures, found by pytest by name
    _is_ready,
    bot,
    events,
    settings,
)
from tests.support.barriers import GENEROUS_S, wait_until, wait_until_async

pytestmark = pytest.mark.e2e


async def test_a_storm_of_disconnects_leaves_one_socket_and_every_mention_answered_once(bot, events, slack):  # noqa: F811
    """Ten `disconnect`s in a row on whatever socket is open: the bot ends with one open socket, ready, answering once."""
    for _ in range(10):
        await slack.socket.send_disconnect()
        await slack.socket.wait_connected(timeout=GENEROUS_S)
    await wait_until(lambda: sum(c.open for c in slack.socket.connections) <= 1, "old sockets closed", GENEROUS_S)
    await wait_until_async(lambda: _is_ready(bot), "ready after the storm")
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> after the storm")
    assert await wait_answer(slack, mention.ts, starts="You said") == ["You said: after the storm"]
    await settle(bot)
    assert len(slack.socket.acks_of(mention.envelope_id)) == 1
    assert sum(c.open for c in slack.socket.connections) == 1


async def test_an_approve_click_delivered_twice_is_applied_once(bot, events, slack, target):  # noqa: F811
    """The same interactive envelope's payload sent twice (two envelopes): one decision, one request, one answer."""
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> post widget")
    [card] = await wait_card(slack)
    first = await click(events, slack, ALICE, blocks.ACTION_APPROVE, card)
    [sent] = slack.socket.sent(first.envelope_id)
    again = await slack.socket.deliver("interactive", sent.payload, timeout=GENEROUS_S)
    await slack.socket.wait_acked(again.envelope_id, timeout=GENEROUS_S)
    await wait_answer(slack, mention.ts, starts="Result")
    await settle(bot)
    assert [r.json for r in target.requests] == [{"name": "widget"}]
    assert bot.runtime is not None
    pool = bot.runtime.database.pool
    assert await pool.fetchval("SELECT count(*) FROM audit_log WHERE kind = 'decision'") == 1


async def test_a_click_on_an_unknown_approval_over_the_socket_is_refused_to_the_clicker(bot, events, slack, target):  # noqa: F811
    """An interactive envelope naming an approval id nobody issued: acked, the clicker told, nothing changes."""
    payload = {
        "type": "block_actions",
        "team": {"id": TEAM},
        "user": {"id": ALICE, "team_id": TEAM},
        "channel": {"id": CHANNEL},
        "trigger_id": slack.new_trigger_id(),
        "actions": [{"action_id": blocks.ACTION_APPROVE, "value": "f" * 32, "block_id": "x", "type": "button"}],
    }
    sent = await slack.socket.deliver("interactive", payload, timeout=GENEROUS_S)
    await slack.socket.wait_acked(sent.envelope_id, timeout=GENEROUS_S)
    [notice] = await slack.wait_for("chat.postEphemeral", lambda a: a.get("user") == ALICE, timeout=GENEROUS_S)
    assert "can't find this approval" in notice.args["text"]
    await settle(bot)
    assert target.requests == []
    assert bot.runtime is not None
    assert await bot.runtime.database.pool.fetchval("SELECT count(*) FROM audit_log WHERE kind = 'decision'") == 0

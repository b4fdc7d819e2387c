"""Attacks on Approve all / Reject all (docs/decisions/0023) beside Stop, stale cards and other workspaces.

The real Bolt app against the Slack stand-in; alice asks for "batch widget", whose answer calls
`http_request` (a POST, reviewed) and `calculator` (reviewed here with `policy calculator
review`): one pause of two calls, whose first card carries Approve all / Reject all. What must
hold: a batch racing a Stop decides each call once (approved or stopped) and, once any call of
the turn is stopped, runs none of them; a batch from a card drawn before one of its calls was
decided decides only what is still pending and says so; a click from another workspace (a Slack
Connect channel, say) decides nothing, trusts nothing and stops nothing.
"""

from __future__ import annotations

import asyncio

import pytest

from adapters.slack import blocks
from countersign.server import BotServer
from tests.adversarial.slack_support import db_rows, ephemerals_to, runtime_of
from tests.e2e import conftest as c
from tests.e2e.drivers import CardHandle, SlackDriver
from tests.support.barriers import wait_until_async

pytestmark = pytest.mark.e2e


async def _idle(bot: BotServer, thread_id: str) -> None:
    """Wait until the conversation's turn is over: nothing pending, every pause done, no run under way."""

    async def over() -> bool:
        pool = runtime_of(bot).database.pool
        busy = await pool.fetchval(
            """SELECT (SELECT count(*) FROM approvals WHERE thread_id = $1 AND status = 'pending')
                    + (SELECT count(*) FROM reviews WHERE thread_id = $1 AND status <> 'done')
                    + (SELECT count(*) FROM conversations WHERE thread_id = $1 AND running_since IS NOT NULL)""",
            thread_id,
        )
        return busy == 0

    await wait_until_async(over, f"the turn of {thread_id} ending")
    await runtime_of(bot).service.tasks.join()


async def _pause(driver: SlackDriver, bot: BotServer, name: str, cards_before: int) -> tuple[CardHandle, str]:
    """alice asks for `batch <name>`: its first card (with the batch) and the conversation's thread id."""
    await driver.ask("alice", f"batch {name}")
    first, _ = (await driver.cards(count=cards_before + 2))[-2:]
    await driver.settle()
    assert driver.has_batch(first)
    [row] = await db_rows(bot, "SELECT thread_id FROM approvals WHERE id = $1", first.approval_id)
    return first, str(row["thread_id"])


async def test_approve_all_racing_a_stop_decides_each_call_once_and_a_stopped_turn_runs_nothing(
    bot, events, slack, target
):
    """alice clicks Approve all while carol (an admin) types `/countersign stop`, three times over. Whoever wins each
    call, it is decided exactly once (one `decision` row, approved or stopped), nothing stays pending, and a turn of
    which any call was stopped runs none of its calls: the calls the batch approved first do not start either
    (decision 0021: a stopped turn starts no call)."""
    driver = SlackDriver(bot, events, slack)
    await driver.command("carol", "policy", tool="calculator", mode="review")
    for round_ in range(3):
        first, thread_id = await _pause(driver, bot, f"w{round_}", cards_before=2 * round_)
        told, stop = await asyncio.gather(driver.approve_all(first, "alice"), driver.stop_command("carol"))
        await _idle(bot, thread_id)
        rows = await db_rows(bot, "SELECT id, status FROM approvals WHERE thread_id = $1 ORDER BY position", thread_id)
        statuses = [row["status"] for row in rows]
        assert set(statuses) <= {"approved", "stopped"}, statuses
        decisions = await db_rows(
            bot,
            "SELECT approval_id, outcome FROM audit_log WHERE kind = 'decision' AND approval_id IS NOT NULL "
            "AND thread_id = $1",
            thread_id,
        )
        assert sorted((d["approval_id"], d["outcome"]) for d in decisions) == sorted(
            (row["id"], row["status"]) for row in rows
        ), "a call decided twice, or decided without its audit row"
        runs = await db_rows(bot, "SELECT tool_name FROM tool_runs WHERE thread_id = $1", thread_id)
        if "stopped" in statuses:
            assert runs == [], f"a stopped turn ran {runs} (statuses {statuses})"
            assert stop.startswith("Stopped."), stop
        else:  # the batch decided both first; the stop came while the turn resumed, or after it ended
            assert len(runs) <= 2 and {r["tool_name"] for r in runs} <= {"calculator", "http_request"}, runs
            assert "Approved: `http_request` (call 1), `calculator` (call 2)" in told, told
    assert len(target.requests) <= 3
    # The conversation stays usable after whatever happened.
    await driver.ask("alice", "hello")
    assert await driver.answer("You said: hello")


async def test_approve_all_from_a_card_drawn_before_a_call_was_decided_decides_only_what_is_left(
    bot, events, slack, target
):
    """bob (an approver of `calculator` only) approves call 2 on its own card; the first card is redrawn without the
    batch, but alice still holds the old one and clicks its Approve all (a stale client, or a replayed click). Call 1
    is approved, call 2 is reported as decided before; each tool runs once, one answer, two decision rows."""
    driver = SlackDriver(bot, events, slack)
    await driver.command("carol", "policy", tool="calculator", mode="review")
    await driver.command("carol", "approvers", action="add", user="bob", tool="calculator")
    first, thread_id = await _pause(driver, bot, "widget", cards_before=0)
    [second] = [card for card in await driver.cards(count=2) if card.approval_id != first.approval_id]
    stale = driver._batch_block(first)
    assert stale is not None
    await driver.approve(second, "bob")
    assert not driver.has_batch(first)  # redrawn: one call left, no batch
    before = len(ephemerals_to(slack, c.ALICE))
    await events.block_actions(
        c.ALICE,
        first.channel,
        first.message,
        blocks.ACTION_APPROVE_ALL,
        stale["elements"][0]["value"],
        slack.new_trigger_id(),
        block_id=stale["block_id"],
        thread_ts=first.thread,
    )
    calls = await slack.wait_for("chat.postEphemeral", lambda a: a.get("user") == c.ALICE, count=before + 1)
    told = str(calls[-1].args["text"])
    assert "Approved: `http_request` (call 1)" in told, told
    assert "Already decided before your click: `calculator` (call 2)" in told, told
    answer = await driver.answer()
    await _idle(bot, thread_id)
    assert '"name": "calculator"' in answer and '"name": "http_request"' in answer, answer
    assert len(target.requests) == 1
    runs = await db_rows(bot, "SELECT tool_name FROM tool_runs WHERE thread_id = $1 ORDER BY tool_name", thread_id)
    assert [r["tool_name"] for r in runs] == ["calculator", "http_request"]
    decisions = await db_rows(
        bot, "SELECT actor_id, outcome FROM audit_log WHERE kind = 'decision' AND thread_id = $1 ORDER BY id", thread_id
    )
    assert [(d["actor_id"], d["outcome"]) for d in decisions] == [(c.BOB, "approved"), (c.ALICE, "approved")]
    assert len([x for x in slack.calls_to("chat.postMessage") if str(x.args.get("text", "")).startswith("Result")]) == 1


async def test_a_click_from_another_workspace_decides_trusts_and_stops_nothing(bot, events, slack, target):
    """Mallory, of workspace T2, sees T1's cards in a shared channel (Slack Connect) and clicks Approve all, Reject
    all, Approve and trust, and a Stop naming the turn. Each is refused in words; no call is decided, no trust is
    granted, the turn is not stopped; then alice decides her pause as usual and both calls run."""
    driver = SlackDriver(bot, events, slack)
    slack.add_user("UMALLORY", "mallory")
    await driver.command("carol", "policy", tool="calculator", mode="review")
    url = slack.new_response_url(c.CHANNEL, user=c.CAROL)
    await events.slash_command("/countersign", "trust http_request up-to 30m", c.CAROL, c.CHANNEL, url)
    await slack.wait_for("response_url", lambda a: "trust" in str(a.get("text", "")).lower())
    first, thread_id = await _pause(driver, bot, "widget", cards_before=0)
    block = driver._batch_block(first)
    assert block is not None
    [turn] = await db_rows(bot, "SELECT turn_id FROM conversations WHERE thread_id = $1", thread_id)
    clicks = [
        (blocks.ACTION_APPROVE_ALL, block["elements"][0]["value"], block["block_id"]),
        (blocks.ACTION_REJECT_ALL, block["elements"][1]["value"], block["block_id"]),
        (blocks.ACTION_TRUST, first.approval_id, "b"),
        (blocks.ACTION_STOP, turn["turn_id"], blocks.STOP_BLOCK),
    ]
    events.team_id = "T2"
    try:
        for count, (action, value, block_id) in enumerate(clicks, start=1):
            await events.block_actions(
                "UMALLORY",
                first.channel,
                first.message,
                action,
                value,
                slack.new_trigger_id(),
                block_id=block_id,
                thread_ts=first.thread,
            )
            await slack.wait_for("chat.postEphemeral", lambda a: a.get("user") == "UMALLORY", count=count)
    finally:
        events.team_id = c.TEAM
    await driver.settle()
    told = ephemerals_to(slack, "UMALLORY")
    assert len(told) == 4, told
    assert not any(t.startswith(("✅", ":white_check_mark:", "Stopped", "Stopping")) for t in told), told
    assert slack.calls_to("views.open") == [], "the Reject all form opened for another workspace"
    statuses = await db_rows(bot, "SELECT status FROM approvals WHERE thread_id = $1", thread_id)
    assert [s["status"] for s in statuses] == ["pending", "pending"]
    assert await db_rows(bot, "SELECT voter_id FROM approval_votes") == []
    assert await db_rows(bot, "SELECT id FROM trust_grants") == []
    [turn_now] = await db_rows(bot, "SELECT stop_requested_at FROM conversations WHERE thread_id = $1", thread_id)
    assert turn_now["stop_requested_at"] is None
    refused = await db_rows(bot, "SELECT actor_id, reason FROM audit_log WHERE kind = 'refused' ORDER BY id")
    assert refused and {r["actor_id"] for r in refused} == {"UMALLORY"}
    assert {r["reason"] for r in refused} == {"other_workspace"}, refused
    assert target.requests == []
    told_alice = await driver.approve_all(first, "alice")
    assert "Approved: `http_request` (call 1), `calculator` (call 2)" in told_alice, told_alice
    await driver.answer()
    await _idle(bot, thread_id)
    assert len(target.requests) == 1

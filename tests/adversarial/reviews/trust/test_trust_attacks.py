"""Attacks on Trust for a while (docs/decisions/0022): a trust click racing a Stop, and look-alike arguments.

The real Bolt app against the Slack stand-in. carol (an admin) lets `http_request` be trusted
for up to 30 minutes, binding every argument; alice asks for "post <name>" (a reviewed POST to
the HTTP target). What must hold: a trust click that loses to a Stop grants nothing (the grant
is made only by the vote that approves the card, in its transaction); and a grant covers a
later call exactly when that call is the same request (a URL spelled otherwise, which the tool
sends to the same place, is the same call; a value differing in case, whitespace or type is
not, and waits for a card).
"""

from __future__ import annotations

import asyncio

import pytest

from adapters.slack import blocks
from countersign.server import BotServer
from tests.adversarial.conftest import ModelRules
from tests.adversarial.slack_support import db_rows, runtime_of
from tests.e2e import conftest as c
from tests.e2e.drivers import SlackDriver
from tests.standins.gemini import call
from tests.support.barriers import wait_until_async
from tests.support.http_target import HttpTarget

pytestmark = pytest.mark.e2e


async def _allow_trust(driver: SlackDriver) -> None:
    url = driver.slack.new_response_url(c.CHANNEL, user=c.CAROL)
    before = len(driver.slack.calls_to("response_url"))
    await driver.events.slash_command("/countersign", "trust http_request up-to 30m", c.CAROL, c.CHANNEL, url)
    [*_, reply] = await driver.slack.wait_for("response_url", count=before + 1)
    assert "trust" in str(reply.args.get("text", "")).lower(), reply.args


async def _idle(bot: BotServer) -> None:
    """Wait until no turn is at work anywhere: nothing pending, every pause done, no run under way."""

    async def over() -> bool:
        busy = await runtime_of(bot).database.pool.fetchval(
            """SELECT (SELECT count(*) FROM approvals WHERE status = 'pending')
                    + (SELECT count(*) FROM reviews WHERE status <> 'done')
                    + (SELECT count(*) FROM conversations WHERE running_since IS NOT NULL)"""
        )
        return busy == 0

    await wait_until_async(over, "every turn ending")
    await runtime_of(bot).service.tasks.join()


async def test_a_trust_click_that_loses_to_a_stop_grants_nothing(bot, events, slack, target):
    """alice clicks "Approve and trust" while carol types `/countersign stop`, four times over. A card the stop closed
    carries no vote and made no grant (no `trust_granted` row), and its request never ran; a card the trust click won
    made exactly one grant, bound to that card. Either way exactly one `decision` row per card."""
    driver = SlackDriver(bot, events, slack)
    await _allow_trust(driver)
    seen = set()
    for round_ in range(4):
        await driver.ask("alice", f"post w{round_}")
        [*_, card] = await driver.cards(count=round_ + 1)
        await driver.settle()
        runs_before = len(target.requests)
        _, stop = await asyncio.gather(driver._click(card, "alice", blocks.ACTION_TRUST), driver.stop_command("carol"))
        await _idle(bot)
        [row] = await db_rows(bot, "SELECT status FROM approvals WHERE id = $1", card.approval_id)
        grants = await db_rows(bot, "SELECT id FROM trust_grants WHERE approval_id = $1", card.approval_id)
        granted = await db_rows(
            bot,
            "SELECT id FROM audit_log WHERE approval_id = $1 AND outcome = 'trust_granted'",
            card.approval_id,
        )
        decisions = await db_rows(
            bot, "SELECT outcome FROM audit_log WHERE kind = 'decision' AND approval_id = $1", card.approval_id
        )
        assert [d["outcome"] for d in decisions if d["outcome"] != "trust_granted"] == [row["status"]], decisions
        if row["status"] == "stopped":
            assert grants == [] and granted == [], (grants, granted)
            assert (
                await db_rows(bot, "SELECT voter_id FROM approval_votes WHERE approval_id = $1", card.approval_id) == []
            )
            assert len(target.requests) == runs_before
            assert stop.startswith("Stopped. 1 card"), stop
        else:
            assert row["status"] == "approved", row
            assert len(grants) == 1 and len(granted) == 1, (grants, granted)
        seen.add(row["status"])
    assert seen <= {"approved", "stopped"}


async def test_a_grant_covers_the_same_request_however_spelled_and_nothing_that_only_looks_alike(
    bot, events, slack, target: HttpTarget, model_rules: ModelRules
):
    """A grant binding every argument of `POST http://127.0.0.1:<port>/things {"name": "widget"}`: the same request
    with its URL written otherwise (scheme case, a dot segment, a fragment, surrounding blanks) and the method in
    lower case runs without a card, and the target gets the request as approved. A body whose value differs only
    in case, in a trailing blank or in its type (a list, the JSON as a string), or a path in another case, is
    another call: each waits for a card and runs nothing."""
    driver = SlackDriver(bot, events, slack)
    await _allow_trust(driver)
    respelled = f"  HTTP://{target.host}/a/../things#top "
    model_rules.on("respelled", call("http_request", {"method": "post", "url": respelled, "body": {"name": "widget"}}))
    alike = {
        "upper": {"method": "POST", "url": target.url(), "body": {"name": "Widget"}},
        "blank": {"method": "POST", "url": target.url(), "body": {"name": "widget "}},
        "listed": {"method": "POST", "url": target.url(), "body": {"name": ["widget"]}},
        "string": {"method": "POST", "url": target.url(), "body": '{"name": "widget"}'},
        "path": {"method": "POST", "url": target.url("/Things"), "body": {"name": "widget"}},
    }
    for said, args in alike.items():
        model_rules.on(said, call("http_request", args))
    await driver.ask("alice", "post widget")
    [card] = await driver.cards()
    await driver.settle()
    updates = driver._updates(card)
    await driver._click(card, "alice", blocks.ACTION_TRUST)
    await slack.wait_for("chat.update", lambda a: a.get("ts") == card.message, count=updates + 1)
    await driver.answer()
    await _idle(bot)
    [grant] = await db_rows(bot, "SELECT matched FROM trust_grants")
    assert len(target.requests) == 1

    await driver.say("alice", "respelled")
    await driver.answer(count=2)
    await _idle(bot)
    assert len(target.requests) == 2, "the respelled request did not run under the trust"
    sent = target.requests[-1]
    assert (sent.method, sent.path, sent.json) == ("POST", "/things", {"name": "widget"})
    assert len(await driver.cards()) == 1
    [trusted] = await db_rows(bot, "SELECT proposed_args FROM audit_log WHERE outcome = 'trusted'")
    assert trusted["proposed_args"] == grant["matched"]  # the request that ran is, to the letter, the one trusted

    for number, said in enumerate(alike, start=2):
        await driver.say("alice", said)
        await driver.cards(count=number)
        await driver.settle()
        assert len(target.requests) == 2, f"{said!r} ran under a trust for another request"
        assert (await driver.stop_command("alice")).startswith("Stopped. 1 card"), said
        await _idle(bot)
    assert len(target.requests) == 2
    assert len(await db_rows(bot, "SELECT id FROM audit_log WHERE outcome = 'trusted'")) == 1

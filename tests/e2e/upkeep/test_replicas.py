"""Two bots on one database, Slack requests alternated between them (docs/decisions/0009; workers, docs/decisions/0017).

Events of one conversation are serialized, a click handled by either applies once, expiry fires
once, and work a killed replica left is finished once by the other. Every test runs twice: with
two `countersign run` processes on their own ports, and with one `countersign run --workers 2`
whose workers share a port (a request meant for worker i goes on a connection worker i serves;
a killed worker is restarted by the supervisor).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import asyncpg
import psutil
import pytest

from adapters.slack import blocks
from tests.e2e.cli.test_process import bot_env
from tests.e2e.conftest import ALICE, BOB, CAROL, CHANNEL, SIGNING_SECRET, TEAM
from tests.e2e.upkeep.test_crash_stages import BOT_USER, GatedModel, wait_until
from tests.standins.gemini import GeminiStandIn
from tests.support.bot_process import free_port
from tests.support.replicas import (
    WAIT_S,
    Cluster,
    Replicas,
    Workers,
    bot_texts,
    cards_in,
    ephemerals_to,
    eventually,
)

pytestmark = pytest.mark.e2e


@pytest.fixture
async def model(target) -> AsyncIterator[tuple[GatedModel, GeminiStandIn]]:
    gated = GatedModel(target.url())
    async with GeminiStandIn(gated, api_key="e2e-gemini-key") as server:
        yield gated, server


@pytest.fixture(params=["processes", "workers"])
async def replicas(request, db_url, model, slack, target, tmp_path) -> AsyncIterator[Cluster]:
    """Two bots on `db_url`: two processes on their own ports, or two workers of one process on one port."""
    _, gemini = model
    pair: Cluster
    if request.param == "processes":
        pair = Replicas(
            lambda port: bot_env(gemini, slack, target, port, DATABASE_URL=db_url),
            tmp_path,
            signing_secret=SIGNING_SECRET,
            team_id=TEAM,
            count=2,
        )
    else:
        port = free_port()
        pair = Workers(
            bot_env(gemini, slack, target, port, DATABASE_URL=db_url),
            port,
            tmp_path,
            signing_secret=SIGNING_SECRET,
            team_id=TEAM,
            count=2,
        )
    try:
        await pair.start()
    except BaseException:
        await pair.stop()  # the bots that did start
        raise
    try:
        yield pair
    finally:
        codes = await pair.stop()
        assert set(codes) <= {0}, pair.stderr()
        assert "Traceback" not in pair.stderr()


def holds_a_connection_to(pid: int, port: int) -> bool:
    """Whether process `pid` has an open TCP connection to 127.0.0.1:`port` (its request is in flight)."""
    return any(
        c.raddr and c.raddr.port == port and c.status == psutil.CONN_ESTABLISHED
        for c in psutil.Process(pid).net_connections(kind="tcp")
    )


async def test_messages_of_one_conversation_are_handled_in_turn_across_replicas(replicas, model, slack):
    """A reply reaching the other replica while the first turn runs waits for it; the model sees both in order."""
    gated, gemini = model
    gated.before_call.arm()
    thread = await replicas.mention(CHANNEL, ALICE, "<@UBOT> first", prefer=0)
    await gated.before_call.wait_arrived(WAIT_S)
    await replicas.reply(CHANNEL, ALICE, "second", thread, prefer=1)
    assert replicas.served == [0, 1]
    gated.before_call.release()
    await wait_until(
        slack, lambda: "You said: second" in bot_texts(slack, CHANNEL, thread, BOT_USER), "second answer", replicas
    )
    assert bot_texts(slack, CHANNEL, thread, BOT_USER) == ["You said: first", "You said: second"]
    last = gemini.requests[-1]
    assert last.last_user_text == "second" and "You said: first" in json.dumps(last.body)


async def test_a_double_click_on_both_replicas_applies_once(replicas, slack, target):
    """Approve sent to both replicas at once, by two people: one decision, one request, the other told."""
    thread = await replicas.mention(CHANNEL, ALICE, "<@UBOT> post widget")
    await wait_until(slack, lambda: bool(cards_in(slack, CHANNEL, thread)), "card", replicas)
    [card] = cards_in(slack, CHANNEL, thread)
    first, second = await asyncio.gather(
        replicas.click(slack, ALICE, card, prefer=0), replicas.click(slack, CAROL, card, prefer=1)
    )
    assert first.status == second.status == 200
    assert replicas.served[-2:] in ([0, 1], [1, 0])
    await wait_until(
        slack,
        lambda: any(t.startswith("Result: ") for t in bot_texts(slack, CHANNEL, thread, BOT_USER)),
        "answer",
        replicas,
    )
    await slack.wait_for("chat.postEphemeral", lambda a: "already" in str(a.get("text", "")).lower(), timeout=WAIT_S)
    assert [r.json for r in target.requests] == [{"name": "widget"}]
    told = [*ephemerals_to(slack, CHANNEL, ALICE), *ephemerals_to(slack, CHANNEL, CAROL)]
    assert sum("already" in str(m.get("text", "")).lower() for m in told) == 1


async def test_expiry_fires_once_with_two_sweepers(replicas, slack, target, db_url):
    """Both replicas' sweepers see the due card: it expires once (one notice, one audit row), nothing runs."""
    response_url = slack.new_response_url(CHANNEL, user=CAROL)
    await replicas.send(
        lambda events: events.slash_command(
            "/countersign", "expiry 10s for http_request", CAROL, CHANNEL, response_url
        ),
        prefer=0,
    )
    thread = await replicas.mention(CHANNEL, BOB, "<@UBOT> post widget", prefer=1)
    await wait_until(slack, lambda: bool(cards_in(slack, CHANNEL, thread)), "card", replicas)
    [card] = cards_in(slack, CHANNEL, thread)
    await wait_until(
        slack,
        lambda: any(t.startswith("Result: ") for t in bot_texts(slack, CHANNEL, thread, BOT_USER)),
        "answer",
        replicas,
    )
    assert replicas.live() == [0, 1], "a sweeper died: the test would prove nothing about two"
    connection = await asyncpg.connect(db_url)
    try:
        expiries = await connection.fetchval("SELECT count(*) FROM audit_log WHERE kind = 'expiry'")
    finally:
        await connection.close()
    assert expiries == 1
    assert target.requests == []
    expired = [m for m in ephemerals_to(slack, CHANNEL, BOB) if "expired" in str(m.get("text", "")).lower()]
    assert len(expired) == 1
    assert blocks.ACTION_APPROVE not in json.dumps(slack.message(card.channel, card.ts)["blocks"])


async def test_work_a_killed_replica_left_is_finished_once(replicas, slack, target, db_url):
    """Replica 0 dies while the approved tool runs; it comes back while replica 1 is up: the turn is finished once.

    With workers, worker 0 is killed and the supervisor restarts it.
    """
    thread = await replicas.mention(CHANNEL, ALICE, "<@UBOT> post widget", prefer=0)
    await wait_until(slack, lambda: bool(cards_in(slack, CHANNEL, thread)), "card", replicas)
    [card] = cards_in(slack, CHANNEL, thread)
    target.gate.arm()
    assert (await replicas.click(slack, ALICE, card, prefer=0)).status == 200
    await target.gate.wait_arrived(WAIT_S)
    assert holds_a_connection_to(replicas.pid(0), target.port), "replica 0 is not the one running the tool"
    assert not holds_a_connection_to(replicas.pid(1), target.port), "replica 1 is running the tool too"
    await replicas.kill(0)
    target.gate.release()
    await replicas.start(0)
    await wait_until(
        slack,
        lambda: any(t.startswith("Result: ") for t in bot_texts(slack, CHANNEL, thread, BOT_USER)),
        "answer",
        replicas,
    )
    connection = await asyncpg.connect(db_url)
    try:

        async def nothing_left() -> bool:  # for either replica to do again (written just after the answer)
            unfinished = await connection.fetchval("SELECT count(*) FROM conversations WHERE running_since IS NOT NULL")
            resuming = await connection.fetchval("SELECT count(*) FROM reviews WHERE status <> 'done'")
            return unfinished == 0 and resuming == 0

        await eventually(nothing_left, "finishing the bookkeeping")
    finally:
        await connection.close()
    assert len(target.requests) == 1
    assert sum(t.startswith("Result: ") for t in bot_texts(slack, CHANNEL, thread, BOT_USER)) == 1

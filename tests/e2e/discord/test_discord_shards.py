"""Discord's shards split over two worker processes, against the Discord stand-in.

`countersign run --workers 2` with only Discord configured: the supervisor asks the stand-in's
`GET /gateway/bot` (it recommends 1 shard, `max_concurrency` 1), runs 2 shards (one per worker)
and gives worker 0 shard 0 and worker 1 shard 1. The stand-in routes each guild's events to the
session whose shard is `(guild_id >> 22) % 2` and DMs to shard 0 (Discord's Gateway docs,
"Sharding"), and keeps when each IDENTIFY arrived.
"""

from __future__ import annotations

import os
import re
import signal
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import httpx
import pytest

from tests.e2e.cli.test_workers import worker_pids
from tests.e2e.conftest import D_ALICE, D_APP, D_BOT, D_GUILD, D_OWNER, DISCORD_TOKEN, PLATFORM_DEADLINE_S
from tests.e2e.discord.test_discord_flow import Card, current_custom_id
from tests.e2e.drivers import is_discord_card
from tests.support.barriers import wait_until, wait_until_async
from tests.support.bot_process import BotProcess, base_env, free_port

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(4 * 180)]  # START_S waits, on a busy machine

GUILD_0 = D_GUILD  # (D_GUILD >> 22) % 2 == 0
GUILD_1 = D_GUILD + (1 << 22)  # the next shard
CHANNEL_0 = 1_600_000_000_000_000_110
CHANNEL_1 = 1_600_000_000_000_000_120
START_S = 180.0
"""Two workers, each importing the whole bot, on a busy two-core machine, spaced IDENTIFYs."""


def shard_of(guild_id: int, count: int = 2) -> int:
    return (guild_id >> 22) % count


@pytest.fixture
async def sharded_api() -> AsyncIterator[Any]:
    from tests.standins.discord_api import DiscordStandIn, make_member, make_text_channel, make_user

    assert shard_of(GUILD_0) == 0 and shard_of(GUILD_1) == 1
    async with DiscordStandIn(
        bot_token=DISCORD_TOKEN,
        application_id=D_APP,
        bot_user_id=D_BOT,
        interaction_response_timeout=PLATFORM_DEADLINE_S,
        shards=1,
        max_concurrency=1,
    ) as api:
        for guild, channel in ((GUILD_0, CHANNEL_0), (GUILD_1, CHANNEL_1)):
            api.add_guild(
                guild,
                f"guild on shard {shard_of(guild)}",
                owner_id=D_OWNER,
                channels=[make_text_channel(channel, "general")],
                members=[make_member(make_user(D_OWNER, "owner")), make_member(make_user(D_ALICE, "alice"))],
            )
        yield api


def discord_env(gemini, target, api, port: int, db_url: str) -> dict[str, str]:
    return base_env(
        GOOGLE_API_KEY="e2e-gemini-key",
        GEMINI_BASE_URL=gemini.base_url,
        GEMINI_RETRY_INITIAL_DELAY="0.01",
        DISCORD_TOKEN=DISCORD_TOKEN,
        DISCORD_API_URL=api.api_url,
        DISCORD_GUILD_READY_TIMEOUT="0.05",
        HTTP_REQUEST_ALLOWED_HOSTS=target.host,
        PORT=str(port),
        HOST="127.0.0.1",
        DATABASE_URL=db_url,
        COUNTERSIGN_WORKERS="2",
    )


async def mention(api, guild: int, channel: int, text: str) -> dict[str, Any]:
    return await api.send_message(channel, D_ALICE, f"<@{D_BOT}> {text}", mentions=[D_BOT], guild_id=guild)


async def answers(api, channel: int | str, starts: str) -> list[str]:
    try:
        posts = await api.wait_for_request(
            "POST",
            rf"/channels/{channel}/messages$",
            lambda r: str((r.json or {}).get("content", "")).startswith(starts),
            timeout=60,
        )
    except TimeoutError as exc:
        said = [m.get("content") for m in api.messages(channel, include_others=True)]
        raise AssertionError(f"{exc}; the channel holds {said}") from None
    return [p.json["content"] for p in posts]


async def card_in(api, channel: int) -> Card:
    [post] = await api.wait_for_request("POST", rf"/channels/{channel}/messages$", is_discord_card, timeout=60)
    ids = [c["custom_id"] for row in post.json["components"] for c in row["components"]]
    return Card(channel, post.response["id"], ids[0].split(":")[2], ids)


def sessions_that_got(api, event: str, message_id: str) -> set[tuple[int, str]]:
    """(shard id, session id) of every session the stand-in sent `event` about `message_id`."""
    return {(d.shard[0], d.session_id) for d in api.dispatched(event) if str(d.data.get("id")) == message_id}


async def approve(api, card: Card, guild: int) -> Any:
    interaction = await api.click_button(
        card.message_id,
        current_custom_id(api, card.message_id, "approve"),
        D_ALICE,
        guild_id=guild,
        channel_id=card.channel,
    )
    await api.wait_for_request("POST", rf"/interactions/{interaction.id}/[^/]+/callback", timeout=60)
    return interaction


async def turns_at_rest(db_url: str) -> None:
    """Wait until no turn runs and the card's approval is pending in the database."""

    async def at_rest() -> bool:
        connection = await asyncpg.connect(db_url)
        try:
            running = await connection.fetchval("SELECT count(*) FROM conversations WHERE running_since IS NOT NULL")
            pending = await connection.fetchval(
                "SELECT count(*) FROM approvals WHERE status = 'pending' AND card_ref IS NOT NULL"
            )
        finally:
            await connection.close()
        return running == 0 and pending == 1

    await wait_until_async(at_rest, "the turn that posted the card finished", timeout=START_S)


async def start_two_workers(gemini, target, api, db_url, tmp_path) -> tuple[BotProcess, int, dict[int, str]]:
    port = free_port()
    bot = await BotProcess(discord_env(gemini, target, api, port, db_url), tmp_path).start()
    await bot.wait_healthy(port, timeout=START_S)
    sessions = await api.wait_for_shards([0, 1], timeout=START_S)
    return bot, port, sessions


async def test_each_worker_serves_the_guilds_of_its_shard(db_url, gemini, target, sharded_api, tmp_path):
    """Two workers, two shards: each guild's messages reach only its shard's session and are answered; a card is approved once; a DM goes to shard 0; IDENTIFYs of one bucket are 5 s apart."""
    api = sharded_api
    bot, _, sessions = await start_two_workers(gemini, target, api, db_url, tmp_path)
    try:
        err = bot.stderr.decode()
        assert "worker 0 runs Discord shards 0 of 2" in err and "worker 1 runs Discord shards 1 of 2" in err, err
        assert sorted(tuple(i["shard"]) for i in api.identifies) == [(0, 2), (1, 2)]

        first = await mention(api, GUILD_0, CHANNEL_0, "hello zero")
        second = await mention(api, GUILD_1, CHANNEL_1, "hello one")
        assert await answers(api, CHANNEL_0, "You said: hello zero") == ["You said: hello zero"]
        assert await answers(api, CHANNEL_1, "You said: hello one") == ["You said: hello one"]
        assert sessions_that_got(api, "MESSAGE_CREATE", first["id"]) == {(0, sessions[0])}
        assert sessions_that_got(api, "MESSAGE_CREATE", second["id"]) == {(1, sessions[1])}

        await mention(api, GUILD_1, CHANNEL_1, "post widget")
        card = await card_in(api, CHANNEL_1)
        click = await approve(api, card, GUILD_1)
        assert {d.shard[0] for d in api.dispatched("INTERACTION_CREATE") if d.data["id"] == click.id} == {1}
        [answer] = await answers(api, CHANNEL_1, "Result: ")
        assert "widget" in answer
        assert [r.json for r in target.requests] == [{"name": "widget"}]

        dm = await api.send_dm(D_ALICE, "hello dm")
        assert await answers(api, dm["channel_id"], "You said: hello dm") == ["You said: hello dm"]
        assert sessions_that_got(api, "MESSAGE_CREATE", dm["id"]) == {(0, sessions[0])}

        gap = api.shortest_identify_gap()
        assert gap is not None and gap >= 5.0, [(r.at, r.shard, r.bucket) for r in api.identify_log]
    finally:
        code = await bot.stop()
    assert code == 0, bot.stderr.decode()
    assert b"Traceback" not in bot.stderr, bot.stderr.decode()


async def test_a_killed_worker_brings_its_shard_back_and_its_card_still_works(
    db_url, gemini, target, sharded_api, tmp_path
):
    """kill -9 on the worker holding shard 1: it is restarted, shard 1 identifies again (5 s after any other), and a card posted before is approved once."""
    api = sharded_api
    bot, _, sessions = await start_two_workers(gemini, target, api, db_url, tmp_path)
    try:
        await mention(api, GUILD_1, CHANNEL_1, "post widget")
        card = await card_in(api, CHANNEL_1)
        await turns_at_rest(db_url)  # the kill is about the shard, not a turn cut short (test_crash_stages)
        [victim] = worker_pids(bot)[1]
        os.kill(victim, signal.SIGKILL)
        await wait_until(lambda: len(worker_pids(bot)[1]) == 2, "worker 1 restarted", timeout=START_S)
        assert re.search(rb"worker 1 \(pid %d\) was killed by signal 9 \(SIGKILL\)" % victim, bot.stderr)
        await wait_until(
            lambda: api.ready_shards().get(1) not in (None, sessions[1]), "shard 1 identified again", timeout=START_S
        )
        assert api.ready_shards()[0] == sessions[0], "shard 0 kept its session"
        assert [tuple(i["shard"]) for i in api.identifies].count((1, 2)) == 2

        click = await approve(api, card, GUILD_1)
        delivered = {
            d.session_id for d in api.dispatched("INTERACTION_CREATE") if d.data["id"] == click.id and d.delivered
        }
        assert delivered == {api.ready_shards()[1]}
        [answer] = await answers(api, CHANNEL_1, "Result: ")
        assert "widget" in answer
        assert [r.json for r in target.requests] == [{"name": "widget"}]
        gap = api.shortest_identify_gap()
        assert gap is not None and gap >= 5.0, [(r.at, r.shard, r.bucket) for r in api.identify_log]
    finally:
        code = await bot.stop()
    assert code == 0, bot.stderr.decode()


async def test_two_replicas_with_their_own_shard_ids_split_the_guilds(db_url, gemini, target, sharded_api, tmp_path):
    """Two `countersign run` (DISCORD_SHARD_COUNT=2, DISCORD_SHARD_IDS=0 / =1, as on two machines): each answers its shard's guild; a third with `none` opens no session and is ready."""
    api = sharded_api
    replicas: list[BotProcess] = []
    try:
        for ids in ("0", "1", "none"):
            port = free_port()
            env = discord_env(gemini, target, api, port, db_url)
            env.update(COUNTERSIGN_WORKERS="1", DISCORD_SHARD_COUNT="2", DISCORD_SHARD_IDS=ids)
            (workdir := tmp_path / f"replica-{ids}").mkdir()
            replica = await BotProcess(env, workdir).start()
            replicas.append(replica)
            await replica.wait_healthy(port, timeout=START_S)
            async with httpx.AsyncClient() as http:
                assert (await http.get(f"http://127.0.0.1:{port}/readyz")).status_code == 200
        sessions = await api.wait_for_shards([0, 1], timeout=START_S)
        assert sorted(tuple(i["shard"]) for i in api.identifies) == [(0, 2), (1, 2)]
        assert b"no gateway session" in replicas[2].stderr

        first = await mention(api, GUILD_0, CHANNEL_0, "hello zero")
        second = await mention(api, GUILD_1, CHANNEL_1, "hello one")
        assert await answers(api, CHANNEL_0, "You said: hello zero") == ["You said: hello zero"]
        assert await answers(api, CHANNEL_1, "You said: hello one") == ["You said: hello one"]
        assert sessions_that_got(api, "MESSAGE_CREATE", first["id"]) == {(0, sessions[0])}
        assert sessions_that_got(api, "MESSAGE_CREATE", second["id"]) == {(1, sessions[1])}
        gap = api.shortest_identify_gap()
        assert gap is not None and gap >= 5.0, [(r.at, r.shard, r.bucket) for r in api.identify_log]
    finally:
        codes = [await replica.stop() for replica in replicas]
    assert codes == [0] * len(replicas), [r.stderr.decode() for r in replicas]


async def test_sigterm_while_a_shard_waits_to_identify_stops_the_process(db_url, gemini, target, sharded_api, tmp_path):
    """One process, DISCORD_SHARD_COUNT=2: SIGTERM after shard 0 connected, while shard 1 waits its 6 s for IDENTIFY, ends the process (discord.py alone would retry shard 1's connection forever)."""
    port = free_port()
    env = {**discord_env(gemini, target, sharded_api, port, db_url), "DISCORD_SHARD_COUNT": "2"}
    del env["COUNTERSIGN_WORKERS"]
    bot = await BotProcess(env, tmp_path).start()
    try:
        await wait_until(lambda: b"Discord shard 0 of 2 connected" in bot.stderr, "shard 0 connected", timeout=60)
        assert b"Countersign is running" not in bot.stderr  # still starting: shard 1 has not identified
    finally:
        code = await bot.stop(timeout=45)  # killed within pytest's 120 s if it hangs, not left running
    err = bot.stderr.decode()
    assert code == 0, err
    assert "stopping during start-up" in err and "Failed to connect" not in err, err
    assert [tuple(i["shard"]) for i in sharded_api.identifies] == [(0, 2)]

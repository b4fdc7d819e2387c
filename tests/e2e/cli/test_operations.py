"""What an operator reads: `GET /metrics` and `GET /readyz`, through the real bot and stand-ins."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from adapters.slack import blocks
from bot.settings import DatabaseSettings
from countersign.probes import CHECK_TIMEOUT_S
from countersign.server import BotServer
from tests.e2e.conftest import ALICE, BOB, CHANNEL, SIGNING_SECRET, TEAM, make_settings
from tests.e2e.slack.test_slack_flow import click, settle, wait_answer, wait_card
from tests.standins.slack_events import SlackEventSender
from tests.support.barriers import wait_until, wait_until_async
from tests.support.postgres import own_embedded, start_embedded_again, stop_embedded

pytestmark = pytest.mark.e2e

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


async def scrape(bot: BotServer) -> Samples:
    """Every sample `/metrics` shows, by name and labels."""
    async with httpx.AsyncClient() as client:
        response = await client.get(f"http://127.0.0.1:{bot.port}/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    samples: Samples = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


async def readiness(bot: BotServer) -> httpx.Response:
    async with httpx.AsyncClient(timeout=30) as client:
        return await client.get(f"http://127.0.0.1:{bot.port}/readyz")


async def test_metrics_count_an_approvals_life(bot, events, slack):
    """Requested, pending, decided (with its latency), a refused second click, the turns and model calls."""
    before = await scrape(bot)
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> post widget")
    [card] = await wait_card(slack)
    waiting = await scrape(bot)
    assert value(waiting, "countersign_approvals_requested_total", tool="http_request") == (
        value(before, "countersign_approvals_requested_total", tool="http_request") + 1
    )
    assert value(waiting, "countersign_pending_approvals") == 1

    await click(events, slack, ALICE, blocks.ACTION_APPROVE, card)
    await wait_answer(slack, mention.ts)
    await settle(bot)
    await click(events, slack, BOB, blocks.ACTION_APPROVE, card)  # too late: refused
    await settle(bot)
    after = await scrape(bot)

    def grew(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert grew("countersign_approvals_decided_total", tool="http_request", outcome="approved") == 1
    assert grew("countersign_decision_seconds_count", tool="http_request") == 1
    assert grew("countersign_approvals_expired_total", tool="http_request") == 0
    assert grew("countersign_decisions_refused_total", tool="http_request", reason="already_decided") == 1
    assert value(after, "countersign_pending_approvals") == 0
    assert grew("countersign_turn_seconds_count", outcome="delivered") == 2  # the card, then the answer
    assert value(after, "countersign_turns_running") == 0
    assert grew("countersign_model_calls_total", outcome="ok") == 2
    assert grew("countersign_platform_ack_seconds_count", platform="slack", kind="event") == 1  # the mention
    assert grew("countersign_platform_ack_seconds_count", platform="slack", kind="interaction") == 2  # two clicks
    assert value(after, "countersign_platform_ack_seconds_bucket", platform="slack", kind="interaction", le="3.0") == (
        value(after, "countersign_platform_ack_seconds_count", platform="slack", kind="interaction")
    )
    # No user text, arguments or ids in any label.
    for _, labels in after:
        for _, label_value in labels:
            assert "widget" not in label_value and ALICE not in label_value and mention.ts not in label_value


async def test_a_failed_slack_call_counts_as_a_platform_api_error(bot, events, slack):
    """Slack refuses the hourglass: the error is counted by method, and the answer still goes out."""
    before = await scrape(bot)
    slack.fail("reactions.add", error="too_many_reactions")
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> hello")
    await wait_answer(slack, mention.ts, starts="You said: hello")
    await settle(bot)
    after = await scrape(bot)
    labels = {"platform": "slack", "method": "reactions.add"}
    assert value(after, "countersign_platform_api_errors_total", **labels) == (
        value(before, "countersign_platform_api_errors_total", **labels) + 1
    )


async def test_readyz_is_ready_with_the_database_and_slack(bot):
    response = await readiness(bot)
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "database": "ok", "platforms": {"SlackAdapter": "connected"}}


async def test_readyz_turns_503_while_the_database_is_down_and_200_when_it_is_back(
    tmp_path: Path, gemini, slack, target
):
    """The bot's own embedded PostgreSQL, stopped for real: readiness fails, liveness does not; then readiness recovers."""
    async with own_embedded(tmp_path / "own") as (embedded, url):
        settings = make_settings(url, gemini, slack, target)
        settings = settings.model_copy(
            update={"database": DatabaseSettings(url=url, pool_max_size=4, connect_timeout_s=2)}
        )
        async with BotServer(settings) as bot:
            assert (await readiness(bot)).status_code == 200
            await stop_embedded(embedded)
            response = await readiness(bot)
            assert response.status_code == 503
            assert response.json()["database"] == "unreachable"
            assert response.json()["platforms"] == {"SlackAdapter": "connected"}
            async with httpx.AsyncClient(timeout=30) as client:
                # Liveness: restarting the process would not bring the database back.
                assert (await client.get(f"http://127.0.0.1:{bot.port}/healthz")).status_code == 200
            await start_embedded_again(embedded)

            async def ready() -> bool:
                return (await readiness(bot)).status_code == 200

            await wait_until_async(ready, "readiness did not come back with the database")


async def test_readyz_stays_200_while_an_mcp_server_is_down_and_metrics_show_it_down(
    tmp_path: Path, db_url, gemini, slack, target
):
    """An MCP server that cannot start: the bot still serves, /readyz is 200, /metrics shows it not connected."""
    config = tmp_path / "mcp.json"
    down = {"command": sys.executable, "args": ["-c", "raise SystemExit(3)"]}
    config.write_text(json.dumps({"mcpServers": {"down": down}}))
    settings = make_settings(db_url, gemini, slack, target)
    settings = settings.model_copy(update={"tools": settings.tools.model_copy(update={"mcp_config": config})})
    async with BotServer(settings) as bot:
        assert bot.runtime is not None
        registry = bot.runtime.registry

        def failed_once() -> bool:
            absent = registry.absent("down__anything")
            return absent is not None and absent.reason != "MCP server 'down' is not connected"

        await wait_until(failed_once, "the MCP server's first failed start")
        response = await readiness(bot)
        assert response.status_code == 200, response.text
        assert response.json() == {"status": "ok", "database": "ok", "platforms": {"SlackAdapter": "connected"}}
        samples = await scrape(bot)
        assert samples[("countersign_mcp_server_connected", frozenset({("server", "down")}))] == 0


async def test_readyz_turns_503_while_discord_is_disconnected(discord_bot, discord_api):
    """The gateway drops and Discord refuses new connections: 503 naming Discord; it resumes: 200."""
    assert (await readiness(discord_bot)).status_code == 200
    discord_api.gateway_down = True
    await discord_api.disconnect_all(4000)

    async def unready() -> bool:
        response = await readiness(discord_bot)
        return response.status_code == 503 and response.json()["platforms"] == {"DiscordAdapter": "disconnected"}

    await wait_until_async(unready, "readiness stayed 200 with the gateway down")
    assert (await readiness(discord_bot)).json()["database"] == "ok"
    discord_api.gateway_down = False

    async def ready() -> bool:
        return (await readiness(discord_bot)).status_code == 200

    await wait_until_async(ready, "readiness did not come back after the gateway did")


async def test_probes_answer_in_time_while_message_intake_holds_every_pool_connection(bot, events, slack):
    """Every connection of the main pool taken: /healthz, /readyz and /metrics still answer within their timeout, rightly."""
    await events.app_mention(CHANNEL, ALICE, "<@UBOT> post widget")
    await wait_card(slack)
    assert bot.runtime is not None
    pool = bot.runtime.database.pool
    held = [await pool.acquire() for _ in range(pool.get_max_size())]
    try:
        async with httpx.AsyncClient(timeout=30) as client:
            answers = {}
            for path in ("/healthz", "/readyz", "/metrics"):
                started = time.monotonic()
                answers[path] = await client.get(f"http://127.0.0.1:{bot.port}{path}")
                assert time.monotonic() - started < CHECK_TIMEOUT_S, path
    finally:
        for connection in held:
            await pool.release(connection)
    assert answers["/healthz"].status_code == 200
    assert answers["/readyz"].status_code == 200, answers["/readyz"].text
    assert answers["/readyz"].json()["database"] == "ok"
    assert answers["/metrics"].status_code == 200
    pending = [
        line for line in answers["/metrics"].text.splitlines() if line.startswith("countersign_pending_approvals ")
    ]
    assert pending == ["countersign_pending_approvals 1.0"]


async def test_metrics_port_serves_the_probes_apart_from_slacks_port(db_url, gemini, slack, target):
    """METRICS_PORT set: /healthz, /readyz and /metrics answer there and are gone from PORT; Slack's events stay on PORT."""
    settings = make_settings(db_url, gemini, slack, target, metrics_port=0)
    async with BotServer(settings) as bot, httpx.AsyncClient(timeout=30) as client:
        assert bot.metrics_port is not None and bot.metrics_port != bot.port
        for path in ("/healthz", "/readyz", "/metrics"):
            assert (await client.get(f"http://127.0.0.1:{bot.metrics_port}{path}")).status_code == 200, path
            assert (await client.get(f"http://127.0.0.1:{bot.port}{path}")).status_code == 404, path
        assert (await client.post(f"http://127.0.0.1:{bot.metrics_port}/slack/events")).status_code == 404
        async with SlackEventSender(
            f"http://127.0.0.1:{bot.port}/slack/events", SIGNING_SECRET, team_id=TEAM
        ) as sender:
            assert (await sender.url_verification()).status == 200

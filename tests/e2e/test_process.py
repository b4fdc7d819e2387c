"""`countersign run` as a separate process: the whole flow, restarts, shutdown, one-line errors."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import psutil
import pytest

from adapters.slack import blocks
from bot.storage.embedded import EmbeddedPostgres
from tests.e2e.conftest import ALICE, BOT_TOKEN, CHANNEL, SIGNING_SECRET, TEAM
from tests.e2e.test_slack_flow import click, wait_answer, wait_card
from tests.standins.slack_events import SlackEventSender
from tests.support.bot_process import BotProcess, base_env, free_port

pytestmark = pytest.mark.e2e


def bot_env(gemini, slack, target, port: int, **extra: str) -> dict[str, str]:
    return base_env(
        GOOGLE_API_KEY="e2e-gemini-key",
        GEMINI_BASE_URL=gemini.base_url,
        GEMINI_RETRY_INITIAL_DELAY="0.01",
        SLACK_BOT_TOKEN=BOT_TOKEN,
        SLACK_SIGNING_SECRET=SIGNING_SECRET,
        SLACK_API_URL=slack.base_url,
        HTTP_REQUEST_ALLOWED_HOSTS=target.host,
        PORT=str(port),
        HOST="127.0.0.1",
        **extra,
    )


async def test_the_whole_flow_across_a_restart_in_separate_processes(db_url, gemini, slack, target, tmp_path):
    """Card from one process, SIGTERM, click served by a new process: one request, answer posted."""
    port = free_port()
    env = bot_env(gemini, slack, target, port, DATABASE_URL=db_url)
    first = await BotProcess(env, tmp_path).start()
    await first.wait_healthy(port)
    async with SlackEventSender(f"http://127.0.0.1:{port}/slack/events", SIGNING_SECRET, team_id=TEAM) as events:
        mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> post widget")
        [card] = await wait_card(slack)
    assert await first.stop() == 0, first.stderr.decode()
    assert b"Traceback" not in first.stderr

    second = await BotProcess(env, tmp_path).start()
    await second.wait_healthy(port)
    async with SlackEventSender(f"http://127.0.0.1:{port}/slack/events", SIGNING_SECRET, team_id=TEAM) as events:
        await click(events, slack, ALICE, blocks.ACTION_APPROVE, card)
        [answer] = await wait_answer(slack, mention.ts)
    assert await second.stop() == 0, second.stderr.decode()
    assert [r.json for r in target.requests] == [{"name": "widget"}]
    assert "widget" in answer
    shown = json.dumps(slack.message(card.channel, card.ts)["blocks"])
    assert "Approved" in shown


def _postmaster_pid(data_dir: Path) -> int | None:
    pid_file = data_dir / "pgdata" / "postmaster.pid"
    return int(pid_file.read_text().split()[0]) if pid_file.exists() else None


async def test_embedded_postgres_starts_with_the_bot_and_stops_with_it(gemini, slack, target, tmp_path):
    """No DATABASE_URL: the data directory is created, the server starts, and SIGTERM stops it."""
    port = free_port()
    data_dir = tmp_path / "data" / "countersign"
    env = bot_env(gemini, slack, target, port, COUNTERSIGN_DATA_DIR=str(data_dir))
    bot = await BotProcess(env, tmp_path).start()
    await bot.wait_healthy(port, timeout=120)
    pid = _postmaster_pid(data_dir)
    assert pid is not None and psutil.pid_exists(pid)
    assert await bot.stop(signal.SIGINT) == 0, bot.stderr.decode()
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


async def test_a_server_already_running_on_the_data_dir_is_reused_and_left_running(gemini, slack, target, tmp_path):
    """When PostgreSQL already runs on the data directory, the bot uses it and does not stop it."""
    data_dir = tmp_path / "shared"
    mine = EmbeddedPostgres(data_dir)
    await mine.start()
    try:
        pid = _postmaster_pid(data_dir)
        port = free_port()
        bot = await BotProcess(
            bot_env(gemini, slack, target, port, COUNTERSIGN_DATA_DIR=str(data_dir)), tmp_path
        ).start()
        await bot.wait_healthy(port, timeout=120)
        assert _postmaster_pid(data_dir) == pid
        assert await bot.stop() == 0, bot.stderr.decode()
        assert pid is not None and psutil.pid_exists(pid)
    finally:
        await mine.stop()


async def test_missing_api_key_is_one_line_and_a_failure_exit(tmp_path):
    """Without GOOGLE_API_KEY, `countersign run` prints one line naming it and exits non-zero."""
    bot = await BotProcess(base_env(SLACK_BOT_TOKEN="xoxb-x", SLACK_SIGNING_SECRET="s"), tmp_path).start()
    assert await bot.wait() == 2
    lines = bot.stderr.decode().strip().splitlines()
    assert lines == ["countersign: GOOGLE_API_KEY is not set: the agent needs a Gemini API key"]


async def test_unreachable_database_is_one_line_without_the_password(tmp_path):
    """A DATABASE_URL nobody answers on gives one readable line, password redacted, exit 2."""
    env = base_env(GOOGLE_API_KEY="k", DATABASE_URL="postgresql://app:s3cret@127.0.0.1:1/app")
    bot = await BotProcess(env, tmp_path, command="migrate").start()
    assert await bot.wait() == 2
    err = bot.stderr.decode()
    assert "s3cret" not in err
    assert (
        err.strip()
        .splitlines()[-1]
        .startswith("countersign: cannot reach PostgreSQL at postgresql://app:***@127.0.0.1:1/app")
    )
    assert "Traceback" not in err


async def test_migrate_applies_and_is_idempotent(db_url, tmp_path):
    """`countersign migrate` exits 0 twice on the same database."""
    for _ in range(2):
        bot = await BotProcess(base_env(DATABASE_URL=db_url), tmp_path, command="migrate").start()
        assert await bot.wait() == 0, bot.stderr.decode()


async def test_discord_and_slack_in_one_process_across_a_restart(db_url, gemini, slack, target, discord_api, tmp_path):
    """`countersign run` with both platforms: Discord discovers its gateway from DISCORD_API_URL,
    a card posted before a restart is approved on a new client, and Slack answers meanwhile."""
    from tests.e2e.conftest import D_ALICE, D_BOT, D_CHANNEL, D_GUILD, DISCORD_TOKEN
    from tests.e2e.test_discord_flow import click as discord_click
    from tests.e2e.test_discord_flow import wait_answer as discord_answer
    from tests.e2e.test_discord_flow import wait_card as discord_card

    port = free_port()
    env = bot_env(
        gemini,
        slack,
        target,
        port,
        DATABASE_URL=db_url,
        DISCORD_TOKEN=DISCORD_TOKEN,
        DISCORD_API_URL=discord_api.api_url,
    )
    first = await BotProcess(env, tmp_path).start()
    await first.wait_healthy(port)
    await discord_api.send_message(D_CHANNEL, D_ALICE, f"<@{D_BOT}> post widget", mentions=[D_BOT], guild_id=D_GUILD)
    [card] = await discord_card(discord_api)
    async with SlackEventSender(f"http://127.0.0.1:{port}/slack/events", SIGNING_SECRET, team_id=TEAM) as events:
        mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> hello from slack")
        await wait_answer(slack, mention.ts, starts="You said: hello from slack")
    assert await first.stop() == 0, first.stderr.decode()

    second = await BotProcess(env, tmp_path).start()
    await second.wait_healthy(port)
    await discord_click(discord_api, card, D_ALICE, "approve")
    [answer] = await discord_answer(discord_api)
    assert await second.stop() == 0, second.stderr.decode()
    assert "widget" in answer and [r.json for r in target.requests] == [{"name": "widget"}]
    assert discord_api.identifies and all(i["intents"] & (1 << 15) for i in discord_api.identifies)


async def test_missing_message_content_intent_is_reported_at_start(gemini, target, tmp_path, db_url):
    """When the application may not use the Message Content intent, the bot says so in one line."""
    from tests.e2e.conftest import D_APP, D_BOT, DISCORD_TOKEN
    from tests.standins.discord_api import DiscordStandIn, Intent

    async with DiscordStandIn(
        bot_token=DISCORD_TOKEN, application_id=D_APP, bot_user_id=D_BOT, approved_intents=Intent(0)
    ) as api:
        env = base_env(
            GOOGLE_API_KEY="k",
            GEMINI_BASE_URL=gemini.base_url,
            DATABASE_URL=db_url,
            DISCORD_TOKEN=DISCORD_TOKEN,
            DISCORD_API_URL=api.api_url,
            PORT=str(free_port()),
            HOST="127.0.0.1",
        )
        bot = await BotProcess(env, tmp_path).start()
        assert await bot.wait(timeout=60) == 2
    last = bot.stderr.decode().strip().splitlines()[-1]
    assert last.startswith("countersign: Discord refused the Message Content intent")
    assert "Privileged Gateway Intents" in last

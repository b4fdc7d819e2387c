"""kill -9 of the bot while its MCP server runs an approved call (docs/decisions/0042-mcp-client.md, "Outcomes").

A real `countersign run` process, `COUNTERSIGN_MCP_CONFIG` naming the test server
(`tests.support.mcp_server`, FastMCP over stdio, started by the bot) as `notes`, is killed with
SIGKILL once the server has received the call and is still running it. A new process starts on
the same database and resumes the turn while its own server is still starting (the test holds
that start): the call is never sent again, whether or not the server is back. The server's own
record says what it received.
"""

from __future__ import annotations

import json

import httpx
import psutil
import pytest

from tests.e2e.cli.test_process import bot_env
from tests.e2e.conftest import ALICE, CHANNEL, SIGNING_SECRET, TEAM
from tests.e2e.tools.mcp.test_mcp_flow import SERVER, server_calls, write_mcp_config
from tests.e2e.upkeep.test_crash_stages import BOT_USER, wait_until
from tests.support import barriers
from tests.support.replicas import WAIT_S, Replicas, bot_texts, cards_in

pytestmark = pytest.mark.e2e

MAY_OR_MAY_NOT = "may or may not have taken effect"
"""What a card of a call whose outcome is unknown says."""


async def server_connected(replicas: Replicas, index: int) -> None:
    """Wait until bot `index` says on `/metrics` that its MCP server `notes` is connected (its tools are offered)."""
    connected = f'countersign_mcp_server_connected{{server="{SERVER}"}} 1.0'
    async with httpx.AsyncClient() as client:

        async def says_so() -> bool:
            return connected in (await client.get(f"http://127.0.0.1:{replicas.ports[index]}/metrics")).text

        await barriers.wait_until_async(says_so, f"bot {index}'s MCP server connected", WAIT_S)


async def test_kill_9_while_the_server_runs_an_mcp_call_never_sends_it_again(db_url, gemini, slack, target, tmp_path):
    """SIGKILL mid-call, a new process whose server is not back yet: the server sees one call in all, the model and the card say the outcome is unknown."""
    events, may_start = tmp_path / "mcp-events.jsonl", tmp_path / "mcp-may-start"
    # `${NAME}` is read from the bot's environment, as an operator keeps a token out of the file.
    config = write_mcp_config(tmp_path, "${MCP_EVENTS}", start_after="${MCP_MAY_START}")
    replicas = Replicas(
        lambda port: bot_env(
            gemini,
            slack,
            target,
            port,
            DATABASE_URL=db_url,
            COUNTERSIGN_MCP_CONFIG=str(config),
            MCP_EVENTS=str(events),
            MCP_MAY_START=str(may_start),
        ),
        tmp_path,
        signing_secret=SIGNING_SECRET,
        team_id=TEAM,
        count=1,
    )
    killed: list[psutil.Process] = []
    may_start.touch()
    await replicas.start()
    try:
        await server_connected(replicas, 0)
        thread = await replicas.mention(CHANNEL, ALICE, "<@UBOT> slow 120")
        await wait_until(slack, lambda: bool(cards_in(slack, CHANNEL, thread)), "card", replicas)
        [card] = cards_in(slack, CHANNEL, thread)
        assert (await replicas.click(slack, ALICE, card)).status == 200
        await barriers.wait_until(lambda: bool(server_calls(events, "slow")), "the call reaching the MCP server")
        killed = psutil.Process(replicas.pid(0)).children(recursive=True)
        may_start.unlink()  # the new process's server waits: the turn resumes while it is not connected
        await replicas.kill(0)
        await replicas.start(0)

        def answered() -> list[str]:
            return [t for t in bot_texts(slack, CHANNEL, thread, BOT_USER) if t.startswith("Result: ")]

        def card_says_unknown() -> bool:
            return MAY_OR_MAY_NOT in json.dumps(slack.message(card.channel, card.ts)["blocks"])

        await wait_until(slack, lambda: bool(answered()) and card_says_unknown(), "answer and redrawn card", replicas)
        may_start.touch()
        await server_connected(replicas, 0)
        await replicas.reply(CHANNEL, ALICE, "ping", thread)
        await wait_until(
            slack, lambda: "You said: ping" in bot_texts(slack, CHANNEL, thread, BOT_USER), "next answer", replicas
        )
    finally:
        may_start.touch()
        codes = await replicas.stop()
        for orphan in killed:  # the killed bot's server, should it outlive its closed stdin
            if orphan.is_running():
                orphan.kill()
    assert codes == [0], replicas.stderr()
    assert len(server_calls(events, "slow")) == 1  # never sent again, before or after its server came back
    [answer] = answered()
    assert "outcome is unknown" in answer and "not available" not in answer  # the model was told
    shown = json.dumps(slack.message(card.channel, card.ts)["blocks"])
    assert "Approved" in shown and MAY_OR_MAY_NOT in shown  # and so is everyone who reads the card
    assert "Traceback" not in replicas.stderr()

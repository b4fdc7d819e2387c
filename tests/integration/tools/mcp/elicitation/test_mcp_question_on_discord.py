"""An MCP server's question on Discord: a card for the requester, answered in modal pages, and the call goes on.

The real discord.py client talks to the Discord API stand-in over HTTP and its gateway; the core
runs on real PostgreSQL; the tool is a real FastMCP server over Streamable HTTP that asks in its
first round and acts on the answer in the next (docs/decisions/0050-elicitation-forms-on-slack-and-discord.md,
docs/decisions/0054-mcp-elicitation.md). What the server received is its own record.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
from fastmcp import Context, FastMCP
from langchain_core.messages import AIMessage
from mcp_types import ElicitRequest, ElicitRequestFormParams, ElicitRequestURLParams, InputRequiredResult

from adapters.discord import messages as msg
from adapters.discord.app import DiscordAdapter
from bot.ports import Platform
from bot.service import Countersign
from bot.settings import DatabaseSettings, DiscordSettings
from bot.storage.database import open_database
from countersign.wiring import assemble_core
from tests.e2e.conftest import D_ALICE, D_APP, D_BOB, D_BOT, D_CHANNEL, D_GUILD, DISCORD_TOKEN, discord_guild
from tests.integration.tools.mcp.elicitation.test_mcp_elicitation import SCHEMA
from tests.integration.tools.mcp.test_mcp_tools import connected, registry_with, servers_for, tool_results
from tests.standins.discord_api import point_discord_py_at
from tests.support.mcp_server import serve_http
from tests.support.scripted_model import ScriptedChatModel, calls, tool_call

WAIT_S = 120
MESSAGES = rf"/channels/{D_CHANNEL}/messages$"
SEVEN = {
    "type": "object",
    "properties": {f"k{i}": {"type": "string", "title": f"Field {i}"} for i in range(7)},
    "required": [f"k{i}" for i in range(7)],
}


@pytest.fixture
async def discord_api() -> AsyncIterator[Any]:
    async with discord_guild() as api:
        yield api


def asking_server(seen: list[dict[str, Any]], schema: dict[str, Any] = SCHEMA, *, url: bool = False) -> FastMCP:
    """A 2026-era server whose `pay` asks a form (or a link) in its first round and acts on the answer in the next."""
    mcp = FastMCP("bank")

    @mcp.tool
    async def pay(amount: int, ctx: Context) -> str | InputRequiredResult:
        """Pay `amount`."""
        if not ctx.input_responses:
            seen.append({"round": "ask"})
            params: Any = (
                ElicitRequestURLParams(
                    message="Sign in to the bank", url="https://bank.example/sso?token=secret", elicitation_id="e1"
                )
                if url
                else ElicitRequestFormParams(message=f"Pay {amount} to whom?", requested_schema=schema)
            )
            return InputRequiredResult(input_requests={"confirm": ElicitRequest(params=params)}, request_state="s1")
        answer = ctx.input_responses["confirm"]
        seen.append({"round": "answer", "action": answer.action, "content": answer.content})
        return f"paid {amount}" if answer.action == "accept" else f"not paid: {answer.action}"

    return mcp


@dataclass
class Bot:
    service: Countersign
    api: Any
    model: ScriptedChatModel
    database: Any = None
    card_id: str = ""
    question_id: str = ""
    submitted: list[str] = field(default_factory=list)
    """The submissions' interaction ids."""

    async def click(self, message_id: str, custom_id: str, user: int) -> Any:
        """Click a button and wait until the bot answered the interaction."""
        interaction = await self.api.click_button(message_id, custom_id, user, guild_id=D_GUILD)
        await self.api.wait_for_request("POST", rf"/interactions/{interaction.id}/[^/]+/callback")
        return interaction

    def modal(self, interaction: Any) -> dict[str, Any] | None:
        """The modal the bot answered the click with, or None."""
        found = [c.json["data"] for c in self.api.callbacks(interaction.id) if c.status < 300 and c.json["type"] == 9]
        return found[0] if found else None

    async def submit(self, page: int, values: dict[str, Any], *, replies: int = 0) -> list[dict[str, Any]]:
        """Submit page `page` of the question's modal as Alice; the bot's `replies` ephemeral replies, once sent."""
        custom_id = f"cs:q-modal:{self.question_id}:{page}"
        interaction = await self.api.submit_modal(custom_id, D_ALICE, values)
        await self.api.wait_for_request("POST", rf"/interactions/{interaction.id}/[^/]+/callback")
        if replies:
            await self.api.wait_for_request("POST", rf"/webhooks/{D_APP}/{interaction.token}", count=replies)
        self.submitted.append(interaction.id)
        return list(self.api.followups(interaction.id))

    async def answered(self) -> str:
        """The model's final answer, posted in the channel."""
        [post] = await self.api.wait_for_request(
            "POST", MESSAGES, lambda r: (r.json or {}).get("content") == "done", timeout=WAIT_S
        )
        await self.service.tasks.join()
        assert all(self.api.followups(i) == [] for i in self.submitted)  # a page that completes says nothing
        return str(post.json["content"])

    def card(self) -> dict[str, Any]:
        return dict(self.api.message(self.card_id))


def _custom_ids(message: dict[str, Any]) -> list[str]:
    return [c["custom_id"] for row in message.get("components") or [] for c in row.get("components", [])]


@asynccontextmanager
async def asked(db_url, tmp_path, api, seen, **server: Any) -> AsyncIterator[Bot]:
    """Alice asks the bot to pay, approves the call, and the server's question card is posted."""
    model = ScriptedChatModel(replies=[calls(tool_call("bank__pay", {"amount": 100})), AIMessage("done")])
    async with serve_http(asking_server(seen, **server)) as address:
        servers = servers_for(tmp_path, {"bank": {"url": address}})
        servers.start()
        try:
            await connected(servers, "bank")
            with point_discord_py_at(api.api_url) as routing:
                async with open_database(DatabaseSettings(url=db_url), run_migrations=False) as database:
                    platforms: dict[str, Platform] = {}
                    core = assemble_core(database, model, registry_with(servers), platforms, recursion_limit=25)
                    settings = DiscordSettings(token=DISCORD_TOKEN, api_url=api.api_url, guild_ready_timeout_s=0.05)
                    adapter = DiscordAdapter(settings, core.service, core.admin)
                    platforms[adapter.platform.name] = adapter.platform
                    await adapter.start()
                    core.service.start()
                    try:
                        bot = Bot(core.service, api, model, database)
                        await api.send_message(
                            D_CHANNEL, D_ALICE, f"<@{D_BOT}> pay 100", mentions=[D_BOT], guild_id=D_GUILD
                        )
                        [card] = await api.wait_for_request(
                            "POST", MESSAGES, lambda r: "cs:approve:" in json.dumps(r.json), timeout=WAIT_S
                        )
                        approve = next(i for i in _custom_ids(card.json) if i.startswith("cs:approve:"))
                        await core.service.tasks.join()
                        await bot.click(card.response["id"], approve, D_ALICE)
                        [question] = await api.wait_for_request(
                            "POST", MESSAGES, lambda r: "cs:q-" in json.dumps(r.json), timeout=WAIT_S
                        )
                        await core.service.tasks.join()
                        bot.card_id = question.response["id"]
                        bot.question_id = _custom_ids(question.json)[0].split(":")[2]
                        yield bot
                    finally:
                        await core.service.aclose(5)
                        await adapter.close()
            assert routing.blocked == []
        finally:
            await servers.aclose(10)


async def test_the_requester_answers_in_a_modal_and_the_call_goes_on(db_url, tmp_path, discord_api):
    """Answer opens the form as a modal; valid values reach the server typed, the card says answered, the model reads the result."""
    seen: list[dict[str, Any]] = []
    async with asked(db_url, tmp_path, discord_api, seen) as bot:
        posted = discord_api.message(bot.card_id)
        assert posted["content"] == f"<@{D_ALICE}>"
        assert [str(u) for u in posted["allowed_mentions"]["users"]] == [str(D_ALICE)] and not posted[
            "allowed_mentions"
        ]["parse"]
        assert "Pay 100 to whom?" in json.dumps(posted["embeds"])
        assert _custom_ids(posted) == [f"cs:q-{a}:{bot.question_id}" for a in ("answer", "decline", "cancel")]
        opened = await bot.click(bot.card_id, f"cs:q-answer:{bot.question_id}", D_ALICE)
        modal = bot.modal(opened)
        assert modal is not None and modal["custom_id"] == f"cs:q-modal:{bot.question_id}:1"
        assert [c["component"]["custom_id"] for c in modal["components"] if c["type"] == 18] == ["f0", "f1"]
        assert await bot.submit(1, {"f0": "bob", "f1": "2"}) == []
        await bot.answered()
        card = bot.card()
    assert seen == [{"round": "ask"}, {"round": "answer", "action": "accept", "content": {"payee": "bob", "times": 2}}]
    assert tool_results(bot.model)[0].content == "paid 100"
    assert "answered" in card["embeds"][0]["title"] and f"<@{D_ALICE}>" in json.dumps(card["embeds"])
    assert _custom_ids(card) == []


async def test_an_invalid_value_is_refused_privately_and_the_page_reopens_with_what_was_entered(
    db_url, tmp_path, discord_api
):
    """A value the schema refuses: an ephemeral problem with a button to the page, nothing sent; fixed, it goes on.

    The button pressed after the answer says the question was answered.
    """
    seen: list[dict[str, Any]] = []
    async with asked(db_url, tmp_path, discord_api, seen) as bot:
        await bot.click(bot.card_id, f"cs:q-answer:{bot.question_id}", D_ALICE)
        [reply] = await bot.submit(1, {"f0": "bob", "f1": "7"}, replies=1)
        bot.submitted.clear()
        assert reply["flags"] & 64 and "Nothing was sent" in reply["content"] and "Times" in reply["content"]
        assert _custom_ids(reply) == [f"cs:q-page:{bot.question_id}:1"]
        assert seen == [{"round": "ask"}] and _custom_ids(bot.card())
        again = await bot.click(reply["id"], f"cs:q-page:{bot.question_id}:1", D_ALICE)
        modal = bot.modal(again)
        assert modal is not None and '"bob"' in json.dumps(modal)  # kept
        assert await bot.submit(1, {"f1": "3"}) == []
        await bot.answered()
        late = await bot.click(reply["id"], f"cs:q-page:{bot.question_id}:1", D_ALICE)
        [callback] = [c.json for c in discord_api.callbacks(late.id) if c.status < 300]
        assert callback["type"] == 4 and callback["data"]["content"] == msg.QUESTION_CLOSED["answered"]
    assert seen[1] == {"round": "answer", "action": "accept", "content": {"payee": "bob", "times": 3}}


async def test_only_the_requester_may_answer(db_url, tmp_path, discord_api):
    """Bob's clicks on Answer and Decline are refused privately, naming the requester; no modal, nothing sent."""
    seen: list[dict[str, Any]] = []
    async with asked(db_url, tmp_path, discord_api, seen) as bot:
        opened = await bot.click(bot.card_id, f"cs:q-answer:{bot.question_id}", D_BOB)
        assert bot.modal(opened) is None
        [callback] = [c.json for c in discord_api.callbacks(opened.id) if c.status < 300]
        assert callback["type"] == 4 and callback["data"]["flags"] & 64
        assert msg.QUESTION_ONLY_REQUESTER_CLICK.format(user=D_ALICE) == callback["data"]["content"]
        declined = await bot.click(bot.card_id, f"cs:q-decline:{bot.question_id}", D_BOB)
        await discord_api.wait_for_request("POST", rf"/webhooks/{D_APP}/{declined.token}")
        [refusal] = discord_api.followups(declined.id)
        assert refusal["flags"] & 64 and f"<@{D_ALICE}>" in refusal["content"]
        await bot.service.tasks.join()
        assert seen == [{"round": "ask"}] and _custom_ids(bot.card())
        question = await bot.service.question(bot.question_id)
        assert question.is_open


async def test_decline_tells_the_server_so(db_url, tmp_path, discord_api):
    """Decline: the server gets `decline`, the card says declined and has no buttons."""
    seen: list[dict[str, Any]] = []
    async with asked(db_url, tmp_path, discord_api, seen) as bot:
        await bot.click(bot.card_id, f"cs:q-decline:{bot.question_id}", D_ALICE)
        await bot.answered()
        card = bot.card()
        assert "declined" in card["embeds"][0]["title"] and _custom_ids(card) == []
    assert [(e["action"], e["content"]) for e in seen if e["round"] == "answer"] == [("decline", None)]
    assert tool_results(bot.model)[0].content == "not paid: decline"


async def test_a_seven_field_form_is_answered_in_two_pages(db_url, tmp_path, discord_api):
    """Five fields, Continue (2/2), two more: the server gets all seven in one answer."""
    seen: list[dict[str, Any]] = []
    async with asked(db_url, tmp_path, discord_api, seen, schema=SEVEN) as bot:
        opened = await bot.click(bot.card_id, f"cs:q-answer:{bot.question_id}", D_ALICE)
        first = bot.modal(opened)
        assert first is not None and first["title"].endswith("(1/2)")
        [reply] = await bot.submit(1, {f"f{i}": f"v{i}" for i in range(5)}, replies=1)
        bot.submitted.clear()
        assert reply["flags"] & 64 and _custom_ids(reply) == [f"cs:q-page:{bot.question_id}:2"]
        assert seen == [{"round": "ask"}]
        second = bot.modal(await bot.click(reply["id"], f"cs:q-page:{bot.question_id}:2", D_ALICE))
        assert second is not None
        assert [c["component"]["custom_id"] for c in second["components"] if c["type"] == 18] == ["f5", "f6"]
        assert await bot.submit(2, {"f5": "v5", "f6": "v6"}) == []
        await bot.answered()
    assert seen[1] == {"round": "answer", "action": "accept", "content": {f"k{i}": f"v{i}" for i in range(7)}}


async def test_a_link_is_shown_to_the_requester_alone(db_url, tmp_path, discord_api):
    """The card names no URL; Open link accepts and shows the link in an ephemeral reply to the requester."""
    seen: list[dict[str, Any]] = []
    async with asked(db_url, tmp_path, discord_api, seen, url=True) as bot:
        assert _custom_ids(bot.card())[0] == f"cs:q-link:{bot.question_id}"
        opened = await bot.click(bot.card_id, f"cs:q-link:{bot.question_id}", D_ALICE)
        await discord_api.wait_for_request("POST", rf"/webhooks/{D_APP}/{opened.token}")
        [reply] = discord_api.followups(opened.id)
        assert reply["flags"] & 64 and "https://bank.example/sso?token=secret" in reply["content"]
        await bot.answered()
        public = [m for m in discord_api.messages(D_CHANNEL) if not (m.get("flags") or 0) & 64]
    assert all("token=secret" not in json.dumps(m) for m in public)
    assert [(e["action"], e["content"]) for e in seen if e["round"] == "answer"] == [("accept", None)]


async def test_forged_question_clicks_and_forms_change_nothing(db_url, tmp_path, discord_api):
    """A question button the card does not show, and Bob's forged submission of Alice's form, are refused privately."""
    seen: list[dict[str, Any]] = []
    async with asked(db_url, tmp_path, discord_api, seen) as bot:
        forged = [
            ("component", {"custom_id": f"cs:q-link:{bot.question_id}", "component_type": 2}, msg.UNKNOWN_BUTTON),
            (
                "modal_submit",
                {
                    "custom_id": f"cs:q-modal:{bot.question_id}:1",
                    "components": [
                        {"type": 18, "component": {"type": 4, "custom_id": "f0", "value": "mallory"}},
                        {"type": 18, "component": {"type": 4, "custom_id": "f1", "value": "1"}},
                    ],
                },
                msg.QUESTION_ONLY_REQUESTER_CLICK.format(user=D_ALICE),
            ),
        ]
        for kind, data, words in forged:
            interaction = await discord_api.forge_interaction(
                kind, data, D_BOB, channel_id=D_CHANNEL, message_id=bot.card_id
            )
            await discord_api.wait_for_request("POST", rf"/interactions/{interaction.id}/[^/]+/callback")
            callback = next(c.json for c in discord_api.callbacks(interaction.id) if c.status < 300)
            if callback["type"] == 4:
                shown = callback["data"]
            else:
                await discord_api.wait_for_request("POST", rf"/webhooks/{D_APP}/{interaction.token}")
                [shown] = discord_api.followups(interaction.id)
            assert shown["flags"] & 64 and shown["content"] == words, (kind, shown)
        await bot.service.tasks.join()
        assert seen == [{"round": "ask"}] and (await bot.service.question(bot.question_id)).is_open


async def test_an_expired_question_is_redrawn_as_expired_and_the_server_gets_cancel(db_url, tmp_path, discord_api):
    """Past its expiry the card says expired, without buttons; the server gets `cancel`."""
    seen: list[dict[str, Any]] = []
    async with asked(db_url, tmp_path, discord_api, seen) as bot:
        await bot.database.pool.execute("UPDATE mcp_questions SET expires_at = now() - interval '1 second'")
        assert bot.service.question_expiry is not None
        bot.service.question_expiry.wake()
        await bot.answered()
        card = bot.card()
    assert "expired" in card["embeds"][0]["title"] and _custom_ids(card) == []
    assert [e["action"] for e in seen if e["round"] == "answer"] == ["cancel"]


async def test_a_message_while_the_question_waits_is_held_and_its_sender_told(db_url, tmp_path, discord_api):
    """Bob writes while Alice's question waits: the model does not read it, and Bob is told whose answer it waits for."""
    seen: list[dict[str, Any]] = []
    async with asked(db_url, tmp_path, discord_api, seen) as bot:
        prompts = len(bot.model.prompts)
        await discord_api.send_message(D_CHANNEL, D_BOB, f"<@{D_BOT}> hello?", mentions=[D_BOT], guild_id=D_GUILD)
        [told] = await discord_api.wait_for_request(
            "POST", MESSAGES, lambda r: "answer a question" in json.dumps(r.json), timeout=WAIT_S
        )
        await bot.service.tasks.join()
        assert len(bot.model.prompts) == prompts
        content = told.json["content"]
        assert content.startswith(f"<@{D_BOB}> ") and "MCP server bank" in content
        assert "in a moment" not in content

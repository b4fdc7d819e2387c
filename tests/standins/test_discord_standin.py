"""The Discord stand-in speaks Discord: the real discord.py client connects, listens and answers."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import warnings
import zlib
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import aiohttp
import pytest

from tests.standins.discord_api import (
    DiscordPyRouting,
    DiscordStandIn,
    Intent,
    OutsideStandInError,
    Permission,
    make_forum_channel,
    make_member,
    make_overwrite,
    make_role,
    make_text_channel,
    make_thread,
    make_user,
    point_discord_py_at,
)

with warnings.catch_warnings():
    # discord.py imports the deprecated ``audioop`` (see tests/standins/discord_api.py).
    warnings.filterwarnings("ignore", "'audioop' is deprecated", DeprecationWarning)
    import discord
    import discord.gateway
    import discord.http
    from discord import app_commands

TOKEN = "bot-token-for-tests"
APP_ID = 1_200_000_000_000_000_001
BOT_ID = 1_200_000_000_000_000_002
GUILD = 1_300_000_000_000_000_001
GENERAL = 1_300_000_000_000_000_010
LOCKED = 1_300_000_000_000_000_011
THREAD = 1_300_000_000_000_000_012
APPROVERS = 1_300_000_000_000_000_020
OWNER = 1_400_000_000_000_000_001
ALICE = 1_400_000_000_000_000_002
BOB = 1_400_000_000_000_000_003

INTENTS = discord.Intents.none()
INTENTS.guilds = True
INTENTS.guild_messages = True
INTENTS.dm_messages = True
INTENTS.message_content = True


@pytest.fixture
async def standin() -> AsyncIterator[DiscordStandIn]:
    """A started stand-in with one guild: #general, a locked channel, a thread, three people."""
    async with DiscordStandIn(bot_token=TOKEN, application_id=APP_ID, bot_user_id=BOT_ID) as api:
        api.add_guild(
            GUILD,
            "Countersign test guild",
            owner_id=OWNER,
            channels=[
                make_text_channel(GENERAL, "general"),
                make_text_channel(
                    LOCKED,
                    "locked",
                    position=1,
                    permission_overwrites=[
                        make_overwrite(GUILD, deny=Permission.VIEW_CHANNEL),
                        make_overwrite(APPROVERS, allow=Permission.VIEW_CHANNEL),
                    ],
                ),
                make_thread(THREAD, GENERAL, "ticket-1", owner_id=ALICE),
            ],
            roles=[make_role(APPROVERS, "Approvers", permissions=Permission.MANAGE_GUILD)],
            members=[
                make_member(make_user(OWNER, "owner")),
                make_member(make_user(ALICE, "alice", global_name="Alice"), roles=[APPROVERS]),
                make_member(make_user(BOB, "bob")),
            ],
        )
        yield api


@pytest.fixture
def routing(standin: DiscordStandIn) -> Iterator[DiscordPyRouting]:
    """discord.py pointed at the stand-in; fails the test if it tried to reach anything else."""
    before = _discord_py_targets()
    with point_discord_py_at(standin.api_url) as routes:
        yield routes
    assert routes.blocked == []
    assert _discord_py_targets() == before


def _discord_py_targets() -> tuple[str, object]:
    return discord.http.Route.BASE, discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY


class _Client(discord.Client):
    """A discord.Client that registers dynamic items and re-IDENTIFYs without waiting 5 s."""

    def __init__(self, *, intents: discord.Intents = INTENTS, dynamic_items: tuple[Any, ...] = ()):
        super().__init__(intents=intents, guild_ready_timeout=0.05)
        self._dynamic_items = dynamic_items

    async def setup_hook(self) -> None:
        self.add_dynamic_items(*self._dynamic_items)

    async def before_identify_hook(self, shard_id: int | None, *, initial: bool = False) -> None:
        # discord.py sleeps 5 s before every IDENTIFY but the first; the stand-in has no limit.
        return None


@contextlib.asynccontextmanager
async def _running(client: discord.Client, token: str = TOKEN) -> AsyncIterator[discord.Client]:
    """Log in, connect, wait for on_ready, and close the client cleanly afterwards."""
    try:
        await client.login(token)
    except BaseException:
        await client.close()
        raise
    task = asyncio.create_task(client.connect())
    ready = asyncio.create_task(client.wait_until_ready())
    try:
        done, _ = await asyncio.wait({task, ready}, timeout=10, return_when=asyncio.FIRST_COMPLETED)
        if task in done:
            task.result()
        assert ready in done, "the client did not become ready"
        yield client
    finally:
        ready.cancel()
        await client.close()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(task, timeout=10)


def _expect(client: discord.Client, event: str, check: Callable[..., bool]) -> asyncio.Task[Any]:
    """Start waiting for a discord.py event now, so nothing dispatched afterwards is missed."""
    return asyncio.create_task(client.wait_for(event, check=check, timeout=5))


async def _listening() -> None:
    # Let tasks created by _expect register their listeners.
    await asyncio.sleep(0)


async def test_client_connects_through_the_standin(standin, routing):
    """A real Client logs in, asks /gateway/bot, IDENTIFYs with its intents and gets on_ready."""
    async with _running(_Client()) as client:
        assert client.user is not None and client.user.id == BOT_ID
        assert client.application_id == APP_ID
        guild = client.get_guild(GUILD)
        assert guild is not None and guild.name == "Countersign test guild"
        assert guild.owner_id == OWNER
        assert guild.get_channel(GENERAL).name == "general"
        assert guild.get_thread(THREAD).parent_id == GENERAL
        assert guild.get_role(APPROVERS).permissions.manage_guild
        assert guild.me is not None
    assert routing.gateway_url == standin.gateway_url
    paths = [(r.method, r.path) for r in standin.requests]
    assert paths[:3] == [
        ("GET", "/users/@me"),
        ("GET", "/oauth2/applications/@me"),
        ("GET", "/gateway/bot"),
    ]
    assert all("Authorization" not in r.headers for r in standin.requests)
    assert standin.intents == INTENTS.value
    [connection] = standin.gateway_connections
    assert connection.path == "/gateway" and connection.kind == "identify"
    assert connection.query["v"] == "10" and connection.query["encoding"] == "json"


async def test_wrong_token_fails_login(standin, routing):
    """A wrong token gets 401 from /users/@me, which discord.py turns into LoginFailure."""
    client = _Client()
    with pytest.raises(discord.LoginFailure):
        await client.login("not-the-token")
    await client.close()
    assert standin.requests[-1].status == 401
    assert standin.requests[-1].response == {"message": "401: Unauthorized", "code": 0}


async def test_rest_errors_are_discord_shaped(standin):
    """Unknown routes are 404 and missing auth is 401, with Discord's JSON bodies."""
    headers = {"Authorization": f"Bot {TOKEN}"}
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{standin.api_url}/nothing/here", headers=headers) as response:
            assert response.status == 404
            assert await response.json() == {"message": "404: Not Found", "code": 0}
        async with http.get(f"{standin.api_url}/users/@me") as response:
            assert response.status == 401
            assert await response.json() == {"message": "401: Unauthorized", "code": 0}
        async with http.get(f"{standin.api_url}/channels/{LOCKED}", headers=headers) as response:
            assert response.status == 403
            assert (await response.json())["code"] == 50001


async def test_on_message_resolves_author_guild_and_channel(standin, routing):
    """MESSAGE_CREATE from send_message reaches on_message with cache-resolved objects."""
    async with _running(_Client()) as client:
        waiting = _expect(client, "message", lambda m: m.author.id == ALICE)
        await _listening()
        await standin.send_message(GENERAL, ALICE, f"hello <@{BOT_ID}> and <@{BOB}>")
        message = await waiting
        assert message.content == f"hello <@{BOT_ID}> and <@{BOB}>"
        assert isinstance(message.author, discord.Member)
        assert message.author.display_name == "Alice"
        assert [r.id for r in message.author.roles] == [GUILD, APPROVERS]
        assert message.guild is client.get_guild(GUILD)
        assert message.channel is client.get_channel(GENERAL)
        assert {u.id for u in message.mentions} == {BOT_ID, BOB}

        in_thread = _expect(client, "message", lambda m: m.author.id == BOB)
        await _listening()
        await standin.send_message(THREAD, BOB, "in the ticket")
        reply = await in_thread
        assert isinstance(reply.channel, discord.Thread) and reply.channel.parent_id == GENERAL

        dm = _expect(client, "message", lambda m: m.guild is None)
        await _listening()
        await standin.send_dm(BOB, "psst")
        direct = await dm
        assert isinstance(direct.channel, discord.DMChannel) and direct.content == "psst"


async def test_send_embed_and_buttons_then_edit(standin, routing):
    """channel.send with an embed and a View reaches the stand-in; message.edit updates it."""
    view = discord.ui.View(timeout=None)
    view.add_item(discord.ui.Button(label="Approve", custom_id="approve:1"))
    view.add_item(discord.ui.Button(label="Reject", custom_id="reject:1"))
    async with _running(_Client()) as client:
        channel = client.get_channel(GENERAL)
        embed = discord.Embed(title="http_request", description="GET https://example.com")
        embed.add_field(name="asked by", value="alice")
        sent = await channel.send(
            "Approval needed",
            embed=embed,
            view=view,
            allowed_mentions=discord.AllowedMentions.none(),
        )
        [stored] = standin.messages(GENERAL)
        assert stored["id"] == str(sent.id)
        assert stored["embeds"][0]["title"] == "http_request"
        assert stored["embeds"][0]["fields"] == [{"name": "asked by", "value": "alice", "inline": True}]
        [row] = stored["components"]
        assert row["type"] == 1
        assert [(b["type"], b["label"], b["custom_id"]) for b in row["components"]] == [
            (2, "Approve", "approve:1"),
            (2, "Reject", "reject:1"),
        ]
        assert stored["allowed_mentions"] == {"parse": []}

        await sent.edit(content="Approved by alice", embed=None, view=None)
        [edited] = standin.messages(GENERAL)
        assert edited["content"] == "Approved by alice"
        assert edited["components"] == [] and edited["embeds"] == []
        assert edited["edited_timestamp"] is not None
        [patch] = standin.requests_to("PATCH", rf"/channels/{GENERAL}/messages/{sent.id}")
        assert patch.status == 200


async def test_reply_records_reference_and_allowed_mentions(standin, routing):
    """A reply carries message_reference; with allowed_mentions none nobody is pinged."""
    async with _running(_Client()) as client:
        waiting = _expect(client, "message", lambda m: m.author.id == ALICE)
        await _listening()
        await standin.send_message(GENERAL, ALICE, "please fetch it")
        question = await waiting
        await question.reply(f"on it <@{ALICE}>", allowed_mentions=discord.AllowedMentions.none())
        [answer] = standin.messages(GENERAL)
        assert answer["message_reference"]["message_id"] == str(question.id)
        assert answer["type"] == 19
        assert answer["mentions"] == [] and answer["mention_everyone"] is False
        assert answer["allowed_mentions"] == {"parse": []}


async def test_limits_are_enforced_with_invalid_form_body(standin, routing):
    """Over-long content and embed titles get 400 code 50035 with Discord's errors tree."""
    async with _running(_Client()) as client:
        channel = client.get_channel(GENERAL)
        with pytest.raises(discord.HTTPException) as too_long:
            await channel.send("x" * 2001)
        assert (too_long.value.status, too_long.value.code) == (400, 50035)
        body = standin.requests[-1].response
        assert body["errors"]["content"]["_errors"][0]["code"] == "BASE_TYPE_MAX_LENGTH"
        with pytest.raises(discord.HTTPException) as bad_embed:
            await channel.send(embed=discord.Embed(title="t" * 257))
        assert bad_embed.value.code == 50035
        assert "title" in standin.requests[-1].response["errors"]["embeds"]["0"]
        with pytest.raises(discord.Forbidden) as forbidden:
            await client.get_channel(LOCKED).send("hi")
        assert forbidden.value.code in (50001, 50013)
        assert standin.messages(GENERAL) == []


async def test_rate_limited_request_is_retried(standin, routing):
    """A 429 with Retry-After makes discord.py wait and retry; both attempts are recorded."""
    standin.rate_limit("POST", rf"/channels/{GENERAL}/messages", retry_after=0.05)
    async with _running(_Client()) as client:
        await client.get_channel(GENERAL).send("after a pause")
    statuses = [r.status for r in standin.requests_to("POST", rf"/channels/{GENERAL}/messages")]
    assert statuses == [429, 200]


async def test_typing_context_manager_hits_typing(standin, routing):
    """`async with channel.typing()` posts /channels/{id}/typing (204)."""
    async with _running(_Client()) as client, client.get_channel(GENERAL).typing():
        pass
    assert standin.typing(GENERAL) == 1
    [request] = standin.requests_to("POST", rf"/channels/{GENERAL}/typing")
    assert request.status == 204


class _Approve(discord.ui.DynamicItem[discord.ui.Button], template=r"cs:approve:(?P<id>[0-9a-f]{8})"):
    """A persistent Approve button whose custom_id names the approval."""

    clicks: asyncio.Queue[tuple[str, discord.Interaction]]

    def __init__(self, approval_id: str) -> None:
        super().__init__(
            discord.ui.Button(
                label="Approve",
                style=discord.ButtonStyle.success,
                custom_id=f"cs:approve:{approval_id}",
            )
        )
        self.approval_id = approval_id

    @classmethod
    async def from_custom_id(cls, interaction, item, match):
        return cls(match["id"])

    async def callback(self, interaction: discord.Interaction) -> None:
        await interaction.response.defer()
        await interaction.followup.send(f"approved {self.approval_id}", ephemeral=True)
        self.clicks.put_nowait((self.approval_id, interaction))


class _EditReason(discord.ui.Modal, title="Edit the arguments"):
    """A modal with an old-style TextInput and one inside a Label."""

    url = discord.ui.TextInput(label="URL", custom_id="url", max_length=200)
    reason = discord.ui.Label(
        text="Why",
        component=discord.ui.TextInput(custom_id="reason", style=discord.TextStyle.paragraph),
    )

    def __init__(self, submitted: asyncio.Queue[tuple[str, str]]) -> None:
        super().__init__(custom_id="cs:edit:0000abcd")
        self.submitted = submitted

    async def on_submit(self, interaction: discord.Interaction) -> None:
        reason = self.reason.component
        assert isinstance(reason, discord.ui.TextInput)
        await interaction.response.send_message("saved", ephemeral=True)
        self.submitted.put_nowait((self.url.value, reason.value))


async def _post_dynamic_button(client: discord.Client, approval_id: str) -> discord.Message:
    view = discord.ui.View(timeout=None)
    view.add_item(_Approve(approval_id))
    return await client.get_channel(GENERAL).send("card", view=view)


async def test_dynamic_item_click_defers_then_sends_ephemeral_followup(standin, routing):
    """click_button reaches a DynamicItem; defer() is type 6, the followup is ephemeral."""
    _Approve.clicks = asyncio.Queue()
    async with _running(_Client(dynamic_items=(_Approve,))) as client:
        card = await _post_dynamic_button(client, "0a1b2c3d")
        clicked = await standin.click_button(card.id, "cs:approve:0a1b2c3d", ALICE)
        approval_id, interaction = await asyncio.wait_for(_Approve.clicks.get(), 5)
        assert approval_id == "0a1b2c3d"
        assert interaction.id == int(clicked.id)
        assert interaction.user.id == ALICE and isinstance(interaction.user, discord.Member)
        assert interaction.permissions.manage_guild
        assert interaction.message is not None and interaction.message.id == card.id
        [callback] = standin.callbacks(clicked.id)
        assert callback.json == {"type": 6} and callback.status == 200
        [followup] = standin.followups(clicked.id)
        assert followup["content"] == "approved 0a1b2c3d"
        assert followup["flags"] & 64

        await standin.click_button(card.id, "cs:approve:0a1b2c3d", BOB)
        _, by_bob = await asyncio.wait_for(_Approve.clicks.get(), 5)
        assert not by_bob.permissions.manage_guild
        assert by_bob.permissions.view_channel

        await standin.click_button(card.id, "cs:approve:0a1b2c3d", OWNER)
        _, by_owner = await asyncio.wait_for(_Approve.clicks.get(), 5)
        assert by_owner.permissions.administrator


async def test_click_payload_is_discord_shaped(standin, routing):
    """The INTERACTION_CREATE payload carries member.permissions, app_permissions and message."""
    _Approve.clicks = asyncio.Queue()
    async with _running(_Client(dynamic_items=(_Approve,))) as client:
        card = await _post_dynamic_button(client, "00000001")
        clicked = await standin.click_button(card.id, "cs:approve:00000001", BOB, permissions=Permission.MANAGE_GUILD)
        await asyncio.wait_for(_Approve.clicks.get(), 5)
    payload = clicked.payload
    assert payload["type"] == 3 and payload["data"]["component_type"] == 2
    assert payload["data"]["custom_id"] == "cs:approve:00000001"
    assert payload["member"]["permissions"] == str(int(Permission.MANAGE_GUILD))
    assert payload["member"]["user"]["id"] == str(BOB)
    assert payload["message"]["id"] == str(card.id)
    assert payload["guild_id"] == str(GUILD) and payload["channel_id"] == str(GENERAL)
    assert int(payload["app_permissions"]) & Permission.SEND_MESSAGES
    assert payload["locale"] == "en-US" and payload["token"] == clicked.token
    with pytest.raises(LookupError):
        await standin.click_button(card.id, "cs:approve:ffffffff", BOB)


async def test_button_opens_modal_and_submission_arrives(standin, routing):
    """A button answers with a Modal (type 9); submit_modal delivers both input shapes."""
    submitted: asyncio.Queue[tuple[str, str]] = asyncio.Queue()

    class EditButton(discord.ui.View):
        def __init__(self) -> None:
            super().__init__(timeout=None)

        @discord.ui.button(label="Edit", custom_id="cs:edit:0000abcd")
        async def edit(self, interaction: discord.Interaction, button: discord.ui.Button) -> None:
            await interaction.response.send_modal(_EditReason(submitted))

    async with _running(_Client()) as client:
        card = await client.get_channel(GENERAL).send("card", view=EditButton())
        clicked = await standin.click_button(card.id, "cs:edit:0000abcd", ALICE)
        [callback] = await standin.wait_for_request("POST", rf"/interactions/{clicked.id}/.+/callback")
        assert callback.json["type"] == 9
        modal = callback.json["data"]
        assert modal["custom_id"] == "cs:edit:0000abcd" and modal["title"] == "Edit the arguments"
        assert [c["type"] for c in modal["components"]] == [1, 18]
        with pytest.raises(ValueError, match="required"):
            await standin.submit_modal("cs:edit:0000abcd", ALICE, {"url": "https://x.test"})
        submission = await standin.submit_modal(
            "cs:edit:0000abcd", ALICE, {"url": "https://x.test", "reason": "safer host"}
        )
        assert await asyncio.wait_for(submitted.get(), 5) == ("https://x.test", "safer host")
        [answer] = standin.callbacks(submission.id)
        assert answer.json["type"] == 4 and answer.json["data"]["flags"] == 64
        components = submission.payload["data"]["components"]
        assert components[0]["components"][0]["value"] == "https://x.test"
        assert components[1]["component"]["value"] == "safer host"


async def test_update_message_replaces_the_card_in_place(standin, routing):
    """edit_message from a click is callback type 7: the card changes and its buttons go."""

    class Card(discord.ui.View):
        @discord.ui.button(label="Approve", custom_id="cs:approve:card")
        async def approve(self, interaction: discord.Interaction, button: discord.ui.Button):
            await interaction.response.edit_message(content="Approved by alice", view=None)

    async with _running(_Client()) as client:
        card = await client.get_channel(GENERAL).send("Approve?", view=Card(timeout=None))
        edited = _expect(client, "raw_message_edit", lambda e: e.message_id == card.id)
        await _listening()
        clicked = await standin.click_button(card.id, "cs:approve:card", ALICE)
        await edited
        [callback] = standin.callbacks(clicked.id)
        assert callback.json["type"] == 7 and callback.json["data"]["components"] == []
        stored = standin.message(card.id)
        assert stored["content"] == "Approved by alice" and stored["components"] == []
        with pytest.raises(LookupError):
            await standin.click_button(card.id, "cs:approve:card", ALICE)


async def test_thinking_defer_then_followup_fills_the_loading_message(standin, routing):
    """defer(thinking=True) makes a loading message that the first followup fills in."""
    done: asyncio.Queue[discord.WebhookMessage] = asyncio.Queue()
    early: asyncio.Queue[discord.HTTPException] = asyncio.Queue()

    class Card(discord.ui.View):
        @discord.ui.button(label="Run", custom_id="cs:run")
        async def run(self, interaction: discord.Interaction, button: discord.ui.Button):
            try:
                await interaction.followup.send("too early")
            except discord.HTTPException as error:
                early.put_nowait(error)
            await interaction.response.defer(thinking=True, ephemeral=True)
            done.put_nowait(await interaction.followup.send("result", wait=True))

    async with _running(_Client()) as client:
        card = await client.get_channel(GENERAL).send("Run?", view=Card(timeout=None))
        clicked = await standin.click_button(card.id, "cs:run", BOB)
        followup = await asyncio.wait_for(done.get(), 5)
        too_early = early.get_nowait()
        assert isinstance(too_early, discord.NotFound) and too_early.code == 10015
        original = standin.original_response(clicked.id)
        assert original is not None and original["id"] == str(followup.id)
        assert original["content"] == "result"
        assert original["flags"] == 64
        assert [c.json for c in standin.callbacks(clicked.id)] == [{"type": 5, "data": {"flags": 64}}]


async def test_dm_card_click_carries_user_not_member(standin, routing):
    """A card DMed to someone is clicked in a DM: the payload has user, no member."""
    _Approve.clicks = asyncio.Queue()
    async with _running(_Client(dynamic_items=(_Approve,))) as client:
        alice = await client.fetch_user(ALICE)
        view = discord.ui.View(timeout=None)
        view.add_item(_Approve("feedf00d"))
        card = await alice.send("card for you", view=view)
        assert isinstance(card.channel, discord.DMChannel)
        clicked = await standin.click_button(card.id, "cs:approve:feedf00d", ALICE)
        _, interaction = await asyncio.wait_for(_Approve.clicks.get(), 5)
        assert "member" not in clicked.payload and clicked.payload["user"]["id"] == str(ALICE)
        assert clicked.payload["context"] == 1
        assert isinstance(interaction.user, discord.User) and interaction.guild is None
        assert standin.messages(card.channel.id)[0]["content"] == "card for you"


async def test_people_editing_messages_dispatch_message_update(standin, routing):
    """edit_message dispatches MESSAGE_UPDATE with the full message."""
    async with _running(_Client()) as client:
        waiting = _expect(client, "message", lambda m: m.author.id == ALICE)
        await _listening()
        sent = await standin.send_message(GENERAL, ALICE, "first draft")
        await waiting
        edited = _expect(client, "message_edit", lambda before, after: after.author.id == ALICE)
        await _listening()
        await standin.edit_message(GENERAL, sent["id"], "second draft")
        before, after = await edited
        assert (before.content, after.content) == ("first draft", "second draft")


async def test_people_deleting_messages_dispatch_message_delete(standin, routing):
    """delete_message dispatches MESSAGE_DELETE; reading the message afterwards is 404 Unknown Message (10008)."""
    async with _running(_Client()) as client:
        waiting = _expect(client, "message", lambda m: m.author.id == ALICE)
        await _listening()
        sent = await standin.send_message(GENERAL, ALICE, "oops, a secret")
        message = await waiting
        deleted = _expect(client, "raw_message_delete", lambda payload: payload.message_id == message.id)
        await _listening()
        await standin.delete_message(GENERAL, sent["id"])
        await deleted
        with pytest.raises(discord.NotFound) as gone:
            await client.get_partial_messageable(GENERAL).fetch_message(message.id)
        assert gone.value.code == 10008


async def test_second_response_to_an_interaction_fails_with_40060(standin, routing):
    """Answering an interaction twice (e.g. a second replica) gets 400 code 40060."""
    _Approve.clicks = asyncio.Queue()
    async with _running(_Client(dynamic_items=(_Approve,))) as client:
        card = await _post_dynamic_button(client, "deadbeef")
        clicked = await standin.click_button(card.id, "cs:approve:deadbeef", ALICE)
        await asyncio.wait_for(_Approve.clicks.get(), 5)
        replica = discord.Interaction(data=clicked.payload, state=client._connection)
        with pytest.raises(discord.HTTPException) as error:
            await replica.response.defer()
        assert (error.value.status, error.value.code) == (400, 40060)
        assert [c.status for c in standin.callbacks(clicked.id)] == [200, 400]


async def test_late_initial_response_is_unknown_interaction(standin, routing):
    """An initial response after the response window gets 404 code 10062."""
    standin.interaction_response_timeout = 0.1
    errors: asyncio.Queue[BaseException] = asyncio.Queue()

    class Slow(discord.ui.View):
        @discord.ui.button(label="Slow", custom_id="slow")
        async def slow(self, interaction: discord.Interaction, button: discord.ui.Button) -> None:
            await asyncio.sleep(0.2)
            try:
                await interaction.response.defer()
            except discord.HTTPException as error:
                errors.put_nowait(error)

    async with _running(_Client()) as client:
        card = await client.get_channel(GENERAL).send("card", view=Slow(timeout=None))
        await standin.click_button(card.id, "slow", ALICE)
        error = await asyncio.wait_for(errors.get(), 5)
        assert isinstance(error, discord.NotFound) and error.code == 10062


async def test_reconnects_with_resume_after_a_drop(standin, routing):
    """After disconnect_all the client RESUMEs at resume_gateway_url and missed events arrive."""
    async with _running(_Client()) as client:
        resumed = _expect(client, "resumed", lambda: True)
        await _listening()
        await standin.disconnect_all(code=4000)
        await standin.send_message(GENERAL, ALICE, "sent while you were away")
        await standin.wait_until_ready()
        await resumed
        assert standin.resume_count == 1
        assert [c.kind for c in standin.gateway_connections] == ["identify", "resume"]
        assert standin.gateway_connections[1].path == "/resume-gateway"
        waiting = _expect(client, "message", lambda m: m.content == "after the resume")
        await _listening()
        await standin.send_message(GENERAL, ALICE, "after the resume")
        await waiting
    assert len(standin.identifies) == 1


async def test_reidentifies_at_the_standin_after_invalid_session(standin, routing):
    """After INVALID_SESSION the client IDENTIFYs again at the stand-in, never at discord.gg."""
    async with _running(_Client()) as client:
        ready_again = _expect(client, "ready", lambda: True)
        await _listening()
        # op 9 on a live connection: discord.py falls back to DEFAULT_GATEWAY for the IDENTIFY.
        await standin.invalidate_sessions()
        await ready_again
        ready_once_more = _expect(client, "ready", lambda: True)
        await _listening()
        # A drop, then a refused RESUME: discord.py IDENTIFYs at the URL it tried to resume at.
        await standin.disconnect_all(code=4000, resumable=False)
        await ready_once_more
        assert [(c.path, c.kind) for c in standin.gateway_connections] == [
            ("/gateway", "identify"),
            ("/gateway", "identify"),
            ("/resume-gateway", "resume"),
            ("/resume-gateway", "identify"),
        ]
        assert len(standin.identifies) == 3 and standin.resume_count == 0
        assert client.get_guild(GUILD) is not None


async def test_without_message_content_intent_content_is_empty(standin, routing):
    """Without MESSAGE_CONTENT, content is empty unless the bot is mentioned or it is a DM."""
    intents = discord.Intents(guilds=True, guild_messages=True, dm_messages=True)
    async with _running(_Client(intents=intents)) as client:
        assert standin.intents == intents.value
        assert not standin.intents & Intent.MESSAGE_CONTENT
        plain = _expect(client, "message", lambda m: m.author.id == ALICE)
        await _listening()
        await standin.send_message(GENERAL, ALICE, "secret plans")
        assert (await plain).content == ""
        mention = _expect(client, "message", lambda m: m.author.id == ALICE)
        await _listening()
        await standin.send_message(GENERAL, ALICE, f"<@{BOT_ID}> do it")
        assert (await mention).content == f"<@{BOT_ID}> do it"
        dm = _expect(client, "message", lambda m: m.guild is None)
        await _listening()
        await standin.send_dm(ALICE, "just us")
        assert (await dm).content == "just us"


async def test_app_command_tree_sync_and_invoke(standin, routing):
    """tree.sync() PUTs the commands; invoke_command runs one and its reply is recorded."""
    client = _Client()
    tree = app_commands.CommandTree(client)
    group = app_commands.Group(name="countersign", description="Approvals")

    @group.command(name="show", description="Show the policy")
    async def show(interaction: discord.Interaction) -> None:
        await interaction.response.send_message("policy: review", ephemeral=True)

    tree.add_command(group)
    async with _running(client):
        synced = await tree.sync()
        assert [c.name for c in synced] == ["countersign"]
        [put] = standin.requests_to("PUT", rf"/applications/{APP_ID}/commands")
        assert put.json[0]["options"][0]["name"] == "show"
        invoked = await standin.invoke_command(
            "countersign", ALICE, channel_id=GENERAL, options=[{"name": "show", "type": 1}]
        )
        [callback] = await standin.wait_for_request("POST", rf"/interactions/{invoked.id}/.+/callback")
        assert callback.json["type"] == 4
        assert callback.json["data"] == {"content": "policy: review", "flags": 64, "tts": False}
        response = standin.original_response(invoked.id)
        assert response is not None and response["interaction_metadata"]["name"] == "countersign"


async def test_guard_blocks_urls_outside_the_standin(standin, routing):
    """discord.py reaching for discord.com's CDN is refused and recorded, never sent."""
    async with _running(_Client()) as client:
        assert client.user is not None
        with pytest.raises(OutsideStandInError):
            await client.user.display_avatar.read()
    assert routing.blocked == [str(client.user.display_avatar.url)]
    routing.blocked.clear()


async def test_reconnect_opcode_makes_the_client_resume(standin, routing):
    """op 7 RECONNECT makes discord.py close and RESUME at resume_gateway_url."""
    async with _running(_Client()) as client:
        resumed = _expect(client, "resumed", lambda: True)
        await _listening()
        await standin.request_reconnect()
        await resumed
        assert standin.resume_count == 1
        assert standin.gateway_connections[-1].path == "/resume-gateway"
        assert standin.gateway_connections[0].query["compress"] == "zstd-stream"


async def test_raw_gateway_speaks_zlib_stream_and_checks_the_token(standin):
    """A raw zlib-stream connection gets a compressed HELLO; a bad token is closed with 4004."""
    decompress = zlib.decompressobj()
    url = f"{standin.gateway_url}?v=10&encoding=json&compress=zlib-stream"
    async with aiohttp.ClientSession() as http, http.ws_connect(url) as ws:
        frame = await ws.receive_bytes(timeout=5)
        assert frame.endswith(b"\x00\x00\xff\xff")
        hello = json.loads(decompress.decompress(frame))
        assert hello["op"] == 10 and hello["d"]["heartbeat_interval"] == 41_250
        await ws.send_json({"op": 1, "d": None})
        ack = json.loads(decompress.decompress(await ws.receive_bytes(timeout=5)))
        assert ack["op"] == 11
        await ws.send_json({"op": 2, "d": {"token": "wrong", "intents": 513, "properties": {}}})
        closing = await ws.receive(timeout=5)
        assert closing.type is aiohttp.WSMsgType.CLOSE and closing.data == 4004
    assert standin.identifies == []


async def test_rest_reads_threads_and_reactions_through_discord_py(standin, routing):
    """Fetches, reactions, threads and forum posts work through discord.py's own calls."""
    standin.add_guild(
        GUILD + 1,
        "second guild",
        owner_id=OWNER,
        channels=[make_forum_channel(GUILD + 2, "tickets")],
        members=[make_member(make_user(OWNER, "owner"))],
    )
    async with _running(_Client()) as client:
        channel = await client.fetch_channel(GENERAL)
        assert isinstance(channel, discord.TextChannel) and channel.name == "general"
        sent = await channel.send("react to me")
        fetched = await channel.fetch_message(sent.id)
        assert fetched.content == "react to me"
        await fetched.add_reaction("\N{HOURGLASS}")
        assert standin.message(sent.id)["reactions"][0]["emoji"]["name"] == "\N{HOURGLASS}"
        await fetched.remove_reaction("\N{HOURGLASS}", client.user)
        assert "reactions" not in standin.message(sent.id) or not standin.message(sent.id)["reactions"]
        thread = await sent.create_thread(name="discussion")
        assert thread.id == sent.id and thread.parent_id == GENERAL
        await thread.send("inside")
        assert standin.messages(thread.id)[0]["content"] == "inside"
        private = await channel.create_thread(name="private", type=discord.ChannelType.private_thread)
        assert private.type is discord.ChannelType.private_thread
        forum = client.get_channel(GUILD + 2)
        assert isinstance(forum, discord.ForumChannel)
        post = await forum.create_thread(name="ticket 7", content="it is broken")
        assert post.thread.parent_id == GUILD + 2 and post.message.content == "it is broken"
        guild = await client.fetch_guild(GUILD)
        assert guild.name == "Countersign test guild"
        member = await guild.fetch_member(ALICE)
        assert member.display_name == "Alice" and [r.id for r in member.roles][-1] == APPROVERS
        with pytest.raises(discord.NotFound) as missing:
            await guild.fetch_member(999)
        assert missing.value.code == 10007
        history = [m.content async for m in channel.history(limit=5)]
        assert history[0] == "react to me"
        with_file = await channel.send("log", file=discord.File(io.BytesIO(b"line 1\n"), "run.log"))
        [attachment] = standin.message(with_file.id)["attachments"]
        assert (attachment["filename"], attachment["size"]) == ("run.log", 7)
        assert with_file.attachments[0].filename == "run.log"
        standin.fail_next("POST", rf"/channels/{GENERAL}/messages", status=403, code=50013)
        with pytest.raises(discord.Forbidden) as forbidden:
            await channel.send("nope")
        assert forbidden.value.code == 50013


class _ShardClient(discord.AutoShardedClient):
    """discord.py's sharded client on the given shards, without its 5 s spacing between IDENTIFYs."""

    def __init__(self, shard_ids: list[int], shard_count: int) -> None:
        super().__init__(intents=INTENTS, guild_ready_timeout=0.05, shard_ids=shard_ids, shard_count=shard_count)

    async def before_identify_hook(self, shard_id: int | None, *, initial: bool = False) -> None:
        return None


async def test_shards_get_only_their_guilds_and_dms_go_to_shard_zero():
    """Two sharded clients (shard 0 and 1 of 2): each sees only guilds with (guild_id >> 22) % 2 == its id; a DM goes to shard 0."""
    other = GUILD + (1 << 22)
    other_channel = 1_300_000_000_000_000_110
    assert (GUILD >> 22) % 2 == 0 and (other >> 22) % 2 == 1
    members = [make_member(make_user(OWNER, "owner")), make_member(make_user(ALICE, "alice"))]
    auth = {"Authorization": f"Bot {TOKEN}"}
    async with (
        DiscordStandIn(bot_token=TOKEN, application_id=APP_ID, bot_user_id=BOT_ID, shards=2, max_concurrency=2) as api,
        aiohttp.ClientSession() as http,
    ):
        api.add_guild(GUILD, "zero", owner_id=OWNER, channels=[make_text_channel(GENERAL, "general")], members=members)
        api.add_guild(other, "one", owner_id=OWNER, channels=[make_text_channel(other_channel, "g")], members=members)
        async with http.get(f"{api.api_url}/gateway/bot", headers=auth) as response:
            body = await response.json()
        assert body["shards"] == 2 and body["session_start_limit"]["max_concurrency"] == 2
        with point_discord_py_at(api.api_url) as routes:
            async with _running(_ShardClient([0], 2)) as zero, _running(_ShardClient([1], 2)) as one:
                assert [g.id for g in zero.guilds] == [GUILD] and [g.id for g in one.guilds] == [other]
                seen = {"zero": asyncio.Event(), "one": asyncio.Event(), "dm": asyncio.Event()}
                got: dict[str, list[int]] = {"zero": [], "one": []}

                def on(name: str) -> Callable[[discord.Message], Any]:
                    async def listener(message: discord.Message) -> None:
                        got[name].append(message.channel.id)
                        seen["dm" if message.guild is None else name].set()

                    return listener

                zero.on_message = on("zero")
                one.on_message = on("one")
                await api.send_message(GENERAL, ALICE, "in zero")
                await api.send_message(other_channel, ALICE, "in one")
                dm = await api.send_dm(ALICE, "a dm")
                await asyncio.wait_for(asyncio.gather(*(e.wait() for e in seen.values())), timeout=30)
        assert routes.blocked == []
        assert got == {"zero": [GENERAL, int(dm["channel_id"])], "one": [other_channel]}
        assert {r.shard: r.bucket for r in api.identify_log} == {(0, 2): 0, (1, 2): 1}
        assert [d.shard for d in api.dispatched("MESSAGE_CREATE") if d.data["id"] == dm["id"]] == [(0, 2)]

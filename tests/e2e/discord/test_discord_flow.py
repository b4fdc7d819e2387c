"""The whole Discord flow through the real discord.py client, the Discord stand-in and Gemini's."""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass
from typing import Any

import asyncpg
import pytest

from adapters.discord import messages as msg
from adapters.words.conversation import MESSAGE_FAILED
from bot.upkeep.unfinished_work import MAX_ATTEMPTS
from countersign.server import BotServer
from tests.e2e.agent_script import LONG_ANSWER
from tests.e2e.conftest import (
    D_ALICE,
    D_APP,
    D_BOB,
    D_BOT,
    D_CAROL,
    D_CHANNEL,
    D_GUILD,
    D_THREAD,
    make_discord_settings,
)
from tests.e2e.drivers import DiscordDriver, is_discord_card

pytestmark = pytest.mark.e2e

MESSAGES = r"/channels/{channel}/messages$"
NO_PINGS = {"parse": []}


@dataclass(frozen=True)
class Card:
    channel: int
    message_id: str
    approval_id: str
    custom_ids: list[str]


def _buttons(message: dict[str, Any]) -> list[str]:
    return [c["custom_id"] for row in message.get("components") or [] for c in row.get("components", [])]


async def mention(api, user: int, text: str, channel: int = D_CHANNEL) -> dict[str, Any]:
    return await api.send_message(channel, user, f"<@{D_BOT}> {text}", mentions=[D_BOT], guild_id=D_GUILD)


async def wait_card(api, channel: int = D_CHANNEL, count: int = 1) -> list[Card]:
    # A status line's Stop button is a component too: only a card's buttons make a card.
    posts = await api.wait_for_request("POST", MESSAGES.format(channel=channel), is_discord_card, count=count)
    cards = []
    for post in posts:
        ids = _buttons(post.json)
        approval_id = ids[0].split(":")[2]
        cards.append(Card(channel, post.response["id"], approval_id, ids))
    return cards


async def wait_answer(api, channel: int = D_CHANNEL, starts: str = "Result: ", count: int = 1) -> list[str]:
    posts = await api.wait_for_request(
        "POST",
        MESSAGES.format(channel=channel),
        lambda r: str((r.json or {}).get("content", "")).startswith(starts),
        count=count,
    )
    return [p.json["content"] for p in posts]


def current_custom_id(api, message_id: str, action: str) -> str:
    """The custom_id of a button as the card shows it now (it names the arguments' version)."""
    ids = _buttons(api.message(message_id))
    return next((i for i in ids if i.startswith(f"cs:{action}:")), ids[0] if ids else f"cs:{action}:none")


async def click(api, card: Card, user: int, action: str, *, answered: bool = True, **kw: Any):
    """Click a button; by default wait until the bot answered the interaction."""
    interaction = await api.click_button(
        card.message_id,
        current_custom_id(api, card.message_id, action),
        user,
        guild_id=D_GUILD,
        channel_id=card.channel,
        **kw,
    )
    if answered:
        await wait_callback(api, interaction)
    return interaction


async def wait_callback(api, interaction) -> None:
    await api.wait_for_request("POST", rf"/interactions/{interaction.id}/[^/]+/callback")


async def wait_followup(api, interaction) -> list[dict[str, Any]]:
    await api.wait_for_request("POST", rf"/webhooks/{D_APP}/{interaction.token}")
    return api.followups(interaction.id)


def callback_types(api, interaction) -> list[int]:
    return [c.json["type"] for c in api.callbacks(interaction.id) if c.status < 300]


async def settle(bot: BotServer) -> None:
    assert bot.runtime is not None
    await bot.runtime.service.tasks.join()


def card_embed(api, card: Card) -> dict[str, Any]:
    return api.message(card.message_id)["embeds"][0]


async def test_approve_runs_once_and_the_card_is_edited_in_place(discord_bot, discord_api, target):
    """Mention -> embed card with buttons -> requester approves -> one request, card edited, answer."""
    await mention(discord_api, D_ALICE, "post widget")
    [card] = await wait_card(discord_api)
    version = card.custom_ids[0].split(":")[3]
    assert card.custom_ids == [f"cs:{a}:{card.approval_id}:{version}" for a in ("approve", "edit", "reject")]
    assert all(len(c) <= 100 for c in card.custom_ids)
    embed = card_embed(discord_api, card)
    assert (
        "http_request" in json.dumps(embed)
        and "widget" in embed["description"]
        and f"<@{D_ALICE}>" in json.dumps(embed)
    )
    assert target.requests == []

    interaction = await click(discord_api, card, D_ALICE, "approve")
    [answer] = await wait_answer(discord_api)
    await settle(discord_bot)
    assert callback_types(discord_api, interaction) == [6]  # deferred at once, silently
    assert [r.json for r in target.requests] == [{"name": "widget"}]
    assert "widget" in answer
    edited = discord_api.message(card.message_id)
    assert _buttons(edited) == []
    assert "Approved" in edited["embeds"][0]["title"] and f"<@{D_ALICE}>" in json.dumps(edited["embeds"][0])
    assert discord_api.typing(D_CHANNEL) >= 1


async def test_edit_opens_a_prefilled_modal_and_runs_the_edited_args(discord_bot, discord_api, target):
    """Edit answers with a modal holding the JSON; the submitted args are what runs."""
    await mention(discord_api, D_ALICE, "post widget")
    [card] = await wait_card(discord_api)
    opened = await click(discord_api, card, D_ALICE, "edit")
    [callback] = [c for c in discord_api.callbacks(opened.id) if c.status < 300]
    assert callback.json["type"] == 9
    modal = callback.json["data"]
    assert modal["custom_id"] == f"cs:edit-modal:{card.approval_id}"
    prefill = json.dumps(modal)
    assert "widget" in prefill
    edited = {"method": "POST", "url": target.url(), "body": {"name": "gadget"}}
    await discord_api.submit_modal(modal["custom_id"], D_ALICE, {"args": json.dumps(edited)})
    await wait_answer(discord_api)
    await settle(discord_bot)
    assert [r.json for r in target.requests] == [{"name": "gadget"}]
    embed = card_embed(discord_api, card)
    assert "edits" in embed["title"] and "gadget" in json.dumps(embed)


async def test_reject_with_reason(discord_bot, discord_api, target, gemini):
    """Reject opens a modal; the reason reaches the model and no request is made."""
    await mention(discord_api, D_ALICE, "post widget")
    [card] = await wait_card(discord_api)
    await click(discord_api, card, D_ALICE, "reject")
    await discord_api.submit_modal(f"cs:reject-modal:{card.approval_id}", D_ALICE, {"reason": "change freeze"})
    [answer] = await wait_answer(discord_api)
    await settle(discord_bot)
    assert target.requests == []
    assert "change freeze" in answer
    embed = card_embed(discord_api, card)
    assert "Rejected" in embed["title"] and "change freeze" in json.dumps(embed)


async def test_refused_clicker_gets_an_ephemeral_message_and_nothing_changes(discord_bot, discord_api, target):
    """Bob (no Manage Server, not the requester) is refused privately; Carol (Manage Server) may decide."""
    await mention(discord_api, D_ALICE, "post widget")
    [card] = await wait_card(discord_api)
    refused = await click(discord_api, card, D_BOB, "approve")
    [followup] = await wait_followup(discord_api, refused)
    assert followup["flags"] & 64 and "can't decide" in followup["content"]
    edit_refused = await click(discord_api, card, D_BOB, "edit")
    [callback] = [c for c in discord_api.callbacks(edit_refused.id) if c.status < 300]
    assert callback.json["type"] == 4 and callback.json["data"]["flags"] & 64
    assert target.requests == []
    assert _buttons(discord_api.message(card.message_id))
    await click(discord_api, card, D_CAROL, "approve")
    await wait_answer(discord_api)
    assert len(target.requests) == 1
    assert f"<@{D_CAROL}>" in json.dumps(card_embed(discord_api, card))


async def test_double_click_and_two_approvers_decide_once(discord_bot, discord_api, target):
    """Concurrent clicks (a double click and a second approver): one decision; the others told who decided."""
    await mention(discord_api, D_ALICE, "post widget")
    [card] = await wait_card(discord_api)
    clicks = await asyncio.gather(
        click(discord_api, card, D_ALICE, "approve", answered=False),
        click(discord_api, card, D_ALICE, "approve", answered=False),
        click(discord_api, card, D_CAROL, "approve", answered=False),
    )
    await wait_answer(discord_api)
    await settle(discord_bot)
    assert len(target.requests) == 1
    await discord_api.wait_for_request("POST", rf"/webhooks/{D_APP}/.+", count=2)
    told = [f for c in clicks for f in discord_api.followups(c.id)]
    assert len(told) == 2
    assert all("already approved by" in f["content"] and f["flags"] & 64 for f in told)


async def test_a_new_message_while_pending_gets_a_link_to_the_card(discord_bot, discord_api, gemini):
    """A message in the conversation while the card waits is not given to the agent; it links the card."""
    await mention(discord_api, D_ALICE, "post widget")
    [card] = await wait_card(discord_api)
    before = len(gemini.requests)
    await mention(discord_api, D_BOB, "hello?")
    [notice] = await wait_answer(discord_api, starts=f"<@{D_BOB}> a tool call")
    await settle(discord_bot)
    assert f"https://discord.com/channels/{D_GUILD}/{D_CHANNEL}/{card.message_id}" in notice
    assert len(gemini.requests) == before


async def test_a_click_after_the_view_timed_out_still_works(discord_bot, discord_api, target):
    """The card's view is stopped right after sending; the DynamicItem registry still handles clicks."""
    await mention(discord_api, D_ALICE, "post widget")
    [card] = await wait_card(discord_api)
    assert discord_bot.runtime is not None
    await settle(discord_bot)  # the turn that posted the card is over; its view was stopped long ago
    await click(discord_api, card, D_ALICE, "approve")
    await wait_answer(discord_api)
    assert len(target.requests) == 1


async def test_restart_between_card_and_click(db_url, gemini, target, discord_api):
    """A new bot (a new discord.py client) handles the click on a card the previous one posted."""
    from tests.standins.discord_api import point_discord_py_at

    settings = make_discord_settings(db_url, gemini, target, discord_api)
    with point_discord_py_at(discord_api.api_url):
        async with BotServer(settings):
            await mention(discord_api, D_ALICE, "post widget")
            [card] = await wait_card(discord_api)
        async with BotServer(settings) as second:
            await click(discord_api, card, D_ALICE, "approve")
            await wait_answer(discord_api)
            await settle(second)
    assert len(target.requests) == 1


async def test_an_edit_modal_opened_before_a_restart_is_still_handled(db_url, gemini, target, discord_api):
    """The modal's submission reaches a restarted bot, which reads the approval from its custom_id."""
    from tests.standins.discord_api import point_discord_py_at

    settings = make_discord_settings(db_url, gemini, target, discord_api)
    with point_discord_py_at(discord_api.api_url):
        async with BotServer(settings):
            await mention(discord_api, D_ALICE, "post widget")
            [card] = await wait_card(discord_api)
            await click(discord_api, card, D_ALICE, "edit")
        async with BotServer(settings) as second:
            edited = {"method": "POST", "url": target.url(), "body": {"name": "late"}}
            await discord_api.submit_modal(f"cs:edit-modal:{card.approval_id}", D_ALICE, {"args": json.dumps(edited)})
            await wait_answer(discord_api)
            await settle(second)
    assert [r.json for r in target.requests] == [{"name": "late"}]


async def test_invalid_edit_is_refused_ephemerally_with_a_way_to_retry(discord_bot, discord_api, target):
    """Broken JSON or a schema error: an ephemeral reason and an Edit again button; the card stays usable."""
    await mention(discord_api, D_ALICE, "post widget")
    [card] = await wait_card(discord_api)
    for raw, expected in [('{"method": ', "not valid JSON"), ('{"method": "POST"}', "url")]:
        await click(discord_api, card, D_ALICE, "edit")
        submitted = await discord_api.submit_modal(f"cs:edit-modal:{card.approval_id}", D_ALICE, {"args": raw})
        await wait_callback(discord_api, submitted)
        replies = [c.json for c in discord_api.callbacks(submitted.id) if c.status < 300 and c.json["type"] == 4]
        if not replies:  # deferred first, then the reason as a followup
            replies = await wait_followup(discord_api, submitted)
        [reply] = replies
        data = reply.get("data", reply)
        assert expected in data["content"] and data["flags"] & 64
        assert f"cs:edit:{card.approval_id}" in json.dumps(data["components"])
    assert target.requests == []
    assert _buttons(discord_api.message(card.message_id))
    await click(discord_api, card, D_ALICE, "approve")
    await wait_answer(discord_api)
    assert len(target.requests) == 1


async def test_mention_injection_pings_nobody(discord_bot, discord_api):
    """Agent text with @everyone, @here and user mentions is sent with allowed_mentions none."""
    await mention(discord_api, D_ALICE, "shout")
    await wait_answer(discord_api, starts="<!channel>")
    await mention(discord_api, D_ALICE, "post widget")
    await wait_card(discord_api)
    await settle(discord_bot)
    sent = discord_api.messages(D_CHANNEL)
    assert sent
    assert all(m["allowed_mentions"] == NO_PINGS for m in sent), [m["allowed_mentions"] for m in sent]
    assert all(not m.get("mention_everyone") and not m.get("mentions") for m in sent)


async def test_a_5000_character_answer_is_split(discord_bot, discord_api):
    """Answers longer than 2,000 characters arrive in pieces on word boundaries."""
    await mention(discord_api, D_ALICE, "long")
    await wait_answer(discord_api, starts="All work", count=1)
    await settle(discord_bot)
    pieces = [m["content"] for m in discord_api.messages(D_CHANNEL) if m.get("content")]
    assert len(pieces) >= 3 and all(len(p) <= 2000 for p in pieces)
    assert " ".join(pieces).split() == LONG_ANSWER.split()


async def test_a_thread_is_a_ticket_with_its_own_conversation(discord_bot, discord_api, gemini):
    """A thread has its own thread_id: its history is separate from the channel's."""
    await mention(discord_api, D_ALICE, "hello from the channel")
    await wait_answer(discord_api, starts="You said: hello from the channel")
    await mention(discord_api, D_ALICE, "hello from the ticket", channel=D_THREAD)
    await wait_answer(discord_api, channel=D_THREAD, starts="You said: hello from the ticket")
    await discord_api.send_message(D_THREAD, D_ALICE, "no mention needed here", guild_id=D_GUILD)
    await wait_answer(discord_api, channel=D_THREAD, starts="You said: no mention needed here")
    await settle(discord_bot)
    last = json.dumps(gemini.requests[-1].contents)
    assert "hello from the ticket" in last and "hello from the channel" not in last
    conversations = await discord_bot.runtime.database.pool.fetch(
        "SELECT thread_id FROM conversations ORDER BY thread_id"
    )
    assert [r["thread_id"] for r in conversations] == [
        f"discord:{D_GUILD}:{D_CHANNEL}",
        f"discord:{D_GUILD}:{D_CHANNEL}:{D_THREAD}",
    ]


async def test_plain_channel_chatter_bots_and_edits_are_ignored(discord_bot, discord_api, gemini):
    """Without a mention, channel messages are ignored; other bots and edits too."""
    await discord_api.send_message(D_CHANNEL, D_ALICE, "just chatting", guild_id=D_GUILD)
    sent = await mention(discord_api, D_ALICE, "hello")
    await wait_answer(discord_api, starts="You said: hello")
    await discord_api.edit_message(D_CHANNEL, sent["id"], f"<@{D_BOT}> edited text")
    # Gateway events arrive in order: once the mention after the edit is answered, the edit was seen.
    await mention(discord_api, D_ALICE, "after the edit")
    await wait_answer(discord_api, starts="You said: after the edit")
    await settle(discord_bot)
    assert len(gemini.requests) == 2
    assert not any("edited text" in json.dumps(r.contents) for r in gemini.requests)
    assert re.search("chatting", json.dumps(gemini.requests[-1].contents)) is None


async def test_dm_conversation(discord_bot, discord_api):
    """A DM needs no mention and is its own conversation; only the requester may decide there."""
    dm = await discord_api.send_dm(D_ALICE, "hi in private")
    channel = int(dm["channel_id"])
    [answer] = await wait_answer(discord_api, channel=channel, starts="You said: hi in private")
    assert answer == "You said: hi in private"


def _cards_in(api, channel: int) -> list[Any]:
    return [r for r in api.requests_to("POST", MESSAGES.format(channel=channel)) if is_discord_card(r)]


async def _strict_server(discord_bot, discord_api) -> DiscordDriver:
    """The server needs two approvals for `http_request`, and nobody approves their own call."""
    driver = DiscordDriver(discord_bot, discord_api)
    assert "Updated quorum" in await driver.command("carol", "quorum", tool="http_request", count=2)
    assert "Updated self-approval" in await driver.command("carol", "self-approval", state="off")
    return driver


async def test_a_dm_is_no_way_around_a_servers_quorum_and_self_approval(discord_bot, discord_api, target, gemini):
    """Refused alone in the server, alice asks the same in a DM: one line names the server, no card, nothing runs."""
    driver = await _strict_server(discord_bot, discord_api)
    await driver.ask("alice", "post widget")
    [card] = await driver.cards()
    assert "approve it" in (await driver.approve(card, "alice", private=True) or "")
    dm = await discord_api.send_dm(D_ALICE, "post widget")
    channel = int(dm["channel_id"])
    [told] = await wait_answer(discord_api, channel=channel, starts="I can't run")
    assert told == (
        "I can't run `http_request` from a DM: in **Countersign e2e** it needs someone other than you to "
        "approve it, and nobody else can in a DM. Ask there instead."
    )
    [answer] = await wait_answer(discord_api, channel=channel)
    assert "Rejected by policy" in answer  # what the model read
    await settle(discord_bot)
    assert _cards_in(discord_api, channel) == [] and target.requests == []
    assert discord_api.requests_to("GET", rf"/guilds/{D_GUILD}/members/{D_ALICE}")  # asked Discord, no intent needed


async def test_someone_outside_the_strict_server_still_decides_their_own_dm_calls(discord_bot, discord_api, target):
    """frank shares no server with the bot: the server's rules are not his, so his DM card is his to approve."""
    from tests.standins.discord_api import make_user

    await _strict_server(discord_bot, discord_api)
    frank = 1_700_000_000_000_000_099
    discord_api.add_user(make_user(frank, "frank"))
    dm = await discord_api.send_dm(frank, "post widget")
    channel = int(dm["channel_id"])
    [card] = await wait_card(discord_api, channel=channel)
    interaction = await discord_api.click_button(
        card.message_id, current_custom_id(discord_api, card.message_id, "approve"), frank, channel_id=channel
    )
    await wait_callback(discord_api, interaction)
    await wait_answer(discord_api, channel=channel)
    assert [r.json for r in target.requests] == [{"name": "widget"}]


async def test_a_dm_call_is_refused_when_the_servers_cannot_be_checked(discord_bot, discord_api, target):
    """Discord fails the member lookup: the DM call is refused (fail closed) with a line saying why, and nothing runs."""
    await _strict_server(discord_bot, discord_api)
    discord_api.fail_next("GET", rf"/guilds/{D_GUILD}/members/{D_ALICE}", status=403, code=50001)
    dm = await discord_api.send_dm(D_ALICE, "post widget")
    channel = int(dm["channel_id"])
    [told] = await wait_answer(discord_api, channel=channel, starts="I can't run")
    assert "could not check the rules of the servers we share" in told, told
    [answer] = await wait_answer(discord_api, channel=channel)
    assert "Rejected by policy" in answer
    await settle(discord_bot)
    assert _cards_in(discord_api, channel) == [] and target.requests == []


async def test_a_message_dispatched_again_is_handled_once(discord_bot, discord_api, gemini):
    """Discord delivers the same MESSAGE_CREATE twice (a resumed session): one turn, one answer."""
    sent = await mention(discord_api, D_ALICE, "hello once")
    [answer] = await wait_answer(discord_api, starts="You said")
    await discord_api.dispatch_again(sent["id"])
    await mention(discord_api, D_ALICE, "and again")  # a later message, handled after the repeat
    await wait_answer(discord_api, starts="You said: and again")
    await settle(discord_bot)
    assert answer == "You said: hello once"
    assert [r.last_user_text for r in gemini.requests] == ["hello once", "and again"]


async def _given_up(bot: BotServer, api, db_url: str, sent: dict[str, Any], channel: int, *, deleted: bool) -> str:
    """Leave `sent` unanswered until the upkeep gives it up; its author deletes it first if `deleted`.

    Its answer could not be posted in `D_CHANNEL` (a 403), so the message stays in the inbox;
    its attempts are then set to the last, the run's to past the last (as 15 minutes of failures
    would), and one pass of the upkeep gives both up. Returns the thread id.
    """
    await api.wait_for_request("POST", MESSAGES.format(channel=D_CHANNEL), lambda r: r.status == 403)
    await settle(bot)
    connection = await asyncpg.connect(db_url)
    try:
        [thread_id] = await connection.fetch("SELECT thread_id FROM inbox WHERE status = 'accepted'")
        if deleted:
            await api.delete_message(channel, sent["id"])
        await connection.execute("UPDATE inbox SET attempts = $1, retry_at = now()", MAX_ATTEMPTS)
        await connection.execute("UPDATE conversations SET attempts = $1, retry_at = now()", MAX_ATTEMPTS + 1)
    finally:
        await connection.close()
    assert bot.runtime is not None
    await bot.runtime.service.upkeep.sweep()
    await settle(bot)
    return str(thread_id["thread_id"])


def _bot_posts(api, channel: int) -> list[str]:
    """What the bot posted in `channel` (its refused attempts left out)."""
    posts = api.requests_to("POST", MESSAGES.format(channel=channel))
    return [str((r.json or {}).get("content")) for r in posts if r.status < 300]


@pytest.mark.parametrize("deleted", [True, False], ids=["deleted", "kept"])
async def test_a_message_given_up_is_quoted_in_the_channel_only_while_it_exists(
    discord_bot, discord_api, db_url, deleted
):
    """A message given up after the last attempt is quoted publicly only if its author has not deleted it."""
    discord_api.fail_next("POST", MESSAGES.format(channel=D_CHANNEL), status=403, code=50013)  # the answer
    sent = await mention(discord_api, D_ALICE, "the vault code is 7741")
    thread_id = await _given_up(discord_bot, discord_api, db_url, sent, D_CHANNEL, deleted=deleted)
    posts = _bot_posts(discord_api, D_CHANNEL)
    gone = msg.MESSAGE_FAILED_DELETED.format(thread_id=thread_id)
    quoted = MESSAGE_FAILED.format(excerpt="the vault code is 7741", thread_id=thread_id)
    assert (gone in posts, quoted in posts) == (deleted, not deleted)
    if deleted:
        assert not any("7741" in post or "vault" in post for post in posts)
    assert discord_api.requests_to("GET", rf"/channels/{D_CHANNEL}/messages/{sent['id']}")  # it was looked for


@pytest.mark.parametrize(
    ("edited", "quoted"),
    [("the vault code is (removed)", "the vault code is (removed)"), ("", None)],
    ids=["edited", "emptied"],
)
async def test_a_message_given_up_is_quoted_as_its_author_last_edited_it(
    discord_bot, discord_api, db_url, edited, quoted
):
    """Alice edits the secret out of her message before it is given up: the public notice quotes what it says now, or only links it when nothing is left."""
    discord_api.fail_next("POST", MESSAGES.format(channel=D_CHANNEL), status=403, code=50013)  # the answer
    sent = await mention(discord_api, D_ALICE, "the vault code is 7741")
    await discord_api.wait_for_request("POST", MESSAGES.format(channel=D_CHANNEL), lambda r: r.status == 403)
    await discord_api.edit_message(D_CHANNEL, sent["id"], f"<@{D_BOT}> {edited}")
    thread_id = await _given_up(discord_bot, discord_api, db_url, sent, D_CHANNEL, deleted=False)
    posts = _bot_posts(discord_api, D_CHANNEL)
    assert not any("7741" in post for post in posts), posts
    if quoted is not None:
        assert MESSAGE_FAILED.format(excerpt=quoted, thread_id=thread_id) in posts, posts
    else:
        url = f"https://discord.com/channels/{D_GUILD}/{D_CHANNEL}/{sent['id']}"
        assert msg.MESSAGE_FAILED_LINKED.format(url=url, thread_id=thread_id) in posts, posts


async def test_a_deleted_mention_in_a_thread_of_a_whole_channel_conversation_is_not_quoted(
    discord_bot, discord_api, db_url
):
    """With `scope channel`, a mention in a thread answers in the channel; given up after its deletion, it is not quoted."""
    scope = await discord_api.invoke_command(
        "countersign",
        D_CAROL,
        channel_id=D_CHANNEL,
        options=[{"type": 1, "name": "scope", "options": [{"name": "kind", "type": 3, "value": "channel"}]}],
    )
    await discord_api.wait_for_request("POST", rf"/webhooks/\d+/{scope.token}")
    discord_api.fail_next("POST", MESSAGES.format(channel=D_CHANNEL), status=403, code=50013)  # the answer
    sent = await mention(discord_api, D_ALICE, "the vault code is 7741", channel=D_THREAD)
    thread_id = await _given_up(discord_bot, discord_api, db_url, sent, D_THREAD, deleted=True)
    assert thread_id == f"discord:{D_GUILD}:{D_CHANNEL}"
    posts = _bot_posts(discord_api, D_CHANNEL)
    assert msg.MESSAGE_FAILED_DELETED.format(thread_id=thread_id) in posts
    assert not any("7741" in post for post in posts + _bot_posts(discord_api, D_THREAD))
    assert discord_api.requests_to("GET", rf"/channels/{D_THREAD}/messages/{sent['id']}")  # where it was written

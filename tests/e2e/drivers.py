"""One scenario, two platforms: drivers that act like people on Slack or on Discord.

Each driver speaks to the real bot through its platform's stand-in (signed Slack requests, or
Discord gateway dispatches) and reads what the bot sent back. People are named (alice, bob,
carol, dave); carol administers the workspace on both platforms.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from adapters.slack import blocks
from adapters.slack.text import unescape
from countersign.server import BotServer
from tests.e2e import conftest as c
from tests.support import barriers
from tests.support.barriers import GENEROUS_S


@dataclass(frozen=True)
class CardHandle:
    approval_id: str
    message: str
    channel: str
    thread: str | None


@dataclass(frozen=True)
class StopHandle:
    """A progress message with a Stop button: the turn it names, and where it is."""

    turn_id: str
    message: str
    channel: str
    thread: str | None


class Driver(Protocol):
    platform: str
    ops: ClassVar[dict[str, Any]]

    def user(self, name: str) -> str: ...

    async def command(self, who: str, sub: str, **options: Any) -> str: ...

    async def ask(self, who: str, text: str) -> None: ...

    async def cards(self, count: int = 1) -> list[CardHandle]: ...

    async def approve(self, card: CardHandle, who: str, *, private: bool = False) -> str | None: ...

    async def edit(self, card: CardHandle, who: str, args: dict[str, Any], *, private: bool = False) -> str | None: ...

    async def edit_refused(self, card: CardHandle, who: str) -> str: ...

    async def reject(self, card: CardHandle, who: str, reason: str) -> None: ...

    async def forged_edit(self, card: CardHandle, who: str, args: dict[str, Any]) -> str: ...

    async def answer(self, starts: str = "Result: ") -> str: ...

    def card_text(self, card: CardHandle) -> str: ...

    async def settle(self) -> None: ...

    async def copy_in_dm(self, who: str) -> CardHandle: ...

    async def copy_in_channel(self, channel: str, *, count: int = 1) -> CardHandle: ...

    async def approve_all(self, card: CardHandle, who: str, *, clicks: int = 1) -> str: ...

    async def reject_all(self, card: CardHandle, who: str, reason: str) -> str: ...

    def has_batch(self, card: CardHandle) -> bool: ...

    def actions(self, card: CardHandle) -> list[str]: ...

    async def show_all(self, card: CardHandle, who: str) -> str: ...

    async def forge(self, card: CardHandle, who: str, action: str) -> str: ...


async def _settle(bot: BotServer) -> None:
    assert bot.runtime is not None
    await bot.runtime.service.tasks.join()


class SlackDriver:
    platform = "slack"
    _ids: ClassVar[dict[str, str]] = {
        "alice": c.ALICE,
        "bob": c.BOB,
        "carol": c.CAROL,
        "dave": "UDAVE",
        "erin": "UERIN",
    }
    ops: ClassVar[dict[str, Any]] = {"group": "SOPS"}
    """The command option naming the Ops group (a user group), whose only member is erin."""

    def __init__(self, bot: BotServer, events: Any, slack: Any) -> None:
        self.bot, self.events, self.slack = bot, events, slack
        slack.add_user("UDAVE", "dave")
        slack.add_user("UERIN", "erin")
        slack.add_usergroup("SOPS", ["UERIN"])
        self._thread: str | None = None

    def user(self, name: str) -> str:
        return self._ids[name]

    async def command(self, who: str, sub: str, **options: Any) -> str:
        words = [sub]
        o = dict(options)
        if sub == "policy":
            words += [o["tool"], o["mode"]]
        elif sub in {"approvers", "admins"}:
            words.append(o["action"])
            words.append(f"<@{self.user(o['user'])}>" if "user" in o else f"<!subteam^{o['group']}>")
        elif sub == "quorum":
            words += [o["tool"], str(o["count"])]
        elif sub == "self-approval":
            words.append(o["state"])
        elif sub == "expiry":
            words.append(o["duration"])
        elif sub == "cards":
            words.append(o["where"])
            if "channel" in o:
                words.append(f"<#{o['channel']}>")
        elif sub in {"scope", "agent"}:
            words.append(o["kind"])
        elif sub == "escalate":
            words.append(o["tool"])
            if o["after"] == "off":
                words.append("off")
            else:
                words += ["after", o["after"], "to"]
                if "user" in o:
                    words.append(f"<@{self.user(o['user'])}>")
                elif "group" in o:
                    words.append(f"<!subteam^{o['group']}>")
                else:
                    words.append(f"<#{o['channel']}>")
        elif sub == "mcp" and "accept" in o:
            words += ["accept", o["accept"]]
        elif sub == "audit":
            if "tool" in o:
                words.append(o["tool"])
            if "user" in o:
                words.append(f"<@{self.user(o['user'])}>")
        if "tool" in o and sub in {"approvers", "self-approval", "expiry"}:
            words += ["for", o["tool"]]
        if "channel" in o and sub in {"show", "policy", "scope", "agent"}:
            words += ["in", f"<#{o['channel']}>"]
        if "when" in o:
            words += ["when", o["when"]]
        url = self.slack.new_response_url(c.CHANNEL, user=self.user(who))
        before = len(self.slack.calls_to("response_url"))
        delivery = await self.events.slash_command("/countersign", " ".join(words), self.user(who), c.CHANNEL, url)
        assert delivery.status == 200
        calls = await self.slack.wait_for("response_url", count=before + 1)
        return str(calls[-1].args.get("text", ""))

    async def ask(self, who: str, text: str) -> None:
        delivery = await self.events.app_mention(c.CHANNEL, self.user(who), f"<@UBOT> {text}")
        self._thread = delivery.ts

    async def say(self, who: str, text: str) -> None:
        """A reply in the thread of the last `ask`: the same conversation, no mention needed."""
        assert self._thread is not None
        await self.events.message(c.CHANNEL, self.user(who), text, thread_ts=self._thread)

    async def cards(self, count: int = 1) -> list[CardHandle]:
        await self.slack.wait_for("chat.postMessage", lambda a: slack_buttons(a.get("blocks")), count=count)
        found = []
        for call in self.slack.calls_to("chat.postMessage"):
            buttons = slack_buttons(call.args.get("blocks"))
            if buttons:
                channel = call.args["channel"]
                messages = (
                    [m for ch in (channel,) for m in self.slack.messages(ch)] if not channel.startswith("U") else []
                )
                ts = next(
                    (
                        m["ts"]
                        for m in messages
                        if slack_buttons(m.get("blocks")) and slack_buttons(m.get("blocks"))[0] == buttons[0]
                    ),
                    "",
                )
                found.append(CardHandle(buttons[0], ts, channel, call.args.get("thread_ts")))
        return found

    async def _click(self, card: CardHandle, who: str, action: str) -> None:
        await self.events.block_actions(
            self.user(who),
            card.channel,
            card.message,
            action,
            card.approval_id,
            self.slack.new_trigger_id(),
            thread_ts=card.thread,
        )

    async def _private(self, who: str, before: int) -> str:
        calls = await self.slack.wait_for(
            "chat.postEphemeral", lambda a: a.get("user") == self.user(who), count=before + 1
        )
        return str(calls[-1].args["text"])

    def _private_count(self, who: str) -> int:
        return len([x for x in self.slack.calls_to("chat.postEphemeral") if x.args.get("user") == self.user(who)])

    def _updates(self, card: CardHandle) -> int:
        return len([u for u in self.slack.calls_to("chat.update") if u.args.get("ts") == card.message])

    async def approve(self, card: CardHandle, who: str, *, private: bool = False) -> str | None:
        """Click Approve; wait for the private reply, or else for the card to be redrawn."""
        before, updates = self._private_count(who), self._updates(card)
        await self._click(card, who, blocks.ACTION_APPROVE)
        if private:
            return await self._private(who, before)
        await self.slack.wait_for("chat.update", lambda a: a.get("ts") == card.message, count=updates + 1)
        await _settle(self.bot)
        return None

    async def edit(self, card: CardHandle, who: str, args: dict[str, Any], *, private: bool = False) -> str | None:
        """Click Edit and submit `args`; return the form's error, or else wait until the card shows the edit."""
        before, shown = len(self.slack.calls_to("views.open")), self.card_text(card)
        await self._click(card, who, blocks.ACTION_EDIT)
        [*_, opened] = await self.slack.wait_for("views.open", count=before + 1)
        reply = await self.events.view_submission(
            self.user(who),
            blocks.VIEW_EDIT,
            opened.args["view"]["private_metadata"],
            {blocks.EDIT_BLOCK: {blocks.EDIT_INPUT: json.dumps(args)}},
        )
        if reply.json and reply.json.get("response_action") == "errors":
            return str(reply.json["errors"][blocks.EDIT_BLOCK])
        # The card as drawn after this edit, not after any redraw: one still due for an earlier
        # click would let the next step click a card that predates the edit.
        await barriers.wait_until(lambda: self.card_text(card) != shown, f"card {card.message} to show the edit")
        await _settle(self.bot)
        return None

    async def reject(self, card: CardHandle, who: str, reason: str) -> None:
        """Click Reject and give `reason` in its form; wait until the card is redrawn."""
        opened, updates = len(self.slack.calls_to("views.open")), self._updates(card)
        await self._click(card, who, blocks.ACTION_REJECT)
        [*_, form] = await self.slack.wait_for("views.open", count=opened + 1)
        reply = await self.events.view_submission(
            self.user(who),
            blocks.VIEW_REJECT,
            form.args["view"]["private_metadata"],
            {blocks.REASON_BLOCK: {blocks.REASON_INPUT: reason}},
        )
        assert reply.status == 200 and not reply.body, reply.body  # an empty ack closes the form
        await self.slack.wait_for("chat.update", lambda a: a.get("ts") == card.message, count=updates + 1)
        await _settle(self.bot)

    async def edit_refused(self, card: CardHandle, who: str) -> str:
        """Click Edit and expect no form: return the private reply."""
        before, opened = self._private_count(who), len(self.slack.calls_to("views.open"))
        await self._click(card, who, blocks.ACTION_EDIT)
        told = await self._private(who, before)
        assert len(self.slack.calls_to("views.open")) == opened, "a form opened"
        return told

    async def forged_edit(self, card: CardHandle, who: str, args: dict[str, Any]) -> str:
        """Submit an Edit form for `card` that was never opened for `who`; return the error shown in it."""
        reply = await self.events.view_submission(
            self.user(who),
            blocks.VIEW_EDIT,
            blocks.form_metadata(card.approval_id, card.channel),
            {blocks.EDIT_BLOCK: {blocks.EDIT_INPUT: json.dumps(args)}},
        )
        assert reply.json and reply.json.get("response_action") == "errors", reply.json
        return str(reply.json["errors"][blocks.EDIT_BLOCK])

    async def answer(self, starts: str = "Result: ", count: int = 1) -> str:
        calls = await self.slack.wait_for(
            "chat.postMessage", lambda a: str(a.get("text", "")).startswith(starts), count=count
        )
        return str(calls[count - 1].args["text"])

    async def approve_racing(self, card: CardHandle, who: str) -> str | None:
        """Click Approve; return the private reply if one comes before the card is redrawn, else None."""
        before, updates = self._private_count(who), self._updates(card)
        await self._click(card, who, blocks.ACTION_APPROVE)
        await wait_until(lambda: self._private_count(who) > before or self._updates(card) > updates, GENEROUS_S)
        await _settle(self.bot)
        if self._private_count(who) > before:
            return await self._private(who, before)
        return None

    def card_has_buttons(self, card: CardHandle) -> bool:
        """Whether the card still shows its buttons."""
        return bool(slack_buttons(self.slack.message(card.channel, card.message).get("blocks")))

    async def stop_offered(self, count: int = 1) -> StopHandle:
        """Wait for the `count`th progress message offering Stop (a run going on for a while)."""
        *_, call = await self.slack.wait_for(
            "chat.postMessage", lambda a: _slack_stop(a.get("blocks")) is not None, count=count
        )
        turn_id = _slack_stop(call.args.get("blocks"))
        assert turn_id is not None
        return StopHandle(turn_id, str(call.response["ts"]), str(call.args["channel"]), call.args.get("thread_ts"))

    async def stop(self, handle: StopHandle, who: str) -> str:
        """Click Stop on the progress message; return the private reply."""
        before = self._private_count(who)
        await self.events.block_actions(
            self.user(who),
            handle.channel,
            handle.message,
            blocks.ACTION_STOP,
            handle.turn_id,
            self.slack.new_trigger_id(),
            block_id=blocks.STOP_BLOCK,
            thread_ts=handle.thread,
        )
        return await self._private(who, before)

    async def stop_command(self, who: str) -> str:
        """`/countersign stop` for the conversation of the last `ask` (its thread named by its link)."""
        assert self._thread is not None
        link = f"<https://{self.events.team_domain}.slack.com/archives/{c.CHANNEL}/p{self._thread.replace('.', '')}>"
        url = self.slack.new_response_url(c.CHANNEL, user=self.user(who))
        before = len(self.slack.calls_to("response_url"))
        delivery = await self.events.slash_command("/countersign", f"stop {link}", self.user(who), c.CHANNEL, url)
        assert delivery.status == 200
        calls = await self.slack.wait_for("response_url", count=before + 1)
        return str(calls[-1].args.get("text", ""))

    async def stopped_notice(self, count: int = 1) -> str:
        """Wait for the `count`th line saying who stopped a turn, posted in the conversation."""
        *_, call = await self.slack.wait_for(
            "chat.postMessage", lambda a: "Stopped by" in str(a.get("text", "")), count=count
        )
        return str(call.args["text"])

    def progress_text(self, handle: StopHandle) -> str:
        """What the progress message says now (its last text, while it exists)."""
        updates = [u for u in self.slack.calls_to("chat.update") if u.args.get("ts") == handle.message]
        return str(updates[-1].args["text"]) if updates else ""

    async def copy_in_dm(self, who: str) -> CardHandle:
        """The copy of a card posted in `who`'s DMs (an escalation, or `cards dm`)."""
        user = self.user(who)
        await self.slack.wait_for(
            "chat.postMessage", lambda a: a.get("channel") == user and bool(slack_buttons(a.get("blocks")))
        )
        return self._copy(f"D{user}")

    async def copy_in_channel(self, channel: str, *, count: int = 1) -> CardHandle:
        """The `count`th card posted in `channel` (an escalation's copy there), once it is there."""
        await self.slack.wait_for(
            "chat.postMessage",
            lambda a: a.get("channel") == channel and bool(slack_buttons(a.get("blocks"))),
            count=count,
        )
        return self._copy(channel)

    def _copy(self, channel: str) -> CardHandle:
        [message] = [m for m in self.slack.messages(channel) if slack_buttons(m.get("blocks"))][-1:]
        return CardHandle(slack_buttons(message["blocks"])[0], message["ts"], channel, message.get("thread_ts"))

    def _batch_block(self, card: CardHandle) -> dict[str, Any] | None:
        message = self.slack.message(card.channel, card.message)
        return next(
            (
                b
                for b in message.get("blocks") or []
                if b.get("type") == "actions" and b["elements"][0]["action_id"] == blocks.ACTION_APPROVE_ALL
            ),
            None,
        )

    def has_batch(self, card: CardHandle) -> bool:
        """Whether the card shows Approve all / Reject all now."""
        return self._batch_block(card) is not None

    async def approve_all(self, card: CardHandle, who: str, *, clicks: int = 1) -> str:
        """Click Approve all on a first card (`clicks` times at once); return what the clicker was told."""
        block = self._batch_block(card)
        assert block is not None, "no Approve all on this card"
        before = self._private_count(who)
        await asyncio.gather(
            *(
                self.events.block_actions(
                    self.user(who),
                    card.channel,
                    card.message,
                    blocks.ACTION_APPROVE_ALL,
                    block["elements"][0]["value"],
                    self.slack.new_trigger_id(),
                    block_id=block["block_id"],
                    thread_ts=card.thread,
                )
                for _ in range(clicks)
            )
        )
        calls = await self.slack.wait_for(
            "chat.postEphemeral", lambda a: a.get("user") == self.user(who), count=before + clicks
        )
        return "\n".join(str(call.args["text"]) for call in calls[before:])

    async def reject_all(self, card: CardHandle, who: str, reason: str) -> str:
        """Click Reject all, give the reason in its form; return what the form then shows (or its error)."""
        block = self._batch_block(card)
        assert block is not None, "no Reject all on this card"
        before, told = len(self.slack.calls_to("views.open")), self._private_count(who)
        await self.events.block_actions(
            self.user(who),
            card.channel,
            card.message,
            blocks.ACTION_REJECT_ALL,
            block["elements"][1]["value"],
            self.slack.new_trigger_id(),
            block_id=block["block_id"],
            thread_ts=card.thread,
        )
        await barriers.wait_until(
            lambda: len(self.slack.calls_to("views.open")) > before or self._private_count(who) > told,
            "the Reject all form, or a refusal",
        )
        if self._private_count(who) > told:  # refused before the form opened
            return await self._private(who, told)
        [*_, opened] = self.slack.calls_to("views.open")
        reply = await self.events.view_submission(
            self.user(who),
            blocks.VIEW_REJECT_ALL,
            opened.args["view"]["private_metadata"],
            {blocks.REASON_BLOCK: {blocks.REASON_INPUT: reason}},
        )
        assert reply.json is not None, reply.body
        if reply.json.get("response_action") == "errors":
            return str(reply.json["errors"][blocks.REASON_BLOCK])
        return "\n".join(str(b["text"]["text"]) for b in reply.json["view"]["blocks"])

    def actions(self, card: CardHandle) -> list[str]:
        """The card's own buttons now, by action (`approve`, `trust`, `edit`, `reject`, `args`)."""
        names = {
            blocks.ACTION_APPROVE: "approve",
            blocks.ACTION_TRUST: "trust",
            blocks.ACTION_EDIT: "edit",
            blocks.ACTION_REJECT: "reject",
            blocks.ACTION_SHOW_ARGS: "args",
        }
        message = self.slack.message(card.channel, card.message)
        return [
            names[e["action_id"]]
            for b in message.get("blocks") or []
            if b.get("type") == "actions"
            for e in b["elements"]
            if e["action_id"] in names
        ]

    async def show_all(self, card: CardHandle, who: str) -> str:
        """Click All arguments; return the arguments the modal shows, its sections put back together."""
        before = len(self.slack.calls_to("views.open"))
        await self._click(card, who, blocks.ACTION_SHOW_ARGS)
        [*_, opened] = await self.slack.wait_for("views.open", count=before + 1)
        sections = [b["text"]["text"] for b in opened.args["view"]["blocks"][1:]]
        assert all(t.startswith("```") and t.endswith("```") for t in sections), sections
        return "".join(unescape(t[3:-3].strip("\u200b")) for t in sections)

    async def forge(self, card: CardHandle, who: str, action: str) -> str:
        """A click on `action` (`approve`, `trust`) the card may not show, as a forged payload would send it; the reply."""
        action_id = {"approve": blocks.ACTION_APPROVE, "trust": blocks.ACTION_TRUST}[action]
        before = self._private_count(who)
        await self._click(card, who, action_id)
        return await self._private(who, before)

    def card_text(self, card: CardHandle) -> str:
        updates = [u for u in self.slack.calls_to("chat.update") if u.args.get("ts") == card.message]
        source = (
            updates[-1].args
            if updates
            else next(
                x.args
                for x in self.slack.calls_to("chat.postMessage")
                if slack_buttons(x.args.get("blocks"))[:1] == [card.approval_id]
            )
        )
        return json.dumps(source.get("blocks"))

    async def settle(self) -> None:
        await _settle(self.bot)


def slack_buttons(message_blocks: Any) -> list[str]:
    """The values of a Slack message's action buttons (a card's; a status line's Stop is an accessory)."""
    return [e["value"] for b in message_blocks or [] if b.get("type") == "actions" for e in b["elements"]]


def _slack_stop(message_blocks: Any) -> str | None:
    """The turn id a progress message's Stop button names, if it has one."""
    for block in message_blocks or []:
        accessory = block.get("accessory") or {}
        if accessory.get("action_id") == blocks.ACTION_STOP:
            return str(accessory["value"])
    return None


class DiscordDriver:
    platform = "discord"
    _ids: ClassVar[dict[str, int]] = {
        "alice": c.D_ALICE,
        "bob": c.D_BOB,
        "carol": c.D_CAROL,
        "dave": c.D_OWNER,
        "erin": c.D_ERIN,
    }
    ops: ClassVar[dict[str, Any]] = {"role": c.D_OPS}
    """The command option naming the Ops role, which erin has."""

    def __init__(self, bot: BotServer, api: Any) -> None:
        self.bot, self.api = bot, api

    def user(self, name: str) -> str:
        return str(self._ids[name])

    async def command(self, who: str, sub: str, **options: Any) -> str:
        from tests.standins.discord_api import make_member, make_user

        payload, resolved = [], {"users": {}, "members": {}, "roles": {}, "channels": {}}
        for name, value in options.items():
            if name == "user":
                uid = self.user(value)
                payload.append({"name": "user", "type": 6, "value": uid})
                resolved["users"][uid] = make_user(int(uid), value)
                member = make_member(make_user(int(uid), value))
                member.pop("user")
                resolved["members"][uid] = {**member, "permissions": "0"}
            elif name == "role":
                payload.append({"name": "role", "type": 8, "value": str(value)})
                resolved["roles"][str(value)] = {
                    "id": str(value),
                    "name": "Mods",
                    "permissions": "32",
                    "position": 1,
                    "color": 0,
                    "hoist": False,
                    "managed": False,
                    "mentionable": True,
                }
            elif name == "channel":
                payload.append({"name": "channel", "type": 7, "value": str(value)})
                channel = {
                    "id": str(value),
                    "name": "general",
                    "type": 0,
                    "permissions": "0",
                    "guild_id": str(c.D_GUILD),
                }
                if int(value) == c.D_THREAD:
                    channel.update(
                        name="ticket-1",
                        type=11,
                        parent_id=str(c.D_CHANNEL),
                        owner_id=str(c.D_ALICE),
                        member_count=1,
                        message_count=0,
                        thread_metadata={
                            "archived": False,
                            "auto_archive_duration": 1440,
                            "locked": False,
                            "archive_timestamp": "2026-01-01T00:00:00+00:00",
                        },
                    )
                resolved["channels"][str(value)] = channel
            elif isinstance(value, int):
                payload.append({"name": name, "type": 4, "value": value})
            else:
                payload.append({"name": name, "type": 3, "value": value})
        interaction = await self.api.invoke_command(
            "countersign",
            int(self.user(who)),
            channel_id=c.D_CHANNEL,
            options=[{"type": 1, "name": sub, "options": payload}],
            resolved={k: v for k, v in resolved.items() if v},
        )
        await self.api.wait_for_request("POST", rf"/webhooks/{c.D_APP}/{interaction.token}")
        return "\n".join(f["content"] for f in self.api.followups(interaction.id))

    async def ask(self, who: str, text: str) -> None:
        await self.api.send_message(
            c.D_CHANNEL, int(self.user(who)), f"<@{c.D_BOT}> {text}", mentions=[c.D_BOT], guild_id=c.D_GUILD
        )

    async def say(self, who: str, text: str) -> None:
        """Another message in the same conversation (the channel's: it needs the mention there)."""
        await self.ask(who, text)

    async def cards(self, count: int = 1) -> list[CardHandle]:
        posts = await self.api.wait_for_request("POST", r"/channels/\d+/messages$", is_discord_card, count=count)
        handles = []
        for post in posts:
            ids = [x["custom_id"] for row in post.json["components"] for x in row["components"]]
            channel = post.path.split("/")[2]
            handles.append(CardHandle(ids[0].split(":")[2], post.response["id"], channel, None))
        return handles

    async def _click(self, card: CardHandle, who: str, action: str):
        from tests.e2e.discord.test_discord_flow import current_custom_id

        interaction = await self.api.click_button(
            card.message,
            current_custom_id(self.api, card.message, action),
            int(self.user(who)),
            guild_id=c.D_GUILD if card.channel == str(c.D_CHANNEL) else None,
            channel_id=int(card.channel),
        )
        await self.api.wait_for_request("POST", rf"/interactions/{interaction.id}/[^/]+/callback")
        return interaction

    async def _followup(self, interaction) -> str:
        await self.api.wait_for_request("POST", rf"/webhooks/{c.D_APP}/{interaction.token}")
        return str(self.api.followups(interaction.id)[-1]["content"])

    def _patches(self, card: CardHandle) -> int:
        return len(self.api.requests_to("PATCH", rf"/channels/{card.channel}/messages/{card.message}"))

    async def _card_redrawn(self, card: CardHandle, before: int) -> None:
        await self.api.wait_for_request("PATCH", rf"/channels/{card.channel}/messages/{card.message}", count=before + 1)
        await _settle(self.bot)

    async def approve(self, card: CardHandle, who: str, *, private: bool = False) -> str | None:
        """Click Approve; wait for the private reply, or else for the card to be redrawn."""
        before = self._patches(card)
        interaction = await self._click(card, who, "approve")
        if private:
            return await self._followup(interaction)
        await self._card_redrawn(card, before)
        return None

    async def edit(self, card: CardHandle, who: str, args: dict[str, Any], *, private: bool = False) -> str | None:
        """Click Edit and submit `args`; return the private reply, or else wait until the card shows the edit."""
        shown = self._drawn(card)
        await self._click(card, who, "edit")
        submitted = await self.api.submit_modal(
            f"cs:edit-modal:{card.approval_id}", int(self.user(who)), {"args": json.dumps(args)}
        )
        await self.api.wait_for_request("POST", rf"/interactions/{submitted.id}/[^/]+/callback")
        if private:
            return await self._followup(submitted)
        # The card as drawn after this edit (its buttons name the new arguments' version), not
        # after any redraw: one still due for an earlier click would let the next step click a
        # card that predates the edit.
        await barriers.wait_until(lambda: self._drawn(card) != shown, f"card {card.message} to show the edit")
        await _settle(self.bot)
        return None

    async def reject(self, card: CardHandle, who: str, reason: str) -> None:
        """Click Reject and give `reason` in its form; wait until the card is redrawn."""
        before = self._patches(card)
        await self._click(card, who, "reject")
        submitted = await self.api.submit_modal(
            f"cs:reject-modal:{card.approval_id}", int(self.user(who)), {"reason": reason}
        )
        await self.api.wait_for_request("POST", rf"/interactions/{submitted.id}/[^/]+/callback")
        await self._card_redrawn(card, before)

    def _drawn(self, card: CardHandle) -> str:
        """What the card shows now: its embeds and buttons."""
        message = self.api.message(card.message)
        return json.dumps([message.get("embeds"), message.get("components")])

    async def edit_refused(self, card: CardHandle, who: str) -> str:
        """Click Edit and expect no form: return the private reply (the interaction's own message)."""
        interaction = await self._click(card, who, "edit")
        answers = [r.json for r in self.api.callbacks(interaction.id) if r.json]
        assert all(a.get("type") != 9 for a in answers), "a form opened"
        [shown] = [a["data"] for a in answers if a.get("type") == 4]
        assert shown["flags"] & 64, shown  # ephemeral
        return str(shown["content"])

    async def forged_edit(self, card: CardHandle, who: str, args: dict[str, Any]) -> str:
        """Submit an Edit form for `card` that was never opened for `who`, from the card's channel; return the reply."""
        interaction = await self.api.forge_interaction(
            "modal_submit",
            {
                "custom_id": f"cs:edit-modal:{card.approval_id}",
                "components": [
                    {"type": 1, "components": [{"type": 4, "custom_id": "args", "value": json.dumps(args)}]}
                ],
            },
            int(self.user(who)),
            channel_id=int(card.channel),
            message_id=card.message,
        )
        return await self._followup(interaction)

    async def answer(self, starts: str = "Result: ", count: int = 1) -> str:
        posts = await self.api.wait_for_request(
            "POST",
            r"/channels/\d+/messages$",
            lambda r: str((r.json or {}).get("content", "")).startswith(starts),
            count=count,
        )
        return str(posts[count - 1].json["content"])

    async def approve_racing(self, card: CardHandle, who: str) -> str | None:
        """Click Approve; return the private reply if one comes before the card is redrawn, else None."""
        before = self._patches(card)
        interaction = await self._click(card, who, "approve")
        await wait_until(lambda: bool(self.api.followups(interaction.id)) or self._patches(card) > before, GENEROUS_S)
        await _settle(self.bot)
        replies = self.api.followups(interaction.id)
        return str(replies[-1]["content"]) if replies else None

    def card_has_buttons(self, card: CardHandle) -> bool:
        """Whether the card still shows its buttons."""
        return bool(discord_custom_ids(self.api.message(card.message)))

    async def stop_offered(self, count: int = 1) -> StopHandle:
        """Wait for the `count`th status line offering Stop (a run going on for a while)."""
        *_, post = await self.api.wait_for_request("POST", r"/channels/\d+/messages$", is_discord_stop, count=count)
        turn_id = discord_custom_ids(post.json)[0].split(":")[2]
        return StopHandle(turn_id, str(post.response["id"]), post.path.split("/")[2], None)

    async def stop(self, handle: StopHandle, who: str) -> str:
        """Click Stop on the status line; return the private reply."""
        interaction = await self.api.click_button(
            handle.message,
            f"cs:stop:{handle.turn_id}",
            int(self.user(who)),
            guild_id=c.D_GUILD,
            channel_id=int(handle.channel),
        )
        await self.api.wait_for_request("POST", rf"/interactions/{interaction.id}/[^/]+/callback")
        return await self._followup(interaction)

    async def stop_command(self, who: str) -> str:
        """`/countersign stop` in the channel of the last `ask` (the channel is the conversation)."""
        return await self.command(who, "stop")

    async def stopped_notice(self, count: int = 1) -> str:
        """Wait for the `count`th line saying who stopped a turn, posted in the conversation."""
        *_, post = await self.api.wait_for_request(
            "POST",
            r"/channels/\d+/messages$",
            lambda r: "Stopped by" in str((r.json or {}).get("content", "")),
            count=count,
        )
        return str(post.json["content"])

    def progress_text(self, handle: StopHandle) -> str:
        """What the status line says now (its last text, while it exists)."""
        edits = self.api.requests_to("PATCH", rf"/channels/{handle.channel}/messages/{handle.message}")
        return str((edits[-1].json or {}).get("content", "")) if edits else ""

    def card_text(self, card: CardHandle) -> str:
        return json.dumps(self.api.message(card.message)["embeds"])

    def actions(self, card: CardHandle) -> list[str]:
        """The card's own buttons now, by action (`approve`, `trust`, `edit`, `reject`, `args`)."""
        return [
            i.split(":")[1] for i in discord_custom_ids(self.api.message(card.message)) if not i.startswith("cs:all-")
        ]

    async def show_all(self, card: CardHandle, who: str) -> str:
        """Click All arguments, then Next until the last page; return the pages put back together."""
        guild = c.D_GUILD if card.channel == str(c.D_CHANNEL) else None
        interaction = await self.api.click_button(
            card.message,
            f"cs:args:{card.approval_id}",
            int(self.user(who)),
            guild_id=guild,
            channel_id=int(card.channel),
        )
        await self.api.wait_for_request("POST", rf"/interactions/{interaction.id}/[^/]+/callback")
        page = self.api.original_response(interaction.id)
        assert page is not None and page["flags"] & 64, page  # ephemeral: only the clicker sees it
        texts = []
        while True:
            [embed] = page["embeds"]
            texts.append(embed["description"].removeprefix("```json\n").removesuffix("\n```"))
            [_, after] = [b for row in page["components"] for b in row["components"]]
            if after.get("disabled"):
                return "".join(texts)
            clicked = await self.api.click_button(
                page["id"], after["custom_id"], int(self.user(who)), guild_id=guild, channel_id=int(card.channel)
            )
            await self.api.wait_for_request("POST", rf"/interactions/{clicked.id}/[^/]+/callback")
            page = self.api.message(page["id"])

    async def forge(self, card: CardHandle, who: str, action: str) -> str:
        """A click on `action` (`approve`, `trust`) the card does not show, sent as a forged payload; the reply."""
        version = next(i.split(":")[3] for i in discord_custom_ids(self.api.message(card.message)) if i.count(":") == 3)
        interaction = await self.api.forge_interaction(
            "component",
            {"custom_id": f"cs:{action}:{card.approval_id}:{version}", "component_type": 2},
            int(self.user(who)),
            channel_id=int(card.channel),
            message_id=card.message,
        )
        await self.api.wait_for_request("POST", rf"/interactions/{interaction.id}/[^/]+/callback")
        return "\n".join(
            str((r.json or {}).get("data", {}).get("content", "")) for r in self.api.callbacks(interaction.id)
        )

    async def copy_in_dm(self, who: str) -> CardHandle:
        """The copy of a card posted in `who`'s DMs (an escalation, or `cards dm`)."""
        user = int(self.user(who))
        posts = await self.api.wait_for_request(
            "POST",
            r"/channels/\d+/messages$",
            lambda r: bool((r.json or {}).get("components")) and r.path.split("/")[2] == self.api.dm_channel_id(user),
        )
        return _discord_handle(posts[-1])

    async def copy_in_channel(self, channel: str, *, count: int = 1) -> CardHandle:
        """The `count`th card posted in `channel` (an escalation's copy there), once it is there."""
        posts = await self.api.wait_for_request(
            "POST",
            rf"/channels/{channel}/messages$",
            lambda r: bool((r.json or {}).get("components")),
            count=count,
        )
        return _discord_handle(posts[count - 1])

    def _batch_ids(self, card: CardHandle) -> list[str]:
        message = self.api.message(card.message)
        ids = [c["custom_id"] for row in message.get("components") or [] for c in row.get("components", [])]
        return [i for i in ids if i.startswith("cs:all-")]

    def has_batch(self, card: CardHandle) -> bool:
        """Whether the card shows Approve all / Reject all now."""
        return bool(self._batch_ids(card))

    async def _click_batch(self, card: CardHandle, who: str, action: str):
        [custom_id] = [i for i in self._batch_ids(card) if i.startswith(f"cs:all-{action}:")]
        interaction = await self.api.click_button(
            card.message,
            custom_id,
            int(self.user(who)),
            guild_id=c.D_GUILD if card.channel == str(c.D_CHANNEL) else None,
            channel_id=int(card.channel),
        )
        await self.api.wait_for_request("POST", rf"/interactions/{interaction.id}/[^/]+/callback")
        return interaction, custom_id.split(":")[2]

    async def approve_all(self, card: CardHandle, who: str, *, clicks: int = 1) -> str:
        """Click Approve all on a first card (`clicks` times at once); return what the clicker was told."""
        clicked = await asyncio.gather(*(self._click_batch(card, who, "approve") for _ in range(clicks)))
        told = [str(f["content"]) for interaction, _ in clicked for f in await self._followups(interaction)]
        return "\n".join(told)

    async def reject_all(self, card: CardHandle, who: str, reason: str) -> str:
        """Click Reject all, give the reason in its form; return what the clicker was told."""
        interaction, review_id = await self._click_batch(card, who, "reject")
        modal = [r for r in self.api.callbacks(interaction.id) if r.json and r.json.get("type") == 9]
        if not modal:  # refused before the form: the answer is the interaction's own message
            return "\n".join(str(r.json["data"]["content"]) for r in self.api.callbacks(interaction.id))
        submitted = await self.api.submit_modal(
            f"cs:reject-all-modal:{review_id}", int(self.user(who)), {"reason": reason}
        )
        await self.api.wait_for_request("POST", rf"/interactions/{submitted.id}/[^/]+/callback")
        return "\n".join(str(f["content"]) for f in await self._followups(submitted))

    async def _followups(self, interaction) -> list[dict[str, Any]]:
        await self.api.wait_for_request("POST", rf"/webhooks/{c.D_APP}/{interaction.token}")
        return self.api.followups(interaction.id)

    async def settle(self) -> None:
        await _settle(self.bot)


def discord_custom_ids(message: Any) -> list[str]:
    return [x["custom_id"] for row in (message or {}).get("components") or [] for x in row.get("components", [])]


def is_discord_card(request: Any) -> bool:
    """A posted card: a message whose buttons are a card's (not a status line's Stop)."""
    return any(i.startswith(("cs:approve:", "cs:edit:", "cs:reject:")) for i in discord_custom_ids(request.json))


def is_discord_stop(request: Any) -> bool:
    """A posted status line offering Stop."""
    return any(i.startswith("cs:stop:") for i in discord_custom_ids(request.json))


def _discord_handle(post: Any) -> CardHandle:
    ids = [x["custom_id"] for row in post.json["components"] for x in row["components"]]
    return CardHandle(ids[0].split(":")[2], post.response["id"], post.path.split("/")[2], None)


async def wait_until(predicate, timeout: float = 30.0) -> None:
    for _ in range(int(timeout / 0.05)):
        if predicate():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("condition not reached in time")

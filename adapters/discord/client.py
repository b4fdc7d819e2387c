"""The discord.py client: intents, the dynamic buttons, and messages in."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Protocol

import discord
from discord import app_commands

from adapters.discord.buttons import ApprovalButton, ArgumentsButton, BatchButton, PageButton, StopButton
from adapters.discord.commands import build_command_group, on_command_error
from adapters.discord.conversations import author_actor, message_ref, scoped_conversation, strip_bot_mention
from adapters.discord.counted_http import count_failures
from adapters.discord.forms import ContinueButton, QuestionButton
from adapters.discord.interactions import InteractionHandler
from adapters.discord.markup import NO_PINGS
from adapters.words.conversation import EMPTY_MENTION, SHUTTING_DOWN
from adapters.words.display import is_blank
from bot.admin.service import AdminService
from bot.base.conversation import IncomingMessage
from bot.base.errors import CountersignError
from bot.service import Countersign

log = logging.getLogger(__name__)

_CHAT_TYPES = (discord.MessageType.default, discord.MessageType.reply)


def bot_intents() -> discord.Intents:
    """Exactly the intents the bot needs (docs/discord.md, Discord setup).

    `guilds` (channels, threads and roles in the cache), `guild_messages` and `dm_messages`
    (MESSAGE_CREATE), and the privileged `message_content`, without which Discord sends empty
    text for messages that do not mention the bot.
    """
    intents = discord.Intents.none()
    intents.guilds = True
    intents.guild_messages = True
    intents.dm_messages = True
    intents.message_content = True
    return intents


class IdentifyGate(Protocol):
    """Something that spaces session starts per bucket across processes (`StartSpacing`)."""

    async def take(self, bucket: int) -> None:
        """Wait until `bucket` may start a session, and hold it for the spacing interval."""


class CountersignClient(discord.AutoShardedClient):
    """A discord.py `AutoShardedClient` that feeds the core.

    Sharded even with one shard, so a process runs exactly the shards it is given (Discord's
    Gateway docs, "Sharding"; discord.py's `AutoShardedClient`): guild events arrive on shard
    `(guild_id >> 22) % shard_count`, DMs on shard 0.

    Args:
        service: the core.
        admin: the `/countersign` commands.
        guild_ready_timeout_s: discord.py's `guild_ready_timeout` (`DISCORD_GUILD_READY_TIMEOUT`).
        shard_count: the whole bot's shard count (`DISCORD_SHARD_COUNT`); None asks
            `GET /gateway/bot` at connect (discord.py's default).
        shard_ids: the shards this client runs (`DISCORD_SHARD_IDS`, non-empty); None: all.
        identify_gate: spaces IDENTIFYs per bucket across processes; None keeps discord.py's
            own spacing (5 s before each IDENTIFY but the first, within this process only).

    Raises:
        ValueError: `shard_ids` without `shard_count`, or empty.
    """

    def __init__(
        self,
        service: Countersign,
        admin: AdminService,
        *,
        guild_ready_timeout_s: float = 2.0,
        shard_count: int | None = None,
        shard_ids: Sequence[int] | None = None,
        identify_gate: IdentifyGate | None = None,
    ) -> None:
        if shard_ids is not None and (shard_count is None or not shard_ids):
            raise ValueError("shard_ids needs a shard_count and at least one id")
        # The bot never joins voice: discord.py's start-up warnings about missing voice
        # libraries (PyNaCl, davey) would only alarm whoever reads the log.
        discord.VoiceClient.warn_nacl = False
        discord.VoiceClient.warn_dave = False
        # discord.py types `shard_ids` as a list, but None (every shard) is its documented default.
        ids: Any = list(shard_ids) if shard_ids is not None else None
        super().__init__(
            intents=bot_intents(),
            allowed_mentions=discord.AllowedMentions.none(),
            guild_ready_timeout=guild_ready_timeout_s,
            shard_count=shard_count,
            shard_ids=ids,
        )
        self._identify_gate = identify_gate
        self.max_concurrency = 1
        """`session_start_limit.max_concurrency` of `GET /gateway/bot`; the adapter sets it."""
        self._connected_shards: set[int] = set()
        count_failures(self)
        self.service = service
        self.admin = admin
        self.interactions = InteractionHandler(service)
        self.tree = app_commands.CommandTree(self)
        self.tree.add_command(build_command_group(admin, service, admin.tool_names()))
        self.tree.error(on_command_error)

    @property
    def gateway_connected(self) -> bool:
        """Whether every shard of this client has its gateway session up (`/readyz` reads it).

        Kept from discord.py's `shard_connect` and `shard_resumed` (READY, RESUMED) and
        `shard_disconnect` events.
        """
        expected = set(self.shard_ids) if self.shard_ids is not None else set(range(self.shard_count or 1))
        return bool(self._connected_shards) and expected <= self._connected_shards

    async def on_shard_connect(self, shard_id: int) -> None:
        """READY arrived on `shard_id`: its gateway session is up."""
        self._connected_shards.add(shard_id)
        log.info("Discord shard %d of %s connected", shard_id, self.shard_count)

    async def on_shard_resumed(self, shard_id: int) -> None:
        """The dropped session of `shard_id` was resumed."""
        self._connected_shards.add(shard_id)

    async def on_shard_disconnect(self, shard_id: int) -> None:
        """The gateway connection of `shard_id` closed (or failed to open); discord.py reconnects."""
        self._connected_shards.discard(shard_id)

    async def before_identify_hook(self, shard_id: int | None, *, initial: bool = False) -> None:
        """Space IDENTIFYs per bucket over every process on the database.

        Discord's Gateway docs, "Session start limit": one IDENTIFY per bucket
        `shard_id % max_concurrency` every 5 seconds. discord.py's default (this hook's base)
        only spaces the IDENTIFYs of one process; workers and replicas start at once.
        """
        if self._identify_gate is None:
            await super().before_identify_hook(shard_id, initial=initial)
            return
        bucket = (shard_id or 0) % max(1, self.max_concurrency)
        await self._identify_gate.take(bucket)
        log.info("Discord shard %s identifies (bucket %d of %d)", shard_id, bucket, self.max_concurrency)

    async def setup_hook(self) -> None:
        """Register the persistent buttons (cards, status lines, questions) and publish `/countersign`."""
        self.add_dynamic_items(
            ApprovalButton, BatchButton, StopButton, ArgumentsButton, PageButton, QuestionButton, ContinueButton
        )
        await self.tree.sync()

    async def on_message(self, message: discord.Message) -> None:
        """A mention in a channel, a DM, or a message in a thread the bot takes part in.

        The bot's own and other bots' messages are ignored, as are system messages; edits
        arrive as MESSAGE_UPDATE, which the bot does not handle.
        """
        me = self.user
        if me is None or message.author.bot or message.author.id == me.id or message.type not in _CHAT_TYPES:
            return
        guild_id = message.guild.id if message.guild else None
        conversation = await scoped_conversation(message.channel, guild_id, self.service)
        mentioned = any(user.id == me.id for user in message.mentions)
        in_known_thread = conversation.thread is not None and await self.service.knows_conversation(conversation)
        if guild_id is not None and not mentioned and not in_known_thread:
            return
        text = strip_bot_mention(message.content, me.id)
        if is_blank(text):
            await message.reply(EMPTY_MENTION, mention_author=False, allowed_mentions=NO_PINGS)
            return
        incoming = IncomingMessage(
            actor=author_actor(message),
            conversation=conversation,
            text=text,
            message_id=message_ref(conversation, message.channel.id, message.id),
        )
        try:
            self.service.submit_message(incoming)
        except CountersignError:
            await message.reply(SHUTTING_DOWN, mention_author=False, allowed_mentions=NO_PINGS)

    async def on_interaction(self, interaction: discord.Interaction[Any]) -> None:
        """Modal submissions, and clicks discord.py drops (our buttons go to their `DynamicItem`s)."""
        if interaction.type is discord.InteractionType.modal_submit:
            await self.interactions.on_modal_submit(interaction)
        elif interaction.type is discord.InteractionType.component:
            await self.interactions.on_component(interaction)

    async def on_error(self, event_method: str, /, *args: Any, **kwargs: Any) -> None:
        """Log a failed event handler; users never see a traceback."""
        log.exception("unhandled error in Discord event %s", event_method)

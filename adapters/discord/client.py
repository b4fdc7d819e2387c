"""The discord.py client: intents, the dynamic buttons, and messages in."""

from __future__ import annotations

import logging
from typing import Any

import discord
from discord import app_commands

from adapters.discord import messages as msg
from adapters.discord.buttons import ApprovalButton
from adapters.discord.commands import build_command_group, on_command_error
from adapters.discord.conversations import author_actor, scoped_conversation, strip_bot_mention
from adapters.discord.counted_http import count_failures
from adapters.discord.interactions import InteractionHandler
from adapters.discord.platform import NO_PINGS
from adapters.display import is_blank
from bot.admin.service import AdminService
from bot.conversation import IncomingMessage
from bot.errors import CountersignError
from bot.service import Countersign

log = logging.getLogger(__name__)

_CHAT_TYPES = (discord.MessageType.default, discord.MessageType.reply)


def bot_intents() -> discord.Intents:
    """Exactly the intents the bot needs (README: Discord setup).

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


class CountersignClient(discord.Client):
    """A `discord.Client` that feeds the core.

    Args:
        service: the core.
        admin: the `/countersign` commands (and each channel's conversation scope).
        guild_ready_timeout_s: discord.py's `guild_ready_timeout` (`DISCORD_GUILD_READY_TIMEOUT`).
    """

    def __init__(self, service: Countersign, admin: AdminService, *, guild_ready_timeout_s: float = 2.0) -> None:
        # The bot never joins voice: discord.py's start-up warnings about missing voice
        # libraries (PyNaCl, davey) would only alarm whoever reads the log.
        discord.VoiceClient.warn_nacl = False
        discord.VoiceClient.warn_dave = False
        super().__init__(
            intents=bot_intents(),
            allowed_mentions=discord.AllowedMentions.none(),
            guild_ready_timeout=guild_ready_timeout_s,
        )
        count_failures(self)
        self.service = service
        self.admin = admin
        self.interactions = InteractionHandler(service)
        self.tree = app_commands.CommandTree(self)
        self.tree.add_command(build_command_group(admin, admin.tool_names()))
        self.tree.error(on_command_error)

    gateway_connected: bool = False
    """Whether the gateway session is up: set by READY and RESUMED, cleared when it drops
    (discord.py's `connect`, `resumed` and `disconnect` events); `/readyz` reads it."""

    async def on_connect(self) -> None:
        """READY arrived: the gateway session is up."""
        self.gateway_connected = True

    async def on_resumed(self) -> None:
        """A dropped session was resumed."""
        self.gateway_connected = True

    async def on_disconnect(self) -> None:
        """The gateway connection closed, or an attempt to open it failed; discord.py reconnects."""
        self.gateway_connected = False

    async def setup_hook(self) -> None:
        """Register the persistent buttons and publish `/countersign`, before the gateway connects."""
        self.add_dynamic_items(ApprovalButton)
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
        conversation = await scoped_conversation(message.channel, guild_id, self.admin)
        mentioned = any(user.id == me.id for user in message.mentions)
        in_known_thread = conversation.thread is not None and await self.service.knows_conversation(conversation)
        if guild_id is not None and not mentioned and not in_known_thread:
            return
        text = strip_bot_mention(message.content, me.id)
        if is_blank(text):
            await message.reply(msg.EMPTY_MENTION, mention_author=False, allowed_mentions=NO_PINGS)
            return
        incoming = IncomingMessage(
            actor=author_actor(message),
            conversation=conversation,
            text=text,
            message_id=str(message.id),
        )
        try:
            self.service.submit_message(incoming)
        except CountersignError:
            await message.reply(msg.SHUTTING_DOWN, mention_author=False, allowed_mentions=NO_PINGS)

    async def on_interaction(self, interaction: discord.Interaction[Any]) -> None:
        """Modal submissions, and clicks discord.py drops (card buttons go to `ApprovalButton`)."""
        if interaction.type is discord.InteractionType.modal_submit:
            await self.interactions.on_modal_submit(interaction)
        elif interaction.type is discord.InteractionType.component:
            await self.interactions.on_component(interaction)

    async def on_error(self, event_method: str, /, *args: Any, **kwargs: Any) -> None:
        """Log a failed event handler; users never see a traceback."""
        log.exception("unhandled error in Discord event %s", event_method)

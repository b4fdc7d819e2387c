"""Discord messages and interactions to core values: conversations and actors.

DESIGN.md: `discord:<guild id or dm>:<channel id>[:<thread id>]`. A thread or forum post is a
ticket (its own conversation, under its parent channel); plain channel messages share the
channel's conversation; a DM is one conversation.
"""

from __future__ import annotations

import re
from typing import Any

import discord

from bot.conversation import Actor, ConversationRef

PLATFORM = "discord"
DM = "dm"


def conversation_of(channel: Any, guild_id: int | None) -> ConversationRef:
    """The conversation a message in `channel` belongs to."""
    if guild_id is None:
        return ConversationRef(platform=PLATFORM, workspace_id=DM, channel_id=str(channel.id))
    if isinstance(channel, discord.Thread):
        return ConversationRef(
            platform=PLATFORM,
            workspace_id=str(guild_id),
            channel_id=str(channel.parent_id),
            thread=str(channel.id),
        )
    return ConversationRef(platform=PLATFORM, workspace_id=str(guild_id), channel_id=str(channel.id))


def target_channel_id(conversation: ConversationRef) -> int:
    """Where to post for a conversation: the thread when it is a ticket, else the channel."""
    return int(conversation.thread or conversation.channel_id)


def author_actor(message: discord.Message) -> Actor:
    """The author of a message (authenticated by the gateway)."""
    return Actor(
        platform=PLATFORM,
        workspace_id=str(message.guild.id) if message.guild else DM,
        user_id=str(message.author.id),
        display_name=message.author.display_name,
    )


def clicker_actor(interaction: discord.Interaction[Any]) -> Actor:
    """The person behind an interaction, with their Manage Server permission (none in a DM).

    `interaction.permissions` are the member's resolved permissions as Discord computed them
    for the payload; Manage Server is a guild-wide permission, so it shows there as is.
    """
    guild_id = interaction.guild_id
    return Actor(
        platform=PLATFORM,
        workspace_id=str(guild_id) if guild_id else DM,
        user_id=str(interaction.user.id),
        display_name=interaction.user.display_name,
        is_admin=bool(guild_id) and interaction.permissions.manage_guild,
        groups=frozenset(str(role.id) for role in getattr(interaction.user, "roles", ())),
    )


def strip_bot_mention(text: str, bot_id: int) -> str:
    """Remove the bot's own mentions (`<@id>` and `<@!id>`); other mentions stay."""
    return re.sub(rf"<@!?{bot_id}>", "", text).strip()

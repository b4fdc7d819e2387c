"""Discord messages and interactions to core values: conversations and actors.

DESIGN.md: `discord:<guild id or dm>:<channel id>[:<thread id>]`. A thread or forum post is a
ticket (its own conversation, under its parent channel); plain channel messages share the
channel's conversation; a DM is one conversation.
"""

from __future__ import annotations

import re
from typing import Any

import discord

from bot.base.conversation import DM_WORKSPACE, Actor, ConversationRef
from bot.service import Countersign

PLATFORM = "discord"
DM = DM_WORKSPACE


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


async def scoped_conversation(channel: Any, guild_id: int | None, service: Countersign) -> ConversationRef:
    """The conversation of `channel` as the core decides it (messages and `context`).

    The adapter hands over where the message is (`conversation_of`); the core applies the
    channel's scope setting (`Countersign.conversation_at`: with `/countersign scope channel`, a
    thread shares its parent channel's conversation).

    Args:
        channel: where a message was sent or a command typed (a thread, a channel, a DM).
        guild_id: the guild, None in a DM.
        service: the core.

    Raises:
        Exception: the database's, when the channel's scope cannot be read.
    """
    place = conversation_of(channel, guild_id)
    scoped = await service.conversation_at(
        PLATFORM, place.workspace_id, place.channel_id, place.thread, is_dm=guild_id is None
    )
    return scoped or place  # never None here: a Discord channel is a conversation of its own


def target_channel_id(conversation: ConversationRef) -> int:
    """Where to post for a conversation: the thread when it is a ticket, else the channel."""
    return int(conversation.thread or conversation.channel_id)


def message_ref(conversation: ConversationRef, channel_id: int, message_id: int) -> str:
    """A message's id as the core keeps it (`IncomingMessage.message_id`).

    The bare message id when the message is where the conversation posts (`target_channel_id`),
    as every message is but a mention in a thread of a channel whose scope is the whole
    channel: that one is `<channel id>/<message id>`, so that the message can still be found
    (Discord reads a message by channel and id).
    """
    if channel_id == target_channel_id(conversation):
        return str(message_id)
    return f"{channel_id}/{message_id}"


def parse_message_ref(conversation: ConversationRef, ref: str) -> tuple[int, int] | None:
    """`(channel id, message id)` of a `message_ref`; None for a string that is not one."""
    channel, _, message = ref.rpartition("/")
    if not message.isdecimal() or not (channel.isdecimal() or not channel):
        return None
    return (int(channel) if channel else target_channel_id(conversation)), int(message)


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
    for the payload; Manage Server is a guild-wide permission, so it shows there as is. The
    channel is the one the interaction happened in (a card escalated to a channel may be
    decided by whoever clicks there).
    """
    guild_id = interaction.guild_id
    return Actor(
        platform=PLATFORM,
        workspace_id=str(guild_id) if guild_id else DM,
        user_id=str(interaction.user.id),
        display_name=interaction.user.display_name,
        is_admin=bool(guild_id) and interaction.permissions.manage_guild,
        groups=frozenset(str(role.id) for role in getattr(interaction.user, "roles", ())),
        channel_id=str(interaction.channel_id) if interaction.channel_id is not None else None,
    )


async def known_guild(client: discord.Client, guild_id: str) -> discord.Guild | None:
    """The guild from this process's cache, else `GET /guilds/{id}` (its roles and owner included).

    A process caches only the guilds of the shards it runs; any other guild the bot is in is
    still one REST call away. None when `guild_id` is no guild id or the bot is not in it.
    """
    if not guild_id.isdecimal():
        return None
    guild = client.get_guild(int(guild_id))
    if guild is not None:
        return guild
    try:
        return await client.fetch_guild(int(guild_id), with_counts=False)
    except (discord.NotFound, discord.Forbidden):
        return None


async def member_actor(client: discord.Client, guild_id: str, user: discord.abc.User) -> Actor | None:
    """`user` as a member of the guild `guild_id`, for a click that came without a guild.

    A card routed to an approver's DMs is clicked in a DM, so the payload has no member; the
    approval belongs to a guild, and the clicker's standing there (Manage Server, roles) is
    fetched with `GET /guilds/{id}/members/{user}`, which needs no privileged intent.

    Every DM reaches shard 0, so the process handling the click may not run the guild's shard
    (replicas or workers split them, docs/decisions/0018): the guild is then read over REST
    (`known_guild`), not taken as unknown.

    Returns:
        The actor in that guild, or None when the bot is not in it or the user is not a member
        (the core then refuses the click as coming from another server).
    """
    guild = await known_guild(client, guild_id)
    if guild is None:
        return None
    try:
        member = guild.get_member(user.id) or await guild.fetch_member(user.id)
    except discord.NotFound:
        return None
    return Actor(
        platform=PLATFORM,
        workspace_id=guild_id,
        user_id=str(member.id),
        display_name=member.display_name,
        is_admin=member.guild_permissions.manage_guild,
        groups=frozenset(str(role.id) for role in member.roles),
    )


def strip_bot_mention(text: str, bot_id: int) -> str:
    """Remove the bot's own mentions (`<@id>` and `<@!id>`); other mentions stay."""
    return re.sub(rf"<@!?{bot_id}>", "", text).strip()

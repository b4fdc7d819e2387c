"""A local stand-in for Discord's REST API (v10) and gateway, served over real HTTP and WebSocket.

The real discord.py client connects to it: REST under ``/api/v10/...`` and the gateway WebSocket
at ``/gateway`` (plus ``/resume-gateway``, the ``resume_gateway_url`` READY hands out), all on one
aiohttp server bound to 127.0.0.1 at a port the OS picks. Tests seed guilds, channels, roles and
members, make people talk and click (``send_message``, ``click_button``, ``submit_modal``), and
then assert on what the bot sent (``requests``, ``messages``, ``callbacks``), the way
bolt-python's ``tests/scenario_tests_async/`` do for Slack.

It answers as Discord's public docs describe: snowflake ids as strings, ``Authorization: Bot
<token>`` (401 otherwise), JSON errors ``{"code", "message"[, "errors"]}`` with Discord's codes
(50035 Invalid Form Body with an ``errors`` tree, 40060 for a second interaction response,
10062 for an unknown or late one), 429 with ``Retry-After`` and the ``X-RateLimit-*`` headers
when told to rate limit, and the message, embed, component and modal limits. The gateway speaks
HELLO / IDENTIFY / READY / GUILD_CREATE / heartbeats / RESUME / INVALID_SESSION with increasing
sequence numbers, honours ``compress=zlib-stream``, and applies intents the way Discord does
(no MESSAGE_CREATE without GUILD_MESSAGES / DIRECT_MESSAGES, empty ``content`` without
MESSAGE_CONTENT unless the bot is mentioned, sent it, or it is a DM).

Sharding (Discord's Gateway docs, "Sharding"): an IDENTIFY's ``shard: [id, count]`` makes its
session receive only the guilds with ``(guild_id >> 22) % count == id`` (READY's ``guilds``,
GUILD_CREATE and every guild event) and, on shard 0, the DMs; a session without ``shard`` is
shard ``[0, 1]`` and gets everything. ``GET /gateway/bot`` answers ``shards`` and
``session_start_limit.max_concurrency`` as set on the stand-in, and every IDENTIFY's arrival time
is kept (``identify_log``) so a test can check the "one IDENTIFY per bucket per 5 s" rule.

Where Discord's docs do not give an exact error string (some component and interaction-type
errors), the stand-in answers with the documented code and a message in Discord's style; those
places say so in a comment.

discord.py must be told where the stand-in is; ``point_discord_py_at`` does that (see its
docstring for exactly what and why).

Example:
    async with DiscordStandIn(bot_token="t", application_id=1, bot_user_id=2) as discord_api:
        discord_api.add_guild(10, "guild", owner_id=3, channels=[make_text_channel(11, "general")],
                              members=[make_member(make_user(3, "alice"))])
        with point_discord_py_at(discord_api.api_url):
            client = discord.Client(intents=discord.Intents.default())
            task = asyncio.create_task(client.start("t"))
            await discord_api.wait_until_ready()
            await discord_api.send_message(11, 3, "hello")
            ...
            await client.close()
            await task
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import enum
import functools
import itertools
import json
import logging
import re
import secrets
import time
import warnings
import zlib
from collections import Counter
from collections.abc import Callable, Coroutine, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, Literal, Self

import yarl
from aiohttp import WSCloseCode, WSMsgType, web

try:  # zstd-stream transport compression, which discord.py asks for when it can decode it
    import zstandard as _zstd
except ImportError:  # pragma: no cover - depends on the environment
    _zstd = None  # type: ignore[assignment]

with warnings.catch_warnings():
    # discord.py's voice player imports ``audioop``, deprecated since Python 3.11; pytest runs
    # with warnings as errors, and voice is never used here.
    warnings.filterwarnings("ignore", "'audioop' is deprecated", DeprecationWarning)
    import discord
    import discord.gateway
    import discord.http
    import discord.webhook.async_

log = logging.getLogger(__name__)

__all__ = [
    "ALL_PERMISSIONS",
    "DEFAULT_EVERYONE_PERMISSIONS",
    "ChannelType",
    "DiscordPyRouting",
    "DiscordStandIn",
    "DispatchedEvent",
    "DispatchedInteraction",
    "GatewayConnection",
    "IdentifyRecord",
    "Intent",
    "OutsideStandInError",
    "Permission",
    "RecordedRequest",
    "make_dm_channel",
    "make_forum_channel",
    "make_member",
    "make_overwrite",
    "make_role",
    "make_text_channel",
    "make_thread",
    "make_user",
    "point_discord_py_at",
    "use_gateway_from_api",
]

JSON = dict[str, Any]
Snowflake = int | str
UserRef = Snowflake | Mapping[str, Any]


# --------------------------------------------------------------------------- Discord constants


class Intent(enum.IntFlag):
    """Gateway intents (Discord docs, "Gateway" > "Gateway Intents")."""

    GUILDS = 1 << 0
    GUILD_MEMBERS = 1 << 1
    GUILD_MODERATION = 1 << 2
    GUILD_EXPRESSIONS = 1 << 3
    GUILD_INTEGRATIONS = 1 << 4
    GUILD_WEBHOOKS = 1 << 5
    GUILD_INVITES = 1 << 6
    GUILD_VOICE_STATES = 1 << 7
    GUILD_PRESENCES = 1 << 8
    GUILD_MESSAGES = 1 << 9
    GUILD_MESSAGE_REACTIONS = 1 << 10
    GUILD_MESSAGE_TYPING = 1 << 11
    DIRECT_MESSAGES = 1 << 12
    DIRECT_MESSAGE_REACTIONS = 1 << 13
    DIRECT_MESSAGE_TYPING = 1 << 14
    MESSAGE_CONTENT = 1 << 15
    GUILD_SCHEDULED_EVENTS = 1 << 16
    AUTO_MODERATION_CONFIGURATION = 1 << 20
    AUTO_MODERATION_EXECUTION = 1 << 21
    GUILD_MESSAGE_POLLS = 1 << 24
    DIRECT_MESSAGE_POLLS = 1 << 25


_ALL_INTENTS = functools.reduce(lambda acc, flag: acc | int(flag), Intent, 0)
_PRIVILEGED_INTENTS = int(Intent.GUILD_MEMBERS | Intent.GUILD_PRESENCES | Intent.MESSAGE_CONTENT)


class Permission(enum.IntFlag):
    """Permission bits (Discord docs, "Topics" > "Permissions"); the ones tests usually need."""

    CREATE_INSTANT_INVITE = 1 << 0
    KICK_MEMBERS = 1 << 1
    BAN_MEMBERS = 1 << 2
    ADMINISTRATOR = 1 << 3
    MANAGE_CHANNELS = 1 << 4
    MANAGE_GUILD = 1 << 5
    ADD_REACTIONS = 1 << 6
    VIEW_AUDIT_LOG = 1 << 7
    VIEW_CHANNEL = 1 << 10
    SEND_MESSAGES = 1 << 11
    SEND_TTS_MESSAGES = 1 << 12
    MANAGE_MESSAGES = 1 << 13
    EMBED_LINKS = 1 << 14
    ATTACH_FILES = 1 << 15
    READ_MESSAGE_HISTORY = 1 << 16
    MENTION_EVERYONE = 1 << 17
    USE_EXTERNAL_EMOJIS = 1 << 18
    CONNECT = 1 << 20
    SPEAK = 1 << 21
    CHANGE_NICKNAME = 1 << 26
    MANAGE_ROLES = 1 << 28
    USE_APPLICATION_COMMANDS = 1 << 31
    MANAGE_THREADS = 1 << 34
    CREATE_PUBLIC_THREADS = 1 << 35
    CREATE_PRIVATE_THREADS = 1 << 36
    SEND_MESSAGES_IN_THREADS = 1 << 38
    MODERATE_MEMBERS = 1 << 40


#: Every permission bit Discord defines today (bits 0-50); what owners and administrators get.
ALL_PERMISSIONS = (1 << 51) - 1

#: What the stand-in gives ``@everyone`` when a guild is added without an ``@everyone`` role.
DEFAULT_EVERYONE_PERMISSIONS = int(
    Permission.CREATE_INSTANT_INVITE
    | Permission.ADD_REACTIONS
    | Permission.VIEW_CHANNEL
    | Permission.SEND_MESSAGES
    | Permission.EMBED_LINKS
    | Permission.ATTACH_FILES
    | Permission.READ_MESSAGE_HISTORY
    | Permission.USE_EXTERNAL_EMOJIS
    | Permission.CONNECT
    | Permission.SPEAK
    | Permission.CHANGE_NICKNAME
    | Permission.USE_APPLICATION_COMMANDS
    | Permission.CREATE_PUBLIC_THREADS
    | Permission.CREATE_PRIVATE_THREADS
    | Permission.SEND_MESSAGES_IN_THREADS
)

# Losing SEND_MESSAGES also removes these (Discord's "implicit permissions").
_NEEDS_SEND = int(
    Permission.SEND_TTS_MESSAGES | Permission.MENTION_EVERYONE | Permission.EMBED_LINKS | Permission.ATTACH_FILES
)


class ChannelType(enum.IntEnum):
    """Channel types (Discord docs, "Channel" > "Channel Types")."""

    GUILD_TEXT = 0
    DM = 1
    GUILD_VOICE = 2
    GROUP_DM = 3
    GUILD_CATEGORY = 4
    GUILD_ANNOUNCEMENT = 5
    ANNOUNCEMENT_THREAD = 10
    PUBLIC_THREAD = 11
    PRIVATE_THREAD = 12
    GUILD_FORUM = 15


_THREAD_TYPES = {
    ChannelType.ANNOUNCEMENT_THREAD,
    ChannelType.PUBLIC_THREAD,
    ChannelType.PRIVATE_THREAD,
}
_DM_TYPES = {ChannelType.DM, ChannelType.GROUP_DM}

# Message flags (Discord docs, "Message" > "Message Flags").
_SUPPRESS_EMBEDS = 1 << 2
_EPHEMERAL = 1 << 6
_LOADING = 1 << 7
_SUPPRESS_NOTIFICATIONS = 1 << 12
_IS_COMPONENTS_V2 = 1 << 15
_CHANNEL_MESSAGE_FLAGS = _SUPPRESS_EMBEDS | _SUPPRESS_NOTIFICATIONS | _IS_COMPONENTS_V2
_INTERACTION_MESSAGE_FLAGS = _CHANNEL_MESSAGE_FLAGS | _EPHEMERAL

# Message types.
_DEFAULT_MESSAGE = 0
_REPLY_MESSAGE = 19
_CHAT_INPUT_COMMAND_MESSAGE = 20

# Interaction types and callback types.
_PING, _APPLICATION_COMMAND, _MESSAGE_COMPONENT, _AUTOCOMPLETE, _MODAL_SUBMIT = 1, 2, 3, 4, 5
_PONG = 1
_CHANNEL_MESSAGE_WITH_SOURCE = 4
_DEFERRED_CHANNEL_MESSAGE_WITH_SOURCE = 5
_DEFERRED_UPDATE_MESSAGE = 6
_UPDATE_MESSAGE = 7
_AUTOCOMPLETE_RESULT = 8
_MODAL = 9
_CALLBACKS_ALLOWED: dict[int, set[int]] = {
    _PING: {_PONG},
    _APPLICATION_COMMAND: {
        _CHANNEL_MESSAGE_WITH_SOURCE,
        _DEFERRED_CHANNEL_MESSAGE_WITH_SOURCE,
        _MODAL,
    },
    _MESSAGE_COMPONENT: {
        _CHANNEL_MESSAGE_WITH_SOURCE,
        _DEFERRED_CHANNEL_MESSAGE_WITH_SOURCE,
        _DEFERRED_UPDATE_MESSAGE,
        _UPDATE_MESSAGE,
        _MODAL,
    },
    _AUTOCOMPLETE: {_AUTOCOMPLETE_RESULT},
    _MODAL_SUBMIT: {
        _CHANNEL_MESSAGE_WITH_SOURCE,
        _DEFERRED_CHANNEL_MESSAGE_WITH_SOURCE,
        _DEFERRED_UPDATE_MESSAGE,
        _UPDATE_MESSAGE,
    },
}
_KNOWN_CALLBACK_TYPES = (1, 4, 5, 6, 7, 8, 9, 10, 12)

# Component types.
_ACTION_ROW, _BUTTON, _TEXT_INPUT, _TEXT_DISPLAY, _LABEL = 1, 2, 4, 10, 18
_SELECTS = {3, 5, 6, 7, 8}
_LINK_STYLE, _PREMIUM_STYLE = 5, 6

# Limits from Discord's message, embed, component and modal reference pages.
_MAX_CONTENT = 2000
_MAX_EMBEDS = 10
_MAX_EMBED_TOTAL = 6000
_MAX_ROWS = 5
_MAX_ROW_WIDTH = 5
_MAX_V2_COMPONENTS = 40
_MAX_CUSTOM_ID = 100
_MAX_BUTTON_LABEL = 80
_MAX_MODAL_TITLE = 45
_MAX_MODAL_COMPONENTS = 5
_MAX_TEXT_INPUT_LABEL = 45
_MAX_TEXT_INPUT_VALUE = 4000
_MAX_MENTION_IDS = 100

_DISCORD_EPOCH_MS = 1_420_070_400_000
_ATTACHMENT_SIZE_LIMIT = 10 * 1024 * 1024
_EVENT_BUFFER = 1000
_MENTION_PARSE = ("users", "roles", "everyone")

# Gateway opcodes and close codes (Discord docs, "Opcodes and Status Codes").
_OP_DISPATCH, _OP_HEARTBEAT, _OP_IDENTIFY, _OP_PRESENCE, _OP_VOICE = 0, 1, 2, 3, 4
_OP_RESUME, _OP_RECONNECT, _OP_REQUEST_MEMBERS, _OP_INVALID_SESSION = 6, 7, 8, 9
_OP_HELLO, _OP_HEARTBEAT_ACK = 10, 11
_CLOSE_UNKNOWN_OPCODE, _CLOSE_DECODE_ERROR, _CLOSE_NOT_AUTHENTICATED = 4001, 4002, 4003
_CLOSE_AUTH_FAILED, _CLOSE_ALREADY_AUTHENTICATED, _CLOSE_INVALID_SHARD = 4004, 4005, 4010
_CLOSE_INVALID_API_VERSION, _CLOSE_INVALID_INTENTS, _CLOSE_DISALLOWED_INTENTS = 4012, 4013, 4014

# Application flags announcing which privileged intents the app may use (the "limited" bits, as
# for an unverified app in fewer than 100 servers).
_APP_FLAG_FOR_INTENT = {
    int(Intent.GUILD_PRESENCES): 1 << 13,
    int(Intent.GUILD_MEMBERS): 1 << 15,
    int(Intent.MESSAGE_CONTENT): 1 << 19,
}

_USER_MENTION = re.compile(r"<@!?(\d+)>")
_ROLE_MENTION = re.compile(r"<@&(\d+)>")
_COMMAND_NAME = re.compile(r"^[-_'\w]{1,32}$")


def _now_iso() -> str:
    return datetime.now(UTC).isoformat()


def _sid(value: Snowflake) -> str:
    return str(int(value))


# --------------------------------------------------------------------------- payload builders


def make_user(
    user_id: Snowflake,
    username: str,
    *,
    global_name: str | None = None,
    bot: bool = False,
    discriminator: str = "0",
    avatar: str | None = None,
) -> JSON:
    """Build a user object as Discord sends it.

    Args:
        user_id: The user's snowflake.
        username: The unique username.
        global_name: The display name, if set.
        bot: Whether the user is a bot.
        discriminator: ``"0"`` for migrated usernames.
        avatar: An avatar hash, or None for the default avatar.

    Returns:
        The user object.
    """
    user: JSON = {
        "id": _sid(user_id),
        "username": username,
        "discriminator": discriminator,
        "global_name": global_name,
        "avatar": avatar,
        "avatar_decoration_data": None,
        "banner": None,
        "accent_color": None,
        "public_flags": 0,
        "flags": 0,
    }
    if bot:
        user["bot"] = True
    return user


def make_member(
    user: Mapping[str, Any],
    *,
    roles: Iterable[Snowflake] = (),
    nick: str | None = None,
    joined_at: str | None = None,
) -> JSON:
    """Build a guild member object (with its ``user``) as Discord sends it.

    Args:
        user: A user object, e.g. from ``make_user``.
        roles: Role ids the member has (``@everyone`` is implicit and not listed).
        nick: The guild nickname.
        joined_at: ISO timestamp; now when None.

    Returns:
        The member object.
    """
    return {
        "user": dict(user),
        "roles": [_sid(role) for role in roles],
        "nick": nick,
        "avatar": None,
        "banner": None,
        "joined_at": joined_at or _now_iso(),
        "premium_since": None,
        "deaf": False,
        "mute": False,
        "flags": 0,
        "pending": False,
        "communication_disabled_until": None,
    }


def make_role(
    role_id: Snowflake,
    name: str,
    *,
    permissions: int = 0,
    position: int = 1,
    color: int = 0,
    hoist: bool = False,
    managed: bool = False,
    mentionable: bool = False,
) -> JSON:
    """Build a role object; ``permissions`` is an int here and a string in the payload.

    Args:
        role_id: The role's snowflake (the guild id for ``@everyone``).
        name: The role name.
        permissions: The permission bits, e.g. ``Permission.MANAGE_GUILD``.
        position: Sorting position (``@everyone`` is 0).
        color: RGB colour.
        hoist: Whether it is shown separately.
        managed: Whether an integration manages it.
        mentionable: Whether anyone may mention it.

    Returns:
        The role object.
    """
    return {
        "id": _sid(role_id),
        "name": name,
        "color": color,
        "colors": {"primary_color": color, "secondary_color": None, "tertiary_color": None},
        "hoist": hoist,
        "icon": None,
        "unicode_emoji": None,
        "position": position,
        "permissions": str(int(permissions)),
        "managed": managed,
        "mentionable": mentionable,
        "flags": 0,
    }


def make_overwrite(target_id: Snowflake, *, member: bool = False, allow: int = 0, deny: int = 0) -> JSON:
    """Build a channel permission overwrite for a role (default) or a member.

    Args:
        target_id: The role id (the guild id for ``@everyone``) or user id.
        member: True for a member overwrite (type 1), False for a role (type 0).
        allow: Bits allowed.
        deny: Bits denied.

    Returns:
        The overwrite object.
    """
    return {
        "id": _sid(target_id),
        "type": 1 if member else 0,
        "allow": str(int(allow)),
        "deny": str(int(deny)),
    }


def make_text_channel(
    channel_id: Snowflake,
    name: str,
    *,
    position: int = 0,
    topic: str | None = None,
    parent_id: Snowflake | None = None,
    permission_overwrites: Iterable[Mapping[str, Any]] = (),
    nsfw: bool = False,
) -> JSON:
    """Build a guild text channel (type 0).

    Args:
        channel_id: The channel's snowflake.
        name: The channel name.
        position: Sorting position.
        topic: The channel topic.
        parent_id: The category id, if any.
        permission_overwrites: Overwrites from ``make_overwrite``.
        nsfw: Age-restricted channel.

    Returns:
        The channel object (``guild_id`` is filled in by ``DiscordStandIn.add_guild``).
    """
    return {
        "id": _sid(channel_id),
        "type": int(ChannelType.GUILD_TEXT),
        "name": name,
        "position": position,
        "permission_overwrites": [dict(o) for o in permission_overwrites],
        "topic": topic,
        "nsfw": nsfw,
        "last_message_id": None,
        "rate_limit_per_user": 0,
        "parent_id": None if parent_id is None else _sid(parent_id),
        "flags": 0,
    }


def make_forum_channel(
    channel_id: Snowflake,
    name: str,
    *,
    position: int = 0,
    permission_overwrites: Iterable[Mapping[str, Any]] = (),
) -> JSON:
    """Build a forum channel (type 15); its posts are threads whose parent is this channel.

    Args:
        channel_id: The channel's snowflake.
        name: The channel name.
        position: Sorting position.
        permission_overwrites: Overwrites from ``make_overwrite``.

    Returns:
        The channel object.
    """
    return {
        "id": _sid(channel_id),
        "type": int(ChannelType.GUILD_FORUM),
        "name": name,
        "position": position,
        "permission_overwrites": [dict(o) for o in permission_overwrites],
        "topic": None,
        "nsfw": False,
        "last_message_id": None,
        "rate_limit_per_user": 0,
        "parent_id": None,
        "flags": 0,
        "available_tags": [],
        "default_reaction_emoji": None,
        "default_thread_rate_limit_per_user": 0,
        "default_sort_order": None,
        "default_forum_layout": 0,
    }


def make_thread(
    thread_id: Snowflake,
    parent_id: Snowflake,
    name: str,
    *,
    owner_id: Snowflake,
    private: bool = False,
    archived: bool = False,
    locked: bool = False,
) -> JSON:
    """Build a thread channel: public (type 11) or private (type 12), in a text or forum channel.

    Args:
        thread_id: The thread's snowflake (a thread started from a message shares its id).
        parent_id: The text or forum channel it belongs to.
        name: The thread name.
        owner_id: The user who started it.
        private: A private thread (type 12).
        archived: Archived threads are not sent in GUILD_CREATE.
        locked: Only moderators may unarchive it.

    Returns:
        The channel object.
    """
    now = _now_iso()
    metadata: JSON = {
        "archived": archived,
        "auto_archive_duration": 1440,
        "archive_timestamp": now,
        "locked": locked,
        "create_timestamp": now,
    }
    if private:
        metadata["invitable"] = True
    return {
        "id": _sid(thread_id),
        "type": int(ChannelType.PRIVATE_THREAD if private else ChannelType.PUBLIC_THREAD),
        "parent_id": _sid(parent_id),
        "owner_id": _sid(owner_id),
        "name": name,
        "last_message_id": None,
        "rate_limit_per_user": 0,
        "message_count": 0,
        "member_count": 1,
        "total_message_sent": 0,
        "flags": 0,
        "applied_tags": [],
        "thread_metadata": metadata,
    }


def make_dm_channel(channel_id: Snowflake, recipient: Mapping[str, Any]) -> JSON:
    """Build a DM channel (type 1) between the bot and ``recipient`` (a user object).

    Args:
        channel_id: The channel's snowflake.
        recipient: The other user.

    Returns:
        The channel object.
    """
    return {
        "id": _sid(channel_id),
        "type": int(ChannelType.DM),
        "last_message_id": None,
        "flags": 0,
        "recipients": [dict(recipient)],
    }


# --------------------------------------------------------------------------- records


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordedRequest:
    """One REST request the stand-in answered.

    Attributes:
        method: HTTP method, upper case.
        path: Path below the API root, e.g. ``/channels/123/messages``.
        query: Query parameters.
        json: The decoded JSON body (for multipart requests, the ``payload_json`` part), or None.
        headers: Request headers without ``Authorization``.
        status: The HTTP status answered.
        response: The JSON answered, or None for 204.
        at: Wall-clock time (``time.time()``) when it arrived.
    """

    method: str
    path: str
    query: dict[str, str]
    json: Any
    headers: dict[str, str]
    status: int
    response: Any
    at: float


@dataclass(frozen=True, slots=True, kw_only=True)
class DispatchedInteraction:
    """An INTERACTION_CREATE the stand-in sent to the connected clients.

    Attributes:
        id: The interaction id (a snowflake string; discord.py's ``Interaction.id`` is its int).
        token: The interaction token, used in callback and webhook paths.
        payload: The ``d`` of the dispatch, exactly as sent.
    """

    id: str
    token: str
    payload: JSON


@dataclass(frozen=True, slots=True, kw_only=True)
class DispatchedEvent:
    """One dispatch sent (or buffered) on one session.

    Attributes:
        event: The ``t`` of the dispatch (``MESSAGE_CREATE``, ``INTERACTION_CREATE``, ...).
        session_id: The session it went to.
        shard: That session's ``[shard_id, shard_count]`` (``[0, 1]`` without ``shard``).
        data: The ``d``.
        delivered: Sent on a ready connection; False: only buffered for a RESUME (the
            session's connection is gone, e.g. its process was killed).
    """

    event: str
    session_id: str
    shard: tuple[int, int]
    data: JSON
    delivered: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class IdentifyRecord:
    """One IDENTIFY the stand-in accepted.

    Attributes:
        at: ``time.monotonic()`` when it arrived.
        shard: Its ``[shard_id, shard_count]`` (``[0, 1]`` without ``shard``).
        bucket: ``shard_id % max_concurrency`` (Discord's Gateway docs, "Session start limit":
            one IDENTIFY per bucket per 5 seconds).
        session_id: The session it opened.
    """

    at: float
    shard: tuple[int, int]
    bucket: int
    session_id: str


@dataclass(slots=True, kw_only=True)
class GatewayConnection:
    """One gateway WebSocket connection, as the stand-in saw it.

    Attributes:
        path: ``/gateway`` or ``/resume-gateway``.
        query: The query string (discord.py sends ``v``, ``encoding``, ``compress``).
        kind: ``"identify"`` or ``"resume"`` once the client said which, else None.
        session_id: The session it identified or resumed.
        close_code: The close code once closed.
    """

    path: str
    query: dict[str, str]
    kind: str | None = None
    session_id: str | None = None
    close_code: int | None = None


class _ApiError(Exception):
    """A Discord error reply: ``{"code", "message"[, "errors"]}`` with an HTTP status."""

    def __init__(
        self,
        status: int,
        code: int,
        message: str,
        *,
        errors: JSON | None = None,
        headers: Mapping[str, str] | None = None,
        body: JSON | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.headers = dict(headers or {})
        self.body: JSON = body if body is not None else {"code": code, "message": message}
        if errors:
            self.body = {"code": code, "errors": errors, "message": message}


def _unknown(code: int, what: str) -> _ApiError:
    return _ApiError(404, code, f"Unknown {what}")


class _FormErrors:
    """Collects Invalid Form Body (50035) errors into Discord's nested ``errors`` tree."""

    def __init__(self) -> None:
        self.tree: JSON = {}

    def add(self, path: Sequence[str | int], code: str, message: str) -> None:
        node = self.tree
        for key in path:
            node = node.setdefault(str(key), {})
        node.setdefault("_errors", []).append({"code": code, "message": message})

    def string(
        self,
        path: Sequence[str | int],
        value: Any,
        *,
        max_length: int,
        min_length: int = 0,
        required: bool = False,
    ) -> None:
        if value is None:
            if required:
                self.add(path, "BASE_TYPE_REQUIRED", "This field is required")
            return
        if not isinstance(value, str):
            self.add(path, "BASE_TYPE_STRING", f'Could not interpret "{value}" as string.')
        elif min_length and not min_length <= len(value) <= max_length:
            self.add(
                path,
                "BASE_TYPE_BAD_LENGTH",
                f"Must be between {min_length} and {max_length} in length.",
            )
        elif len(value) > max_length:
            self.add(path, "BASE_TYPE_MAX_LENGTH", f"Must be {max_length} or fewer in length.")
        elif required and not value:
            self.add(path, "BASE_TYPE_REQUIRED", "This field is required")

    def array(self, path: Sequence[str | int], value: Any, *, max_length: int, min_length: int = 0) -> list[Any]:
        if not isinstance(value, list):
            self.add(path, "BASE_TYPE_ARRAY", "Must be an array.")
            return []
        if min_length and not min_length <= len(value) <= max_length:
            self.add(
                path,
                "BASE_TYPE_BAD_LENGTH",
                f"Must be between {min_length} and {max_length} in length.",
            )
        elif len(value) > max_length:
            self.add(path, "BASE_TYPE_MAX_LENGTH", f"Must be {max_length} or fewer in length.")
        return value

    def raise_if_any(self) -> None:
        if self.tree:
            raise _ApiError(400, 50035, "Invalid Form Body", errors=self.tree)


# --------------------------------------------------------------------------- validation


def _check_url(errors: _FormErrors, path: Sequence[str | int], url: Any, *, attachment: bool) -> None:
    if url is None:
        return
    schemes = ("http://", "https://", "attachment://") if attachment else ("http://", "https://")
    if not isinstance(url, str) or not url.startswith(schemes):
        errors.add(path, "URL_TYPE_INVALID_URL", "Not a well formed URL.")


def _check_embeds(errors: _FormErrors, embeds: Any) -> None:
    embeds = errors.array(("embeds",), embeds, max_length=_MAX_EMBEDS)
    total = 0
    for i, embed in enumerate(embeds):
        path: tuple[str | int, ...] = ("embeds", i)
        if not isinstance(embed, dict):
            errors.add(path, "DICT_TYPE_CONVERT", "Only dictionaries may be used in a DictType")
            continue
        errors.string((*path, "title"), embed.get("title"), max_length=256)
        errors.string((*path, "description"), embed.get("description"), max_length=4096)
        _check_url(errors, (*path, "url"), embed.get("url"), attachment=False)
        color = embed.get("color")
        if color is not None and (not isinstance(color, int) or not 0 <= color <= 0xFFFFFF):
            errors.add((*path, "color"), "NUMBER_TYPE_MAX", "int value should be <= 16777215.")
        footer = embed.get("footer") or {}
        errors.string((*path, "footer", "text"), footer.get("text"), max_length=2048)
        author = embed.get("author") or {}
        errors.string((*path, "author", "name"), author.get("name"), max_length=256)
        _check_url(errors, (*path, "author", "url"), author.get("url"), attachment=False)
        for key in ("image", "thumbnail"):
            media = embed.get(key) or {}
            _check_url(errors, (*path, key, "url"), media.get("url"), attachment=True)
        fields = errors.array((*path, "fields"), embed.get("fields") or [], max_length=25)
        for j, fld in enumerate(fields):
            fpath = (*path, "fields", j)
            errors.string((*fpath, "name"), fld.get("name"), max_length=256, required=True)
            errors.string((*fpath, "value"), fld.get("value"), max_length=1024, required=True)
            total += len(str(fld.get("name") or "")) + len(str(fld.get("value") or ""))
        total += sum(
            len(str(value or ""))
            for value in (
                embed.get("title"),
                embed.get("description"),
                footer.get("text"),
                author.get("name"),
            )
        )
    if total > _MAX_EMBED_TOTAL:
        errors.add(
            ("embeds",),
            "MAX_EMBED_SIZE_EXCEEDED",
            f"Embed size exceeds maximum size of {_MAX_EMBED_TOTAL}",
        )


def _check_custom_id(errors: _FormErrors, path: Sequence[str | int], custom_id: Any, seen: set[str]) -> None:
    errors.string(path, custom_id, min_length=1, max_length=_MAX_CUSTOM_ID, required=True)
    if isinstance(custom_id, str):
        if custom_id in seen:
            errors.add(path, "COMPONENT_CUSTOM_ID_DUPLICATED", "Component custom id cannot be duplicated")
        seen.add(custom_id)


def _check_button(errors: _FormErrors, path: Sequence[str | int], button: JSON, seen: set[str]) -> None:
    style = button.get("style")
    if style not in range(1, 7):
        errors.add((*path, "style"), "BASE_TYPE_CHOICES", "Value must be one of {1, 2, 3, 4, 5, 6}.")
    errors.string((*path, "label"), button.get("label"), max_length=_MAX_BUTTON_LABEL)
    # The exact wording of the next three errors is not in Discord's docs; the codes are 50035.
    if style == _LINK_STYLE:
        _check_url(errors, (*path, "url"), button.get("url"), attachment=False)
        if not button.get("url"):
            errors.add((*path, "url"), "BASE_TYPE_REQUIRED", "This field is required")
        if button.get("custom_id") is not None:
            errors.add(
                (*path, "custom_id"),
                "COMPONENT_INVALID_FIELD",
                "Link buttons cannot have a custom_id",
            )
    elif style == _PREMIUM_STYLE:
        if not button.get("sku_id"):
            errors.add((*path, "sku_id"), "BASE_TYPE_REQUIRED", "This field is required")
    else:
        _check_custom_id(errors, (*path, "custom_id"), button.get("custom_id"), seen)
    if style != _PREMIUM_STYLE and not button.get("label") and not button.get("emoji"):
        errors.add(path, "BUTTON_COMPONENT_INVALID", "A button must have a label or an emoji")


def _check_select(errors: _FormErrors, path: Sequence[str | int], select: JSON, seen: set[str]) -> None:
    _check_custom_id(errors, (*path, "custom_id"), select.get("custom_id"), seen)
    errors.string((*path, "placeholder"), select.get("placeholder"), max_length=150)
    if select.get("type") == 3:
        options = errors.array((*path, "options"), select.get("options"), min_length=1, max_length=25)
        for k, option in enumerate(options):
            opath = (*path, "options", k)
            errors.string((*opath, "label"), option.get("label"), max_length=100, required=True)
            errors.string((*opath, "value"), option.get("value"), max_length=100, required=True)
            errors.string((*opath, "description"), option.get("description"), max_length=100)
    for key, low in (("min_values", 0), ("max_values", 1)):
        value = select.get(key)
        if value is not None and (not isinstance(value, int) or not low <= value <= 25):
            errors.add((*path, key), "NUMBER_TYPE_MAX", "int value should be <= 25.")


def _check_action_row(errors: _FormErrors, path: Sequence[str | int], row: JSON, seen: set[str]) -> None:
    children = errors.array((*path, "components"), row.get("components"), min_length=1, max_length=_MAX_ROW_WIDTH)
    if any(c.get("type") in _SELECTS for c in children) and len(children) > 1:
        errors.add(
            (*path, "components"),
            "COMPONENT_LAYOUT_WIDTH_EXCEEDED",
            "The specified component exceeds the maximum width",
        )
    for j, child in enumerate(children):
        cpath = (*path, "components", j)
        kind = child.get("type")
        if kind == _BUTTON:
            _check_button(errors, cpath, child, seen)
        elif kind in _SELECTS:
            _check_select(errors, cpath, child, seen)
        else:
            errors.add(
                (*cpath, "type"),
                "UNION_TYPE_CHOICES",
                'Value of field "type" must be one of (2, 3, 5, 6, 7, 8).',
            )


def _count_components(components: Iterable[JSON]) -> int:
    total = 0
    for component in components:
        total += 1
        total += _count_components(component.get("components") or [])
        if isinstance(component.get("accessory"), dict):
            total += 1
    return total


def _check_message_components(errors: _FormErrors, components: Any, *, v2: bool) -> None:
    seen: set[str] = set()
    if not v2:
        rows = errors.array(("components",), components, max_length=_MAX_ROWS)
        for i, row in enumerate(rows):
            if row.get("type") != _ACTION_ROW:
                errors.add(
                    ("components", i, "type"),
                    "UNION_TYPE_CHOICES",
                    'Value of field "type" must be one of (1,).',
                )
            else:
                _check_action_row(errors, ("components", i), row, seen)
        return
    # Components V2 layouts (sections, containers, ...) are checked only for their total size
    # and for the action rows inside them.
    top = errors.array(("components",), components, max_length=_MAX_V2_COMPONENTS)
    if _count_components(top) > _MAX_V2_COMPONENTS:
        errors.add(
            ("components",),
            "BASE_TYPE_MAX_LENGTH",
            f"Must be {_MAX_V2_COMPONENTS} or fewer in length.",
        )

    def walk(items: Iterable[JSON], path: tuple[str | int, ...]) -> None:
        for i, item in enumerate(items):
            if item.get("type") == _ACTION_ROW:
                _check_action_row(errors, (*path, i), item, seen)
            else:
                walk(item.get("components") or [], (*path, i, "components"))

    walk(top, ("components",))


def _check_allowed_mentions(errors: _FormErrors, allowed: Any) -> None:
    if allowed is None:
        return
    if not isinstance(allowed, dict):
        errors.add(("allowed_mentions",), "DICT_TYPE_CONVERT", "Only dictionaries may be used")
        return
    parse = allowed.get("parse", [])
    for i, kind in enumerate(parse if isinstance(parse, list) else []):
        if kind not in _MENTION_PARSE:
            errors.add(
                ("allowed_mentions", "parse", i),
                "ENUM_TYPE_COERCE",
                f'Value "{kind}" is not a valid enum value.',
            )
    for kind in ("users", "roles"):
        ids = allowed.get(kind)
        if ids is None:
            continue
        errors.array(("allowed_mentions", kind), ids, max_length=_MAX_MENTION_IDS)
        if kind in parse and ids:
            errors.add(
                ("allowed_mentions",),
                "MESSAGE_ALLOWED_MENTIONS_PARSE_EXCLUSIVE",
                f'parse:["{kind}"] and {kind}: [ids] are mutually exclusive.',
            )


def _check_text_input(
    errors: _FormErrors,
    path: Sequence[str | int],
    text_input: JSON,
    seen: set[str],
    *,
    in_label: bool,
) -> None:
    _check_custom_id(errors, (*path, "custom_id"), text_input.get("custom_id"), seen)
    if text_input.get("style") not in (1, 2):
        errors.add((*path, "style"), "BASE_TYPE_CHOICES", "Value must be one of {1, 2}.")
    if in_label:
        # Inside a Label the label text belongs to the Label; discord.py sends ``null`` here.
        if text_input.get("label"):
            errors.add((*path, "label"), "COMPONENT_INVALID_FIELD", "Must not be set inside a label")
    else:
        errors.string(
            (*path, "label"),
            text_input.get("label"),
            max_length=_MAX_TEXT_INPUT_LABEL,
            min_length=1,
            required=True,
        )
    errors.string((*path, "placeholder"), text_input.get("placeholder"), max_length=100)
    errors.string((*path, "value"), text_input.get("value"), max_length=_MAX_TEXT_INPUT_VALUE)
    low, high = text_input.get("min_length"), text_input.get("max_length")
    if low is not None and (not isinstance(low, int) or not 0 <= low <= _MAX_TEXT_INPUT_VALUE):
        errors.add((*path, "min_length"), "NUMBER_TYPE_MAX", "int value should be <= 4000.")
    if high is not None and (not isinstance(high, int) or not 1 <= high <= _MAX_TEXT_INPUT_VALUE):
        errors.add((*path, "max_length"), "NUMBER_TYPE_MAX", "int value should be <= 4000.")


def _check_modal(errors: _FormErrors, modal: Any) -> None:
    if not isinstance(modal, dict):
        errors.add(("data",), "BASE_TYPE_REQUIRED", "This field is required")
        return
    seen: set[str] = set()
    errors.string(
        ("data", "custom_id"),
        modal.get("custom_id"),
        min_length=1,
        max_length=_MAX_CUSTOM_ID,
        required=True,
    )
    errors.string(
        ("data", "title"),
        modal.get("title"),
        min_length=1,
        max_length=_MAX_MODAL_TITLE,
        required=True,
    )
    components = errors.array(
        ("data", "components"),
        modal.get("components"),
        min_length=1,
        max_length=_MAX_MODAL_COMPONENTS,
    )
    for i, component in enumerate(components):
        path = ("data", "components", i)
        kind = component.get("type")
        if kind == _ACTION_ROW:
            children = errors.array((*path, "components"), component.get("components"), min_length=1, max_length=1)
            for j, child in enumerate(children):
                if child.get("type") != _TEXT_INPUT:
                    errors.add(
                        (*path, "components", j, "type"),
                        "UNION_TYPE_CHOICES",
                        'Value of field "type" must be one of (4,).',
                    )
                else:
                    _check_text_input(errors, (*path, "components", j), child, seen, in_label=False)
        elif kind == _LABEL:
            errors.string(
                (*path, "label"),
                component.get("label"),
                min_length=1,
                max_length=_MAX_TEXT_INPUT_LABEL,
                required=True,
            )
            errors.string((*path, "description"), component.get("description"), max_length=100)
            inner = component.get("component") or {}
            if inner.get("type") == _TEXT_INPUT:
                _check_text_input(errors, (*path, "component"), inner, seen, in_label=True)
            elif inner.get("type") in _SELECTS:
                _check_select(errors, (*path, "component"), inner, seen)
            else:
                errors.add(
                    (*path, "component", "type"),
                    "UNION_TYPE_CHOICES",
                    'Value of field "type" must be one of (3, 4, 5, 6, 7, 8).',
                )
        elif kind == _TEXT_DISPLAY:
            errors.string((*path, "content"), component.get("content"), max_length=4000, required=True)
        else:
            errors.add(
                (*path, "type"),
                "UNION_TYPE_CHOICES",
                'Value of field "type" must be one of (1, 10, 18).',
            )


def _check_command(errors: _FormErrors, path: Sequence[str | int], command: Any) -> None:
    if not isinstance(command, dict):
        errors.add(path, "DICT_TYPE_CONVERT", "Only dictionaries may be used in a DictType")
        return
    kind = command.get("type", 1)
    name = command.get("name")
    errors.string((*path, "name"), name, min_length=1, max_length=32, required=True)
    if kind == 1 and isinstance(name, str) and (not _COMMAND_NAME.match(name) or name != name.lower()):
        errors.add(
            (*path, "name"),
            "APPLICATION_COMMAND_INVALID_NAME",
            f"Command name is invalid: {name}",
        )
    if kind == 1:
        errors.string(
            (*path, "description"),
            command.get("description"),
            min_length=1,
            max_length=100,
            required=True,
        )
    _check_command_options(errors, (*path, "options"), command.get("options") or [], depth=0)


def _check_command_options(errors: _FormErrors, path: Sequence[str | int], options: Any, *, depth: int) -> None:
    options = errors.array(path, options, max_length=25)
    for i, option in enumerate(options):
        opath = (*path, i)
        kind = option.get("type")
        if kind not in range(1, 12):
            errors.add((*opath, "type"), "BASE_TYPE_CHOICES", "Value must be one of range(1, 12).")
        name = option.get("name")
        errors.string((*opath, "name"), name, min_length=1, max_length=32, required=True)
        if isinstance(name, str) and (not _COMMAND_NAME.match(name) or name != name.lower()):
            errors.add(
                (*opath, "name"),
                "APPLICATION_COMMAND_INVALID_NAME",
                f"Command name is invalid: {name}",
            )
        errors.string(
            (*opath, "description"),
            option.get("description"),
            min_length=1,
            max_length=100,
            required=True,
        )
        errors.array((*opath, "choices"), option.get("choices") or [], max_length=25)
        if kind in (1, 2):
            if depth >= 2 or (kind == 2 and depth >= 1):
                errors.add(
                    (*opath, "type"),
                    "APPLICATION_COMMAND_OPTIONS_TYPE_INVALID",
                    "Sub-command and sub-command group option types are mutually exclusive to all other types",
                )
            _check_command_options(errors, (*opath, "options"), option.get("options") or [], depth=depth + 1)


def _walk_components(components: Iterable[JSON]) -> Iterator[JSON]:
    for component in components:
        yield component
        yield from _walk_components(component.get("components") or [])
        for key in ("component", "accessory"):
            inner = component.get(key)
            if isinstance(inner, dict):
                yield from _walk_components([inner])


def _number_components(components: list[JSON]) -> list[JSON]:
    """Give every component without an ``id`` one, in tree order from 1, as Discord does."""
    components = copy.deepcopy(components)
    used = {c["id"] for c in _walk_components(components) if isinstance(c.get("id"), int)}
    counter = itertools.count(1)
    for component in _walk_components(components):
        if not isinstance(component.get("id"), int):
            number = next(counter)
            while number in used:
                number = next(counter)
            component["id"] = number
    return components


# --------------------------------------------------------------------------- internal state


@dataclass(slots=True, kw_only=True)
class _Guild:
    data: JSON
    roles: dict[str, JSON]
    members: dict[str, JSON]
    channel_ids: list[str]
    thread_ids: list[str]

    @property
    def id(self) -> str:
        return str(self.data["id"])


@dataclass(slots=True, kw_only=True)
class _StoredMessage:
    data: JSON
    guild_id: str | None
    allowed_mentions: JSON | None
    interaction_id: str | None = None

    @property
    def id(self) -> str:
        return str(self.data["id"])

    @property
    def channel_id(self) -> str:
        return str(self.data["channel_id"])

    @property
    def ephemeral(self) -> bool:
        return bool(self.data.get("flags", 0) & _EPHEMERAL)


@dataclass(slots=True, kw_only=True)
class _Interaction:
    id: str
    token: str
    type: int
    payload: JSON
    created: float
    channel_id: str
    guild_id: str | None
    user_id: str
    source_message_id: str | None
    response_type: int | None = None
    original_message_id: str | None = None
    loading: bool = False
    followup_ids: list[str] = field(default_factory=list)
    modal: JSON | None = None
    modal_submitted: bool = False


@dataclass(slots=True, kw_only=True)
class _Session:
    id: str
    intents: int
    shard: list[int] | None
    seq: int = 0
    buffer: list[JSON] = field(default_factory=list)
    connection: _Connection | None = None
    invalid: bool = False
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


@dataclass(slots=True, kw_only=True, eq=False)
class _Connection:
    ws: web.WebSocketResponse
    record: GatewayConnection
    compress: Callable[[bytes], bytes] | None = None
    session: _Session | None = None
    ready: bool = False
    closed_by_server: bool = False
    send_lock: asyncio.Lock = field(default_factory=asyncio.Lock)


@dataclass(slots=True, kw_only=True)
class _Fault:
    method: str
    path: re.Pattern[str]
    status: int
    body: JSON
    headers: dict[str, str]
    remaining: int
    is_global: bool = False


@dataclass(slots=True, kw_only=True)
class _Request:
    method: str
    path: str
    params: dict[str, str]
    query: dict[str, str]
    json: Any
    files: list[JSON]


_Handler = Callable[[_Request], Coroutine[Any, Any, tuple[int, Any]]]


# --------------------------------------------------------------------------- the stand-in


class DiscordStandIn:
    """Discord REST (v10) + gateway stand-in: one aiohttp server on 127.0.0.1 at a free port.

    Use it as ``async with DiscordStandIn(...) as discord_api:``. ``api_url`` is what
    ``DISCORD_API_URL`` holds; ``GET /gateway/bot`` answers ``gateway_url``; READY's
    ``resume_gateway_url`` is ``resume_gateway_url`` (another path on the same server, so a test
    can tell a RESUME went where Discord said).

    Ids may be given as ints or strings everywhere; payloads carry them as strings, as Discord
    does. Guilds, channels and members must be registered (``add_guild``, ``add_channel``,
    ``add_user``) before people can talk or click in them.

    Args:
        bot_token: The only token accepted (REST ``Authorization: Bot <token>`` and IDENTIFY).
        application_id: The application's snowflake.
        bot_user_id: The bot user's snowflake.
        bot_name: The bot user's username.
        owner_id: The application owner's user id (``AppInfo.owner``).
        approved_intents: Privileged intents the application is approved for in the developer
            portal; asking for others closes the gateway with 4014.
        heartbeat_interval_ms: The interval announced in HELLO.
        interaction_response_timeout: Seconds an interaction accepts its initial response
            (Discord: 3); later answers get 404 code 10062. Settable on the instance.
        interaction_token_ttl: Seconds an interaction token works for followups (Discord: 900).
        shards: The shard count ``GET /gateway/bot`` recommends.
        max_concurrency: ``session_start_limit.max_concurrency`` of ``GET /gateway/bot``: how
            many IDENTIFY buckets there are (``shard_id % max_concurrency``).
    """

    def __init__(
        self,
        *,
        bot_token: str = "standin-bot-token",  # noqa: S107 - a fake token only this stand-in accepts
        application_id: Snowflake = 1_100_000_000_000_000_001,
        bot_user_id: Snowflake = 1_100_000_000_000_000_002,
        bot_name: str = "countersign",
        owner_id: Snowflake = 1_100_000_000_000_000_003,
        approved_intents: int = _PRIVILEGED_INTENTS,
        heartbeat_interval_ms: int = 41_250,
        interaction_response_timeout: float = 3.0,
        interaction_token_ttl: float = 900.0,
        shards: int = 1,
        max_concurrency: int = 1,
    ) -> None:
        self.bot_token = bot_token
        self.application_id = _sid(application_id)
        self.bot_user_id = _sid(bot_user_id)
        self.approved_intents = approved_intents
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.interaction_response_timeout = interaction_response_timeout
        self.interaction_token_ttl = interaction_token_ttl
        self.recommended_shards = shards
        self.max_concurrency = max_concurrency
        self.gateway_down = False
        """True: the gateway refuses new connections with HTTP 503, as during a Discord outage
        (connections already open stay; `disconnect_all` closes them)."""
        self._bot_user = make_user(bot_user_id, bot_name, bot=True, discriminator="0000")
        self._owner = make_user(owner_id, "app-owner")
        self._runner: web.AppRunner | None = None
        self._origin: str | None = None
        self._last_snowflake = 0
        self._requests: list[RecordedRequest] = []
        self._changed = asyncio.Condition()
        self._faults: list[_Fault] = []
        self._users: dict[str, JSON] = {self.bot_user_id: self._bot_user}
        self._guilds: dict[str, _Guild] = {}
        self._channels: dict[str, JSON] = {}
        self._dm_channels: dict[str, str] = {}
        self._messages: dict[str, _StoredMessage] = {}
        self._channel_messages: dict[str, list[str]] = {}
        self._typing: Counter[str] = Counter()
        self._interactions: dict[str, _Interaction] = {}
        self._interactions_by_token: dict[str, _Interaction] = {}
        self._commands: dict[str | None, list[JSON]] = {}
        self._sessions: dict[str, _Session] = {}
        self._connections: list[_Connection] = []
        self._gateway_log: list[GatewayConnection] = []
        self._identifies: list[JSON] = []
        self._identify_log: list[IdentifyRecord] = []
        self._dispatch_log: list[DispatchedEvent] = []
        self._resumes = 0
        self._presences: list[JSON] = []
        self._session_starts_remaining = 1000
        self._tasks: set[asyncio.Task[None]] = set()
        self._routes: list[tuple[str, re.Pattern[str], _Handler, bool]] = []
        self._users.setdefault(str(self._owner["id"]), self._owner)
        self._install_routes()

    # ------------------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        """Start serving on 127.0.0.1 at a port the OS picks."""
        app = web.Application()
        app.router.add_route("*", "/api/v10/{tail:.*}", self._handle_rest)
        app.router.add_get("/gateway", self._handle_gateway)
        app.router.add_get("/resume-gateway", self._handle_gateway)
        app.router.add_route("*", "/{tail:.*}", self._handle_elsewhere)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        host, port = self._runner.addresses[0][:2]
        self._origin = f"{host}:{port}"

    async def close(self) -> None:
        """Close gateway connections and stop serving; recorded state stays readable."""
        for connection in list(self._connections):
            connection.closed_by_server = True
            with contextlib.suppress(Exception):
                await connection.ws.close(code=WSCloseCode.GOING_AWAY, message=b"stand-in closing")
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    def _require_origin(self) -> str:
        if self._origin is None:
            raise RuntimeError("DiscordStandIn is not started; use `async with`")
        return self._origin

    @property
    def api_url(self) -> str:
        """The REST root including the version, e.g. ``http://127.0.0.1:PORT/api/v10``."""
        return f"http://{self._require_origin()}/api/v10"

    @property
    def gateway_url(self) -> str:
        """The gateway URL ``GET /gateway/bot`` answers, e.g. ``ws://127.0.0.1:PORT/gateway``."""
        return f"ws://{self._require_origin()}/gateway"

    @property
    def resume_gateway_url(self) -> str:
        """The ``resume_gateway_url`` sent in READY (same server, path ``/resume-gateway``)."""
        return f"ws://{self._require_origin()}/resume-gateway"

    @property
    def bot_user(self) -> JSON:
        """A copy of the bot's user object."""
        return copy.deepcopy(self._bot_user)

    # ------------------------------------------------------------------------- world setup

    def add_user(self, user: Mapping[str, Any]) -> JSON:
        """Register a user (e.g. someone who only DMs the bot); returns the stored object."""
        stored = dict(user)
        self._users[str(stored["id"])] = stored
        return copy.deepcopy(stored)

    def add_guild(
        self,
        guild_id: Snowflake,
        name: str,
        owner_id: Snowflake,
        *,
        channels: Iterable[Mapping[str, Any]] = (),
        roles: Iterable[Mapping[str, Any]] = (),
        members: Iterable[Mapping[str, Any]] = (),
        preferred_locale: str = "en-US",
    ) -> None:
        """Register a guild the bot is in; announced with GUILD_CREATE after READY.

        An ``@everyone`` role (id = guild id, ``DEFAULT_EVERYONE_PERMISSIONS``) and the bot's own
        member are added when missing. Threads among ``channels`` go to the guild's ``threads``.
        If a client is already connected, it gets a GUILD_CREATE now, as when a bot joins.

        Args:
            guild_id: The guild's snowflake.
            name: The guild name.
            owner_id: The owner's user id (the owner has every permission).
            channels: Channel objects (``make_text_channel``, ``make_thread``, ...).
            roles: Role objects (``make_role``).
            members: Member objects (``make_member``); their users are registered too.
            preferred_locale: The guild's locale.
        """
        gid = _sid(guild_id)
        role_map = {str(r["id"]): dict(r) for r in roles}
        role_map.setdefault(
            gid,
            make_role(gid, "@everyone", permissions=DEFAULT_EVERYONE_PERMISSIONS, position=0),
        )
        member_map: dict[str, JSON] = {}
        for member in members:
            stored = copy.deepcopy(dict(member))
            user_id = str(stored["user"]["id"])
            member_map[user_id] = stored
            self._users[user_id] = stored["user"]
        member_map.setdefault(self.bot_user_id, make_member(self._bot_user))
        guild = _Guild(
            data={
                "id": gid,
                "name": name,
                "icon": None,
                "splash": None,
                "discovery_splash": None,
                "banner": None,
                "description": None,
                "owner_id": _sid(owner_id),
                "afk_channel_id": None,
                "afk_timeout": 300,
                "verification_level": 0,
                "default_message_notifications": 0,
                "explicit_content_filter": 0,
                "features": [],
                "mfa_level": 0,
                "application_id": None,
                "system_channel_id": None,
                "system_channel_flags": 0,
                "rules_channel_id": None,
                "public_updates_channel_id": None,
                "safety_alerts_channel_id": None,
                "vanity_url_code": None,
                "premium_tier": 0,
                "premium_subscription_count": 0,
                "preferred_locale": preferred_locale,
                "nsfw_level": 0,
                "premium_progress_bar_enabled": False,
                "max_members": 500_000,
                "max_video_channel_users": 25,
                "emojis": [],
                "stickers": [],
            },
            roles=role_map,
            members=member_map,
            channel_ids=[],
            thread_ids=[],
        )
        self._guilds[gid] = guild
        for channel in channels:
            self._register_channel(guild, channel)
        if any(s.connection is not None and s.connection.ready for s in self._live_sessions()):
            self._spawn(self._dispatch("GUILD_CREATE", lambda s: self._guild_create(guild, s), guild_id=gid))

    def _register_channel(self, guild: _Guild, channel: Mapping[str, Any]) -> JSON:
        stored = copy.deepcopy(dict(channel))
        stored["guild_id"] = guild.id
        cid = str(stored["id"])
        self._channels[cid] = stored
        target = guild.thread_ids if stored["type"] in _THREAD_TYPES else guild.channel_ids
        if cid not in target:
            target.append(cid)
        return stored

    async def add_channel(self, guild_id: Snowflake, channel: Mapping[str, Any]) -> JSON:
        """Create a channel or thread in a guild, dispatching CHANNEL_CREATE / THREAD_CREATE.

        Args:
            guild_id: The guild.
            channel: A channel object (``make_text_channel``, ``make_thread``, ...).

        Returns:
            The stored channel object.
        """
        guild = self._guild(guild_id)
        stored = self._register_channel(guild, channel)
        if stored["type"] in _THREAD_TYPES:
            event, payload = "THREAD_CREATE", {**stored, "newly_created": True}
        else:
            event, payload = "CHANNEL_CREATE", stored
        await self._dispatch(
            event, lambda s: copy.deepcopy(payload) if s.intents & Intent.GUILDS else None, guild_id=guild.id
        )
        return copy.deepcopy(stored)

    # ------------------------------------------------------------------------- people act

    async def send_message(
        self,
        channel_id: Snowflake,
        author: UserRef,
        content: str,
        *,
        mentions: Iterable[UserRef] | None = None,
        mention_roles: Iterable[Snowflake] | None = None,
        guild_id: Snowflake | None = None,
        message_reference: Mapping[str, Any] | None = None,
        embeds: Iterable[Mapping[str, Any]] = (),
    ) -> JSON:
        """Have a person post a message, dispatching MESSAGE_CREATE as Discord shapes it.

        The author must be a member of the channel's guild (or, in a DM channel, its recipient).
        Mentions default to what ``content`` contains (``<@id>``, ``<@&id>``, ``@everyone`` /
        ``@here``); pass ``mentions`` / ``mention_roles`` to override. Clients without the
        MESSAGE_CONTENT intent get empty ``content`` unless the bot is mentioned.

        Args:
            channel_id: A text channel, thread, or DM channel.
            author: A user id or user object.
            content: The text.
            mentions: Users mentioned, overriding what ``content`` contains.
            mention_roles: Role ids mentioned, overriding what ``content`` contains.
            guild_id: Checked against the channel's guild when given.
            message_reference: ``{"message_id": ...}`` to make it a reply.
            embeds: Embeds on the message.

        Returns:
            The stored message (gateway shape, with ``guild_id`` and ``member`` in guilds).
        """
        channel = self._channel(channel_id)
        self._check_guild_arg(channel, guild_id)
        user = self._user(author)
        guild = self._guilds.get(channel.get("guild_id") or "")
        if guild is not None and str(user["id"]) not in guild.members:
            raise ValueError(f"user {user['id']} is not a member of guild {guild.id}")
        reference, referenced = None, None
        if message_reference is not None:
            referenced = self._message(message_reference["message_id"])
            reference = {
                "type": 0,
                "message_id": referenced.id,
                "channel_id": referenced.channel_id,
                **({"guild_id": guild.id} if guild else {}),
            }
        if mentions is None:
            mentioned = [self._users[uid] for uid in _USER_MENTION.findall(content) if uid in self._users]
        else:
            mentioned = [self._user(m) for m in mentions]
        if referenced is not None:
            mentioned.append(referenced.data["author"])
        roles = _ROLE_MENTION.findall(content) if mention_roles is None else [_sid(r) for r in mention_roles]
        data = self._message_object(
            channel_id=str(channel["id"]),
            author=user,
            content=content,
            embeds=[dict(e) for e in embeds],
            components=[],
            flags=0,
            mentions=_unique_users(mentioned),
            mention_roles=list(dict.fromkeys(roles)),
            mention_everyone="@everyone" in content or "@here" in content,
            reference=reference,
            referenced=referenced,
        )
        stored = self._store(data, guild_id=guild.id if guild else None, allowed_mentions=None)
        await self._dispatch_message("MESSAGE_CREATE", stored)
        return self._gateway_message(stored, full=True)

    async def dispatch_again(self, message_id: Snowflake) -> None:
        """Dispatch a stored message's MESSAGE_CREATE once more.

        Discord may deliver an event again (a resumed session replays what the client may not
        have seen); a bot must not act on it twice.
        """
        await self._dispatch_message("MESSAGE_CREATE", self._message(message_id))

    async def send_dm(self, user: UserRef, content: str, **kwargs: Any) -> JSON:
        """Have a person DM the bot (creating the DM channel); see ``send_message`` for kwargs.

        Returns:
            The stored message; its ``channel_id`` is the DM channel.
        """
        person = self._user(user)
        channel_id = self._dm_channel_for(person)
        return await self.send_message(channel_id, person, content, **kwargs)

    async def edit_message(self, channel_id: Snowflake, message_id: Snowflake, content: str) -> JSON:
        """Have a person edit their message, dispatching MESSAGE_UPDATE with the full message.

        Returns:
            The updated message in gateway shape.
        """
        stored = self._message(message_id)
        if stored.channel_id != _sid(channel_id):
            raise ValueError(f"message {message_id} is not in channel {channel_id}")
        stored.data["content"] = content
        stored.data["edited_timestamp"] = _now_iso()
        stored.data["mentions"] = _unique_users(
            self._users[uid] for uid in _USER_MENTION.findall(content) if uid in self._users
        )
        stored.data["mention_roles"] = list(dict.fromkeys(_ROLE_MENTION.findall(content)))
        await self._dispatch_message("MESSAGE_UPDATE", stored)
        return self._gateway_message(stored, full=True)

    async def delete_message(self, channel_id: Snowflake, message_id: Snowflake) -> None:
        """Have a person delete their message, dispatching MESSAGE_DELETE; reading it is then 404 (10008)."""
        stored = self._message(message_id)
        if stored.channel_id != _sid(channel_id):
            raise ValueError(f"message {message_id} is not in channel {channel_id}")
        await self._delete(stored)

    async def click_button(
        self,
        message_id: Snowflake,
        custom_id: str,
        user: UserRef,
        *,
        member_roles: Iterable[Snowflake] | None = None,
        permissions: int | str | None = None,
        guild_id: Snowflake | None = None,
        channel_id: Snowflake | None = None,
        locale: str = "en-US",
    ) -> DispatchedInteraction:
        """Have a person click a button on a stored message (INTERACTION_CREATE type 3).

        The button must be on the message and enabled, as only those can be clicked. In a guild
        the payload carries ``member`` with the member's roles and ``permissions`` (the member's
        permissions in the channel after overwrites, computed unless given); in a DM, ``user``.

        Args:
            message_id: The message holding the button.
            custom_id: The button's custom_id.
            user: Who clicks (user id or object); must be a member in a guild channel.
            member_roles: Roles to report instead of the member's registered ones.
            permissions: The ``member.permissions`` to send instead of the computed value.
            guild_id: Checked against the message's guild when given.
            channel_id: Checked against the message's channel when given.
            locale: The clicker's locale.

        Returns:
            The dispatched interaction (id, token, payload).
        """
        stored = self._message(message_id)
        channel = self._channel(stored.channel_id)
        if channel_id is not None and _sid(channel_id) != stored.channel_id:
            raise ValueError(f"message {message_id} is not in channel {channel_id}")
        self._check_guild_arg(channel, guild_id)
        button = next(
            (
                c
                for c in _walk_components(stored.data.get("components") or [])
                if c.get("type") == _BUTTON and c.get("custom_id") == custom_id
            ),
            None,
        )
        if button is None:
            raise LookupError(f"message {message_id} has no button with custom_id {custom_id!r}")
        if button.get("disabled"):
            raise ValueError(f"button {custom_id!r} is disabled; Discord would not send a click")
        data: JSON = {"custom_id": custom_id, "component_type": _BUTTON}
        if "id" in button:
            data["id"] = button["id"]
        return await self._interact(
            kind=_MESSAGE_COMPONENT,
            data=data,
            user=user,
            channel=channel,
            member_roles=member_roles,
            permissions=permissions,
            locale=locale,
            message=stored,
        )

    async def submit_modal(
        self,
        custom_id: str,
        user: UserRef,
        values: Mapping[str, str | Sequence[str]],
        *,
        member_roles: Iterable[Snowflake] | None = None,
        permissions: int | str | None = None,
        locale: str = "en-US",
    ) -> DispatchedInteraction:
        """Have a person submit the latest modal opened with ``custom_id`` (INTERACTION_CREATE 5).

        ``data.components`` mirrors the modal: action rows of text inputs stay action rows, Label
        components (type 18) come back as ``{"type": 18, "id", "component": {...}}``, text
        displays as ``{"type": 10, "id"}``. Inputs not in ``values`` keep their prefilled value
        (or ""). Values a person could not submit (a required input left empty, outside
        min/max length) raise ``ValueError``, since Discord's client would not send them.

        Args:
            custom_id: The modal's custom_id.
            user: Who submits; must be the person the modal was shown to.
            values: text input custom_id -> text (or list of values for a select in a label).
            member_roles: Roles to report instead of the member's registered ones.
            permissions: The ``member.permissions`` to send instead of the computed value.
            locale: The submitter's locale.

        Returns:
            The dispatched interaction.
        """
        opener = next(
            (
                i
                for i in reversed(self._interactions.values())
                if i.modal is not None and i.modal.get("custom_id") == custom_id and not i.modal_submitted
            ),
            None,
        )
        if opener is None or opener.modal is None:
            raise LookupError(f"no open modal with custom_id {custom_id!r}")
        person = self._user(user)
        if str(person["id"]) != opener.user_id:
            raise ValueError(f"the modal was shown to user {opener.user_id}, not {person['id']}")
        unknown = set(values) - {c.get("custom_id") for c in _walk_components(opener.modal["components"])}
        if unknown:
            raise ValueError(f"the modal has no inputs {sorted(unknown)}")
        components = [_submitted(c, values) for c in _number_components(opener.modal["components"])]
        opener.modal_submitted = True
        channel = self._channel(opener.channel_id)
        message = self._messages.get(opener.source_message_id or "")
        return await self._interact(
            kind=_MODAL_SUBMIT,
            data={"custom_id": custom_id, "components": components},
            user=person,
            channel=channel,
            member_roles=member_roles,
            permissions=permissions,
            locale=locale,
            message=message,
        )

    async def invoke_command(
        self,
        name: str,
        user: UserRef,
        *,
        channel_id: Snowflake,
        options: Iterable[Mapping[str, Any]] = (),
        resolved: Mapping[str, Any] | None = None,
        member_roles: Iterable[Snowflake] | None = None,
        permissions: int | str | None = None,
        locale: str = "en-US",
    ) -> DispatchedInteraction:
        """Have a person run a registered chat-input command (INTERACTION_CREATE type 2).

        Only commands registered through the REST API (e.g. ``tree.sync()``) can be run; a guild
        command of the channel's guild wins over a global one with the same name.

        Args:
            name: The top-level command name.
            user: Who runs it.
            channel_id: Where.
            options: ``data.options`` as Discord sends them (sub-commands nest their options).
            resolved: ``data.resolved`` for user/role/channel options.
            member_roles: Roles to report instead of the member's registered ones.
            permissions: The ``member.permissions`` to send instead of the computed value.
            locale: The invoker's locale.

        Returns:
            The dispatched interaction.
        """
        channel = self._channel(channel_id)
        return await self._interact(
            kind=_APPLICATION_COMMAND,
            data=self._command_data(name, channel, options, resolved),
            user=user,
            channel=channel,
            member_roles=member_roles,
            permissions=permissions,
            locale=locale,
            message=None,
        )

    async def forge_interaction(
        self,
        kind: Literal["component", "modal_submit"],
        data: Mapping[str, Any],
        user: UserRef,
        *,
        channel_id: Snowflake,
        message_id: Snowflake | None = None,
        member_roles: Iterable[Snowflake] | None = None,
        permissions: int | str | None = None,
    ) -> DispatchedInteraction:
        """Dispatch a click or a modal submission with ``data`` exactly as given.

        Discord only sends clicks on components a message shows, and submissions of modals it
        showed to that person; ``click_button`` and ``submit_modal`` enforce that. A bot must
        not rely on it (a stale client, a platform bug, a payload bent in transit): this sends
        any ``custom_id``, any component shape, on any message, as any member, so tests can
        check the bot refuses what it never offered.

        Args:
            kind: ``"component"`` (type 3) or ``"modal_submit"`` (type 5).
            data: the interaction's ``data``, sent as is.
            user: who acts; must be a member in a guild channel.
            channel_id: where.
            message_id: the message the interaction comes from (required by Discord for
                components; optional here).
            member_roles: roles to report instead of the member's registered ones.
            permissions: the ``member.permissions`` to send instead of the computed value.

        Returns:
            The dispatched interaction.
        """
        return await self._interact(
            kind=_MESSAGE_COMPONENT if kind == "component" else _MODAL_SUBMIT,
            data=copy.deepcopy(dict(data)),
            user=user,
            channel=self._channel(channel_id),
            member_roles=member_roles,
            permissions=permissions,
            locale="en-US",
            message=self._message(message_id) if message_id is not None else None,
        )

    async def autocomplete(
        self,
        name: str,
        user: UserRef,
        *,
        channel_id: Snowflake,
        options: Iterable[Mapping[str, Any]],
        locale: str = "en-US",
    ) -> DispatchedInteraction:
        """Have a person type into an autocomplete option (INTERACTION_CREATE type 4).

        The app answers with callback type 8 and ``data.choices``; read them with
        ``autocomplete_choices``.

        Args:
            name: The top-level command name.
            user: Who types.
            channel_id: Where.
            options: ``data.options`` as for ``invoke_command``, with ``"focused": True`` on the
                option being typed (its ``value`` is the partial text, a string).

        Returns:
            The dispatched interaction.
        """
        channel = self._channel(channel_id)
        return await self._interact(
            kind=_AUTOCOMPLETE,
            data=self._command_data(name, channel, options, None),
            user=user,
            channel=channel,
            member_roles=None,
            permissions=None,
            locale=locale,
            message=None,
        )

    def autocomplete_choices(self, interaction_id: Snowflake) -> list[JSON] | None:
        """The choices of the app's autocomplete answer to an interaction; None before it answered."""
        for request in self.callbacks(interaction_id):
            body = request.json or {}
            if body.get("type") == _AUTOCOMPLETE_RESULT:
                return list((body.get("data") or {}).get("choices") or [])
        return None

    def _command_data(
        self,
        name: str,
        channel: JSON,
        options: Iterable[Mapping[str, Any]],
        resolved: Mapping[str, Any] | None,
    ) -> JSON:
        guild_id = channel.get("guild_id")
        candidates = [*self._commands.get(guild_id, []), *self._commands.get(None, [])]
        command = next((c for c in candidates if c["name"] == name and c.get("type", 1) == 1), None)
        if command is None:
            raise LookupError(f"no chat-input command {name!r} is registered")
        data: JSON = {
            "id": command["id"],
            "name": name,
            "type": 1,
            "options": [dict(o) for o in options],
        }
        if command.get("guild_id"):
            data["guild_id"] = command["guild_id"]
        if resolved is not None:
            data["resolved"] = dict(resolved)
        return data

    # ------------------------------------------------------------------------- gateway control

    async def wait_until_ready(self, timeout: float = 30.0) -> None:
        """Wait until a client has IDENTIFYed (or RESUMEd) and got READY and its GUILD_CREATEs.

        discord.py fires ``on_ready`` a little later (after its ``guild_ready_timeout``).
        """
        await self._wait_for(
            lambda: any(c.ready for c in self._connections),
            timeout,
            "no client became ready on the gateway",
        )

    async def disconnect_all(self, code: int = 4000, *, resumable: bool = True) -> int:
        """Close every gateway connection with ``code``, as when Discord drops connections.

        Args:
            code: The close code. discord.py reconnects (RESUME) after 4000-4003, 4005-4009 and
                1000/1001; it gives up on 4004 and 4010-4014.
            resumable: False also forgets the sessions, so a RESUME gets INVALID_SESSION
                (``d: false``) and the client must IDENTIFY again.

        Returns:
            How many connections were closed.
        """
        connections = list(self._connections)
        for connection in connections:
            connection.ready = False
            connection.closed_by_server = True
            if not resumable and connection.session is not None:
                connection.session.invalid = True
        if not resumable:
            for session in self._sessions.values():
                session.invalid = True
        for connection in connections:
            with contextlib.suppress(Exception):
                await connection.ws.close(code=code, message=b"stand-in disconnect")
        return len(connections)

    async def request_reconnect(self) -> None:
        """Send op 7 RECONNECT to every connection (the client should close and RESUME)."""
        for connection in list(self._connections):
            connection.ready = False
            await self._send(connection, {"op": _OP_RECONNECT, "d": None, "s": None, "t": None})

    async def invalidate_sessions(self, *, resumable: bool = False) -> None:
        """Send op 9 INVALID_SESSION to every connection.

        Args:
            resumable: The ``d`` of the event; False also forgets the sessions.
        """
        for connection in list(self._connections):
            connection.ready = False
            if not resumable and connection.session is not None:
                connection.session.invalid = True
            await self._send(connection, {"op": _OP_INVALID_SESSION, "d": resumable, "s": None, "t": None})

    # ------------------------------------------------------------------------- REST control

    def rate_limit(
        self,
        method: str,
        path_regex: str,
        *,
        retry_after: float = 0.1,
        times: int = 1,
        is_global: bool = False,
    ) -> None:
        """Answer the next ``times`` matching requests with 429, as Discord's rate limiter does.

        The reply has ``Retry-After``, ``X-RateLimit-Limit/Remaining/Reset/Reset-After/Bucket/
        Scope`` (``X-RateLimit-Global`` when global) and ``{"message": "You are being rate
        limited.", "retry_after", "global"}``. ``Via`` is set on every reply: discord.py treats a
        429 without it as a Cloudflare ban and does not retry.

        Args:
            method: HTTP method.
            path_regex: Regex matched (fullmatch) against the path below ``/api/v10``.
            retry_after: Seconds to wait.
            times: How many requests to refuse.
            is_global: A global rate limit.
        """
        reset = time.time() + retry_after
        headers = {
            "Retry-After": f"{retry_after:g}",
            "X-RateLimit-Limit": "5",
            "X-RateLimit-Remaining": "0",
            "X-RateLimit-Reset": f"{reset:.3f}",
            "X-RateLimit-Reset-After": f"{retry_after:.3f}",
            "X-RateLimit-Bucket": secrets.token_hex(16),
            "X-RateLimit-Scope": "global" if is_global else "user",
        }
        if is_global:
            headers["X-RateLimit-Global"] = "true"
        body = {
            "message": "You are being rate limited.",
            "retry_after": retry_after,
            "global": is_global,
        }
        if is_global:
            body["code"] = 0
        self._faults.append(
            _Fault(
                method=method.upper(),
                path=re.compile(path_regex),
                status=429,
                body=body,
                headers=headers,
                remaining=times,
                is_global=is_global,
            )
        )

    def fail_next(
        self,
        method: str,
        path_regex: str,
        *,
        status: int,
        code: int = 0,
        message: str | None = None,
        times: int = 1,
    ) -> None:
        """Answer the next ``times`` matching requests with an error (e.g. 403 50013, 500).

        Args:
            method: HTTP method.
            path_regex: Regex matched (fullmatch) against the path below ``/api/v10``.
            status: HTTP status.
            code: Discord's JSON error code.
            message: The error message; ``"<status>: <reason>"`` when None.
            times: How many requests to fail.
        """
        reasons = {
            400: "Bad Request",
            403: "Forbidden",
            404: "Not Found",
            500: "Internal Server Error",
        }
        text = message or f"{status}: {reasons.get(status, 'Error')}"
        self._faults.append(
            _Fault(
                method=method.upper(),
                path=re.compile(path_regex),
                status=status,
                body={"message": text, "code": code},
                headers={},
                remaining=times,
            )
        )

    # ------------------------------------------------------------------------- inspection

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every REST request answered so far, in arrival order."""
        return list(self._requests)

    def requests_to(self, method: str, path_regex: str) -> list[RecordedRequest]:
        """The recorded requests whose method matches and whose path fullmatches the regex."""
        pattern = re.compile(path_regex)
        return [r for r in self._requests if r.method == method.upper() and pattern.fullmatch(r.path)]

    async def wait_for_request(
        self,
        method: str,
        path_regex: str,
        predicate: Callable[[RecordedRequest], bool] | None = None,
        *,
        count: int = 1,
        timeout: float = 30.0,
    ) -> list[RecordedRequest]:
        """Wait until ``count`` matching requests were answered; return the first ``count``.

        Args:
            method: HTTP method.
            path_regex: Regex matched (fullmatch) against the path below ``/api/v10``.
            predicate: An extra test on each request.
            count: How many to wait for.
            timeout: Seconds before ``TimeoutError``.
        """

        def matching() -> list[RecordedRequest]:
            found = self.requests_to(method, path_regex)
            return [r for r in found if predicate is None or predicate(r)]

        await self._wait_for(
            lambda: len(matching()) >= count,
            timeout,
            f"expected {count} x {method} {path_regex}",
        )
        return matching()[:count]

    def callbacks(self, interaction_id: Snowflake) -> list[RecordedRequest]:
        """Every ``POST /interactions/{id}/{token}/callback`` for that interaction (also refused ones)."""
        return self.requests_to("POST", rf"/interactions/{_sid(interaction_id)}/[^/]+/callback")

    def messages(self, channel_id: Snowflake, *, include_others: bool = False) -> list[JSON]:
        """Messages the bot posted in a channel (by REST or interaction), oldest first.

        Each is Discord's message object plus ``allowed_mentions``: what the bot sent for it
        (None when it sent none). Ephemeral messages are included (``flags & 64``).

        Args:
            channel_id: The channel.
            include_others: Also include messages people posted (``send_message``).
        """
        result = []
        for message_id in self._channel_messages.get(_sid(channel_id), []):
            stored = self._messages.get(message_id)
            if stored is None:
                continue
            if not include_others and stored.data["author"]["id"] != self.bot_user_id:
                continue
            result.append({**copy.deepcopy(stored.data), "allowed_mentions": stored.allowed_mentions})
        return result

    def message(self, message_id: Snowflake) -> JSON:
        """One stored message (any author), with ``allowed_mentions`` as in ``messages``."""
        stored = self._message(message_id)
        return {**copy.deepcopy(stored.data), "allowed_mentions": stored.allowed_mentions}

    def dm_channel_id(self, user: UserRef) -> str | None:
        """The id of the DM channel between the bot and ``user``, once it was opened (None before)."""
        return self._dm_channels.get(str(self._user(user)["id"]))

    def followups(self, interaction_id: Snowflake) -> list[JSON]:
        """Messages sent through the interaction's webhook (``POST /webhooks/{app}/{token}``)."""
        interaction = self._interactions.get(_sid(interaction_id))
        if interaction is None:
            return []
        return [self.message(mid) for mid in interaction.followup_ids if mid in self._messages]

    def original_response(self, interaction_id: Snowflake) -> JSON | None:
        """The interaction's original response message (None before one exists)."""
        interaction = self._interactions.get(_sid(interaction_id))
        if interaction is None or interaction.original_message_id is None:
            return None
        return self.message(interaction.original_message_id)

    def typing(self, channel_id: Snowflake) -> int:
        """How many times the bot triggered the typing indicator in a channel."""
        return self._typing[_sid(channel_id)]

    def commands(self, guild_id: Snowflake | None = None) -> list[JSON]:
        """The application commands registered globally (or for one guild)."""
        key = None if guild_id is None else _sid(guild_id)
        return copy.deepcopy(self._commands.get(key, []))

    @property
    def intents(self) -> int | None:
        """The intents of the most recent IDENTIFY, or None before any."""
        return self._identifies[-1]["intents"] if self._identifies else None

    @property
    def identifies(self) -> list[JSON]:
        """Every IDENTIFY ``d`` received, without the token."""
        return copy.deepcopy(self._identifies)

    @property
    def identify_log(self) -> list[IdentifyRecord]:
        """Every IDENTIFY accepted, oldest first, with its arrival time and bucket."""
        return list(self._identify_log)

    def shortest_identify_gap(self) -> float | None:
        """The shortest time in seconds between two IDENTIFYs of one bucket, None if no bucket had two."""
        gaps: list[float] = []
        last: dict[int, float] = {}
        for record in self._identify_log:
            if record.bucket in last:
                gaps.append(record.at - last[record.bucket])
            last[record.bucket] = record.at
        return min(gaps) if gaps else None

    def dispatched(self, event: str | None = None) -> list[DispatchedEvent]:
        """Every dispatch sent or buffered, oldest first (only `event`'s when given)."""
        return [d for d in self._dispatch_log if event is None or d.event == event]

    def ready_shards(self) -> dict[int, str]:
        """Shard id -> session id of every connection that is ready now."""
        return {
            _shard_of(c.session.shard)[0]: c.session.id for c in self._connections if c.ready and c.session is not None
        }

    async def wait_for_shards(self, shard_ids: Iterable[int], timeout: float = 30.0) -> dict[int, str]:
        """Wait until each of `shard_ids` has a ready connection; return shard id -> session id."""
        wanted = set(shard_ids)
        await self._wait_for(
            lambda: wanted <= set(self.ready_shards()), timeout, f"shards {sorted(wanted)} not all ready"
        )
        return {k: v for k, v in self.ready_shards().items() if k in wanted}

    @property
    def resume_count(self) -> int:
        """How many RESUMEs succeeded."""
        return self._resumes

    @property
    def gateway_connections(self) -> list[GatewayConnection]:
        """Every gateway connection so far, oldest first."""
        return list(self._gateway_log)

    @property
    def presence_updates(self) -> list[JSON]:
        """Every op 3 PRESENCE_UPDATE ``d`` received."""
        return copy.deepcopy(self._presences)

    # ------------------------------------------------------------------------- lookups

    def _guild(self, guild_id: Snowflake) -> _Guild:
        guild = self._guilds.get(_sid(guild_id))
        if guild is None:
            raise LookupError(f"unknown guild {guild_id}; register it with add_guild")
        return guild

    def _channel(self, channel_id: Snowflake) -> JSON:
        channel = self._channels.get(_sid(channel_id))
        if channel is None:
            raise LookupError(f"unknown channel {channel_id}; register it with add_guild")
        return channel

    def _message(self, message_id: Snowflake) -> _StoredMessage:
        stored = self._messages.get(_sid(message_id))
        if stored is None:
            raise LookupError(f"unknown message {message_id}")
        return stored

    def _user(self, user: UserRef) -> JSON:
        if isinstance(user, Mapping):
            uid = str(user["id"])
            self._users.setdefault(uid, dict(user))
            return self._users[uid]
        found = self._users.get(_sid(user))
        if found is None:
            raise LookupError(f"unknown user {user}; add it with add_user or add_guild(members=)")
        return found

    def _check_guild_arg(self, channel: JSON, guild_id: Snowflake | None) -> None:
        if guild_id is not None and channel.get("guild_id") != _sid(guild_id):
            raise ValueError(f"channel {channel['id']} is not in guild {guild_id}")

    def _dm_channel_for(self, user: JSON) -> str:
        uid = str(user["id"])
        channel_id = self._dm_channels.get(uid)
        if channel_id is None:
            channel_id = self._snowflake()
            self._channels[channel_id] = make_dm_channel(channel_id, user)
            self._dm_channels[uid] = channel_id
        return channel_id

    def _snowflake(self) -> str:
        """A fresh snowflake from the current time, strictly increasing."""
        value = (int(time.time() * 1000) - _DISCORD_EPOCH_MS) << 22
        value = max(value, self._last_snowflake + 1)
        self._last_snowflake = value
        return str(value)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _wait_for(self, condition: Callable[[], bool], timeout: float, what: str) -> None:
        try:
            async with asyncio.timeout(timeout), self._changed:
                await self._changed.wait_for(condition)
        except TimeoutError:
            recent = ", ".join(f"{r.method} {r.path} -> {r.status}" for r in self._requests[-10:])
            raise TimeoutError(f"{what} within {timeout}s; last requests: {recent}") from None

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    # ------------------------------------------------------------------------- permissions

    def _permissions(self, guild: _Guild, user_id: str, role_ids: Iterable[str], channel: JSON | None) -> int:
        """A member's permissions in a channel, per Discord's documented algorithm."""
        if guild.data["owner_id"] == user_id:
            return ALL_PERMISSIONS
        role_ids = [r for r in role_ids if r != guild.id]
        base = int(guild.roles.get(guild.id, {}).get("permissions", "0"))
        for role_id in role_ids:
            base |= int(guild.roles.get(role_id, {}).get("permissions", "0"))
        if base & Permission.ADMINISTRATOR:
            return ALL_PERMISSIONS
        if channel is None:
            return base
        if channel.get("type") in _THREAD_TYPES:
            channel = self._channels.get(str(channel.get("parent_id")), channel)
        overwrites = {str(o["id"]): o for o in channel.get("permission_overwrites") or []}
        everyone = overwrites.get(guild.id)
        if everyone:
            base = (base & ~int(everyone["deny"])) | int(everyone["allow"])
        allow = deny = 0
        for role_id in role_ids:
            overwrite = overwrites.get(role_id)
            if overwrite and overwrite.get("type", 0) == 0:
                allow |= int(overwrite["allow"])
                deny |= int(overwrite["deny"])
        base = (base & ~deny) | allow
        member = overwrites.get(user_id)
        if member and member.get("type") == 1:
            base = (base & ~int(member["deny"])) | int(member["allow"])
        if not base & Permission.VIEW_CHANNEL:
            return 0
        if not base & Permission.SEND_MESSAGES:
            base &= ~_NEEDS_SEND
        return base

    def _bot_permissions(self, channel: JSON) -> int:
        guild = self._guilds.get(channel.get("guild_id") or "")
        if guild is None:
            return ALL_PERMISSIONS
        member = guild.members.get(self.bot_user_id, {"roles": []})
        return self._permissions(guild, self.bot_user_id, member["roles"], channel)

    def _require_send(self, channel: JSON) -> None:
        if channel["type"] in _DM_TYPES:
            return
        allowed = self._bot_permissions(channel)
        if not allowed & Permission.VIEW_CHANNEL:
            raise _ApiError(403, 50001, "Missing Access")
        needed = Permission.SEND_MESSAGES_IN_THREADS if channel["type"] in _THREAD_TYPES else Permission.SEND_MESSAGES
        if not allowed & needed:
            raise _ApiError(403, 50013, "Missing Permissions")

    # ------------------------------------------------------------------------- messages

    def _message_object(
        self,
        *,
        channel_id: str,
        author: JSON,
        content: str,
        embeds: list[JSON],
        components: list[JSON],
        flags: int,
        mentions: list[JSON],
        mention_roles: list[str],
        mention_everyone: bool,
        reference: JSON | None = None,
        referenced: _StoredMessage | None = None,
        message_type: int | None = None,
        message_id: str | None = None,
    ) -> JSON:
        data: JSON = {
            "type": message_type if message_type is not None else (_REPLY_MESSAGE if reference else _DEFAULT_MESSAGE),
            "id": message_id or self._snowflake(),
            "channel_id": channel_id,
            "author": copy.deepcopy(author),
            "content": content,
            "timestamp": _now_iso(),
            "edited_timestamp": None,
            "tts": False,
            "mention_everyone": mention_everyone,
            "mentions": copy.deepcopy(mentions),
            "mention_roles": mention_roles,
            "attachments": [],
            "embeds": [{"type": "rich", **e} for e in embeds],
            "pinned": False,
            "flags": flags,
            "components": _number_components(components),
        }
        if reference is not None:
            data["message_reference"] = reference
            data["referenced_message"] = copy.deepcopy(referenced.data) if referenced is not None else None
        channel = self._channels.get(channel_id, {})
        if channel.get("type") in _THREAD_TYPES:
            channel["message_count"] = channel.get("message_count", 0) + 1
            channel["total_message_sent"] = channel.get("total_message_sent", 0) + 1
            data["position"] = channel["total_message_sent"] - 1
        return data

    def _store(
        self,
        data: JSON,
        *,
        guild_id: str | None,
        allowed_mentions: JSON | None,
        interaction_id: str | None = None,
    ) -> _StoredMessage:
        stored = _StoredMessage(
            data=data,
            guild_id=guild_id,
            allowed_mentions=copy.deepcopy(allowed_mentions),
            interaction_id=interaction_id,
        )
        self._messages[stored.id] = stored
        self._channel_messages.setdefault(stored.channel_id, []).append(stored.id)
        channel = self._channels.get(stored.channel_id)
        if channel is not None and not stored.ephemeral:
            channel["last_message_id"] = stored.id
        return stored

    def _resolve_mentions(
        self,
        content: str,
        allowed: JSON | None,
        *,
        default_parse: Sequence[str],
        replied_author: JSON | None,
    ) -> tuple[list[JSON], list[str], bool]:
        """Who a bot message pings: what ``content`` mentions, filtered by ``allowed_mentions``.

        Discord's ``mentions`` / ``mention_roles`` / ``mention_everyone`` list only what was
        allowed. Without ``allowed_mentions`` the default is to parse everything for channel
        messages and only users for interaction responses and webhooks.
        """
        if allowed is None:
            parse, users, roles = set(default_parse), set(), set()
            replied = True
        else:
            parse = set(allowed.get("parse") or [])
            users = {str(u) for u in allowed.get("users") or []}
            roles = {str(r) for r in allowed.get("roles") or []}
            replied = bool(allowed.get("replied_user", False))
        mentioned = [
            self._users[uid]
            for uid in _USER_MENTION.findall(content)
            if uid in self._users and ("users" in parse or uid in users)
        ]
        if replied and replied_author is not None:
            mentioned.append(replied_author)
        mention_roles = [rid for rid in _ROLE_MENTION.findall(content) if "roles" in parse or rid in roles]
        everyone = "everyone" in parse and ("@everyone" in content or "@here" in content)
        return _unique_users(mentioned), list(dict.fromkeys(mention_roles)), everyone

    def _check_message_body(
        self,
        body: JSON,
        *,
        channel_id: str,
        allowed_flags: int,
        creating: bool,
        current: _StoredMessage | None = None,
    ) -> tuple[_StoredMessage | None, JSON | None]:
        """Validate a create/edit message body; returns the referenced message and reference."""
        errors = _FormErrors()
        flags = body.get("flags")
        if flags is None and current is not None:
            flags = current.data.get("flags", 0)
        v2 = bool((flags or 0) & _IS_COMPONENTS_V2)
        if "content" in body and body["content"] is not None:
            errors.string(("content",), body["content"], max_length=_MAX_CONTENT)
        if body.get("embeds") is not None:
            _check_embeds(errors, body["embeds"])
        if body.get("embed") is not None:
            _check_embeds(errors, [body["embed"]])
        if body.get("components") is not None:
            _check_message_components(errors, body["components"], v2=v2)
        if v2 and (body.get("content") or body.get("embeds")):
            # Documented rule; the wording is the stand-in's.
            errors.add(
                ("content",),
                "MESSAGE_CANNOT_USE_LEGACY_FIELDS_WITH_COMPONENTS_V2",
                "The 'content' and 'embeds' fields cannot be used when using MessageFlags.IS_COMPONENTS_V2",
            )
        if flags is not None and (not isinstance(flags, int) or flags & ~allowed_flags):
            errors.add(("flags",), "MESSAGE_FLAGS_INVALID", "Invalid flags")
        _check_allowed_mentions(errors, body.get("allowed_mentions"))
        referenced, reference = None, None
        ref = body.get("message_reference")
        if creating and ref is not None:
            referenced = self._messages.get(str(ref.get("message_id") or ""))
            if referenced is None or referenced.channel_id != channel_id:
                referenced = None
                if ref.get("fail_if_not_exists", True):
                    errors.add(
                        ("message_reference",),
                        "MESSAGE_REFERENCE_UNKNOWN_MESSAGE",
                        "Unknown message",
                    )
            else:
                reference = {
                    "type": ref.get("type", 0),
                    "message_id": referenced.id,
                    "channel_id": referenced.channel_id,
                }
                if referenced.guild_id:
                    reference["guild_id"] = referenced.guild_id
        errors.raise_if_any()
        return referenced, reference

    @staticmethod
    def _is_empty(data: JSON) -> bool:
        return not (
            data.get("content")
            or data.get("embeds")
            or data.get("components")
            or data.get("attachments")
            or data.get("sticker_items")
            or data.get("poll")
        )

    def _new_bot_message(
        self,
        body: JSON,
        files: list[JSON],
        *,
        channel: JSON,
        allowed_flags: int,
        default_parse: Sequence[str],
        interaction: _Interaction | None = None,
        message_type: int | None = None,
        extra_flags: int = 0,
    ) -> _StoredMessage:
        channel_id = str(channel["id"])
        referenced, reference = self._check_message_body(
            body, channel_id=channel_id, allowed_flags=allowed_flags, creating=True
        )
        content = body.get("content") or ""
        allowed = body.get("allowed_mentions")
        mentions, mention_roles, everyone = self._resolve_mentions(
            content,
            allowed,
            default_parse=default_parse,
            replied_author=referenced.data["author"] if referenced else None,
        )
        embeds = list(body.get("embeds") or ([body["embed"]] if body.get("embed") else []))
        data = self._message_object(
            channel_id=channel_id,
            author=self._bot_user,
            content=content,
            embeds=embeds,
            components=list(body.get("components") or []),
            flags=(body.get("flags") or 0) | extra_flags,
            mentions=mentions,
            mention_roles=mention_roles,
            mention_everyone=everyone,
            reference=reference,
            referenced=referenced,
            message_type=message_type,
        )
        data["tts"] = bool(body.get("tts", False))
        if body.get("nonce") is not None:
            data["nonce"] = body["nonce"]
        data["attachments"] = self._attachments(body, files)
        if interaction is not None:
            data["webhook_id"] = self.application_id
            data["application_id"] = self.application_id
            data["interaction_metadata"] = self._interaction_metadata(interaction)
        if self._is_empty(data) and not data["flags"] & _LOADING:
            raise _ApiError(400, 50006, "Cannot send an empty message")
        return self._store(
            data,
            guild_id=channel.get("guild_id"),
            allowed_mentions=allowed,
            interaction_id=interaction.id if interaction else None,
        )

    def _attachments(self, body: JSON, files: list[JSON]) -> list[JSON]:
        described = {str(a.get("id")): a for a in body.get("attachments") or []}
        result = []
        for index, file in enumerate(files):
            meta = described.get(str(index), {})
            attachment_id = self._snowflake()
            result.append(
                {
                    "id": attachment_id,
                    "filename": meta.get("filename") or file["filename"],
                    "size": file["size"],
                    "url": f"http://{self._require_origin()}/attachments/{attachment_id}",
                    "proxy_url": f"http://{self._require_origin()}/attachments/{attachment_id}",
                    "content_type": file.get("content_type"),
                    **({"description": meta["description"]} if meta.get("description") else {}),
                }
            )
        return result

    def _apply_edit(self, stored: _StoredMessage, body: JSON, files: list[JSON], allowed_flags: int) -> None:
        self._check_message_body(
            body,
            channel_id=stored.channel_id,
            allowed_flags=allowed_flags | (stored.data.get("flags", 0) & (_EPHEMERAL | _LOADING)),
            creating=False,
            current=stored,
        )
        data = copy.deepcopy(stored.data)
        if "content" in body:
            data["content"] = body["content"] or ""
        if "embeds" in body:
            data["embeds"] = [{"type": "rich", **e} for e in body["embeds"] or []]
        if body.get("embed") is not None:
            data["embeds"] = [{"type": "rich", **body["embed"]}]
        if "components" in body:
            data["components"] = _number_components(list(body["components"] or []))
        if body.get("flags") is not None:
            keep = data.get("flags", 0) & (_EPHEMERAL | _LOADING)
            data["flags"] = body["flags"] | keep
        if "attachments" in body or files:
            kept_ids = {str(a.get("id")) for a in body.get("attachments") or []}
            kept = [a for a in data.get("attachments", []) if str(a["id"]) in kept_ids]
            data["attachments"] = kept + self._attachments(body, files)
        if "allowed_mentions" in body:
            stored.allowed_mentions = copy.deepcopy(body["allowed_mentions"])
        if "content" in body or "allowed_mentions" in body:
            mentions, mention_roles, everyone = self._resolve_mentions(
                data["content"],
                stored.allowed_mentions,
                default_parse=_MENTION_PARSE if stored.interaction_id is None else ("users",),
                replied_author=None,
            )
            data["mentions"], data["mention_roles"] = mentions, mention_roles
            data["mention_everyone"] = everyone
        data["flags"] = data.get("flags", 0) & ~_LOADING
        if self._is_empty(data):
            raise _ApiError(400, 50006, "Cannot send an empty message")
        data["edited_timestamp"] = _now_iso()
        stored.data = data

    # ------------------------------------------------------------------------- gateway shapes

    def _gateway_message(self, stored: _StoredMessage, *, full: bool) -> JSON:
        """A message as MESSAGE_CREATE / MESSAGE_UPDATE carries it.

        Adds ``guild_id``, the author's partial ``member`` and each mention's ``member``; unless
        ``full``, clears content fields the way Discord does for apps without MESSAGE_CONTENT.
        """
        data = copy.deepcopy(stored.data)
        guild = self._guilds.get(stored.guild_id or "")
        if guild is not None:
            data["guild_id"] = guild.id
            member = guild.members.get(str(data["author"]["id"]))
            if member is not None and not data.get("webhook_id"):
                data["member"] = {k: v for k, v in copy.deepcopy(member).items() if k != "user"}
            for mention in data["mentions"]:
                mention_member = guild.members.get(str(mention["id"]))
                if mention_member is not None:
                    mention["member"] = {k: v for k, v in copy.deepcopy(mention_member).items() if k != "user"}
        if not full:
            data["content"] = ""
            data["embeds"] = []
            data["attachments"] = []
            data["components"] = []
            data.pop("poll", None)
        return data

    def _sees_content(self, session: _Session, stored: _StoredMessage) -> bool:
        if session.intents & Intent.MESSAGE_CONTENT:
            return True
        if stored.guild_id is None:
            return True
        if str(stored.data["author"]["id"]) == self.bot_user_id:
            return True
        if stored.interaction_id is not None:
            return True
        return any(str(m["id"]) == self.bot_user_id for m in stored.data.get("mentions", []))

    async def _dispatch_message(self, event: str, stored: _StoredMessage) -> None:
        if stored.ephemeral:
            return
        needed = Intent.GUILD_MESSAGES if stored.guild_id else Intent.DIRECT_MESSAGES

        def build(session: _Session) -> JSON | None:
            if not session.intents & needed:
                return None
            return self._gateway_message(stored, full=self._sees_content(session, stored))

        await self._dispatch(event, build, guild_id=stored.guild_id)

    def _guild_create(self, guild: _Guild, session: _Session) -> JSON:
        members = list(guild.members.values())
        if not session.intents & Intent.GUILD_MEMBERS:
            # Without GUILD_MEMBERS, GUILD_CREATE lists only the bot itself.
            members = [m for m in members if str(m["user"]["id"]) == self.bot_user_id]
        threads = [
            self._channels[t]
            for t in guild.thread_ids
            if not self._channels[t].get("thread_metadata", {}).get("archived")
        ]
        channels = [{k: v for k, v in self._channels[c].items() if k != "guild_id"} for c in guild.channel_ids]
        return copy.deepcopy(
            {
                **guild.data,
                "roles": list(guild.roles.values()),
                "joined_at": _now_iso(),
                "large": len(guild.members) > 250,
                "unavailable": False,
                "member_count": len(guild.members),
                "voice_states": [],
                "members": members,
                "channels": channels,
                "threads": threads,
                "presences": [],
                "stage_instances": [],
                "guild_scheduled_events": [],
                "soundboard_sounds": [],
            }
        )

    def _interaction_metadata(self, interaction: _Interaction) -> JSON:
        metadata: JSON = {
            "id": interaction.id,
            "type": interaction.type,
            "user": copy.deepcopy(self._users[interaction.user_id]),
            "authorizing_integration_owners": interaction.payload["authorizing_integration_owners"],
        }
        if interaction.type == _MESSAGE_COMPONENT and interaction.source_message_id:
            metadata["interacted_message_id"] = interaction.source_message_id
        if interaction.type == _APPLICATION_COMMAND:
            metadata["name"] = interaction.payload["data"]["name"]
        return metadata

    async def _interact(
        self,
        *,
        kind: int,
        data: JSON,
        user: UserRef,
        channel: JSON,
        member_roles: Iterable[Snowflake] | None,
        permissions: int | str | None,
        locale: str,
        message: _StoredMessage | None,
    ) -> DispatchedInteraction:
        """Build an INTERACTION_CREATE payload as Discord does, remember it, and dispatch it."""
        person = self._user(user)
        user_id = str(person["id"])
        guild = self._guilds.get(channel.get("guild_id") or "")
        interaction_id = self._snowflake()
        token = f"aW50ZXJhY3Rpb246{interaction_id}{secrets.token_urlsafe(96)}"
        payload: JSON = {
            "id": interaction_id,
            "application_id": self.application_id,
            "type": kind,
            "data": data,
            "channel_id": str(channel["id"]),
            "token": token,
            "version": 1,
            "locale": locale,
            "entitlements": [],
            "attachment_size_limit": _ATTACHMENT_SIZE_LIMIT,
            "app_permissions": str(self._bot_permissions(channel)),
        }
        if guild is not None:
            registered = guild.members.get(user_id)
            if registered is None:
                raise ValueError(f"user {user_id} is not a member of guild {guild.id}")
            roles = list(registered["roles"]) if member_roles is None else [_sid(r) for r in member_roles]
            perms = self._permissions(guild, user_id, roles, channel) if permissions is None else int(permissions)
            member = copy.deepcopy(registered)
            member["roles"] = roles
            member["permissions"] = str(perms)
            member["user"] = copy.deepcopy(person)
            payload["guild_id"] = guild.id
            payload["guild"] = {
                "id": guild.id,
                "locale": guild.data["preferred_locale"],
                "features": list(guild.data["features"]),
            }
            payload["guild_locale"] = guild.data["preferred_locale"]
            payload["member"] = member
            payload["context"] = 0
            payload["authorizing_integration_owners"] = {"0": guild.id}
            payload["channel"] = {**copy.deepcopy(channel), "permissions": str(perms)}
        else:
            payload["user"] = copy.deepcopy(person)
            payload["context"] = 1
            payload["authorizing_integration_owners"] = {"0": "0"}
            payload["channel"] = copy.deepcopy(channel)
        if message is not None:
            payload["message"] = copy.deepcopy(message.data)
        if not any(c.ready for c in self._connections):
            raise RuntimeError("no client is connected to the gateway to receive the interaction")
        interaction = _Interaction(
            id=interaction_id,
            token=token,
            type=kind,
            payload=payload,
            created=time.monotonic(),
            channel_id=str(channel["id"]),
            guild_id=guild.id if guild else None,
            user_id=user_id,
            source_message_id=message.id if message is not None else None,
        )
        self._interactions[interaction_id] = interaction
        self._interactions_by_token[token] = interaction
        await self._dispatch(
            "INTERACTION_CREATE", lambda _s: copy.deepcopy(payload), guild_id=guild.id if guild else None
        )
        return DispatchedInteraction(id=interaction_id, token=token, payload=copy.deepcopy(payload))

    # ------------------------------------------------------------------------- REST plumbing

    def _install_routes(self) -> None:
        channel = r"/channels/(?P<channel_id>\d+)"
        message = channel + r"/messages/(?P<message_id>\d+)"
        webhook = r"/webhooks/(?P<application_id>\d+)/(?P<token>[^/]+)"
        commands = r"/applications/(?P<application_id>\d+)(?:/guilds/(?P<guild_id>\d+))?/commands"
        table: list[tuple[str, str, _Handler, bool]] = [
            ("GET", r"/gateway", self._get_gateway, False),
            ("GET", r"/gateway/bot", self._get_gateway_bot, True),
            ("GET", r"/users/@me", self._get_me, True),
            ("GET", r"/users/(?P<user_id>\d+)", self._get_user, True),
            ("POST", r"/users/@me/channels", self._create_dm, True),
            ("GET", r"/oauth2/applications/@me", self._get_application, True),
            ("GET", r"/applications/@me", self._get_application, True),
            ("GET", channel, self._get_channel, True),
            ("GET", channel + r"/messages", self._list_messages, True),
            ("POST", channel + r"/messages", self._create_message, True),
            ("GET", message, self._get_message, True),
            ("PATCH", message, self._edit_message, True),
            ("DELETE", message, self._delete_message, True),
            ("PUT", message + r"/reactions/(?P<emoji>[^/]+)/@me", self._add_reaction, True),
            ("DELETE", message + r"/reactions/(?P<emoji>[^/]+)/@me", self._remove_reaction, True),
            ("POST", message + r"/threads", self._start_thread_from_message, True),
            ("POST", channel + r"/threads", self._start_thread, True),
            ("PUT", channel + r"/thread-members/@me", self._join_thread, True),
            ("POST", channel + r"/typing", self._trigger_typing, True),
            ("GET", r"/guilds/(?P<guild_id>\d+)", self._get_guild, True),
            ("GET", r"/guilds/(?P<guild_id>\d+)/channels", self._get_guild_channels, True),
            ("GET", r"/guilds/(?P<guild_id>\d+)/roles", self._get_guild_roles, True),
            ("GET", r"/guilds/(?P<guild_id>\d+)/threads/active", self._get_active_threads, True),
            ("GET", r"/guilds/(?P<guild_id>\d+)/members/(?P<user_id>\d+)", self._get_member, True),
            (
                "POST",
                r"/interactions/(?P<interaction_id>\d+)/(?P<token>[^/]+)/callback",
                self._interaction_callback,
                False,
            ),
            ("POST", webhook, self._execute_followup, False),
            (
                "GET",
                webhook + r"/messages/(?P<message_id>@original|\d+)",
                self._get_webhook_message,
                False,
            ),
            (
                "PATCH",
                webhook + r"/messages/(?P<message_id>@original|\d+)",
                self._edit_webhook_message,
                False,
            ),
            (
                "DELETE",
                webhook + r"/messages/(?P<message_id>@original|\d+)",
                self._delete_webhook_message,
                False,
            ),
            ("GET", commands, self._list_commands, True),
            ("PUT", commands, self._overwrite_commands, True),
            ("POST", commands, self._create_command, True),
            ("GET", commands + r"/(?P<command_id>\d+)", self._get_command, True),
            ("PATCH", commands + r"/(?P<command_id>\d+)", self._edit_command, True),
            ("DELETE", commands + r"/(?P<command_id>\d+)", self._delete_command, True),
        ]
        self._routes = [(m, re.compile(p), h, auth) for m, p, h, auth in table]

    async def _handle_elsewhere(self, request: web.Request) -> web.Response:
        return self._json_response(404, {"message": "404: Not Found", "code": 0})

    @staticmethod
    def _json_response(status: int, body: Any, headers: Mapping[str, str] | None = None) -> web.Response:
        # Discord's replies pass Google's load balancer; discord.py reads a 429 without ``Via``
        # as a Cloudflare ban.
        all_headers = {"Via": "1.1 google", **(headers or {})}
        if status == 204 or body is None:
            return web.Response(status=status if status != 200 else 204, headers=all_headers)
        # Exactly ``application/json``, no charset: discord.py only decodes JSON when the
        # Content-Type header equals that string, as Discord sends it.
        all_headers["Content-Type"] = "application/json"
        return web.Response(
            body=json.dumps(body, separators=(",", ":")).encode(),
            status=status,
            headers=all_headers,
        )

    async def _read_body(self, request: web.Request) -> tuple[Any, list[JSON]]:
        if not request.can_read_body:
            return None, []
        if request.content_type == "multipart/form-data":
            form = await request.post()
            payload: Any = None
            files: list[JSON] = []
            for name, value in form.items():
                if name == "payload_json":
                    raw = value.file.read() if isinstance(value, web.FileField) else value
                    payload = json.loads(raw)
                elif isinstance(value, web.FileField):
                    files.append(
                        {
                            "field": name,
                            "filename": value.filename,
                            "content_type": value.content_type,
                            "size": len(value.file.read()),
                        }
                    )
            return payload, files
        text = await request.text()
        if not text:
            return None, []
        try:
            return json.loads(text), []
        except ValueError:
            raise _ApiError(400, 50109, "The request body contains invalid JSON.") from None

    async def _handle_rest(self, request: web.Request) -> web.Response:
        path = "/" + request.match_info["tail"]
        method = request.method.upper()
        query = dict(request.query)
        headers = {k: v for k, v in request.headers.items() if k.lower() != "authorization"}
        body: Any = None
        status: int
        payload: Any
        extra_headers: dict[str, str] = {}
        try:
            body, files = await self._read_body(request)
            handler, params, needs_auth = self._route(method, path)
            if needs_auth and request.headers.get("Authorization") != f"Bot {self.bot_token}":
                raise _ApiError(401, 0, "401: Unauthorized")
            self._apply_faults(method, path)
            status, payload = await handler(
                _Request(method=method, path=path, params=params, query=query, json=body, files=files)
            )
        except _ApiError as error:
            status, payload, extra_headers = error.status, error.body, error.headers
        except Exception as error:
            # A bug in the stand-in, not a Discord answer. 501 makes discord.py raise at once
            # (it retries 500/502/504 for several seconds), with the reason in the message.
            log.exception("Discord stand-in failed on %s %s", method, path)
            status, payload = 501, {"message": f"stand-in error: {error!r}", "code": 0}
        self._requests.append(
            RecordedRequest(
                method=method,
                path=path,
                query=query,
                json=copy.deepcopy(body),
                headers=headers,
                status=status,
                response=copy.deepcopy(payload),
                at=time.time(),
            )
        )
        await self._notify()
        return self._json_response(status, payload, extra_headers)

    def _route(self, method: str, path: str) -> tuple[_Handler, dict[str, str], bool]:
        path_matched = False
        for route_method, pattern, handler, needs_auth in self._routes:
            match = pattern.fullmatch(path)
            if match is None:
                continue
            path_matched = True
            if route_method == method:
                params = {k: v for k, v in match.groupdict().items() if v is not None}
                return handler, params, needs_auth
        if path_matched:
            raise _ApiError(405, 0, "405: Method Not Allowed")
        raise _ApiError(404, 0, "404: Not Found")

    def _apply_faults(self, method: str, path: str) -> None:
        for fault in self._faults:
            if fault.remaining > 0 and fault.method == method and fault.path.fullmatch(path):
                fault.remaining -= 1
                raise _ApiError(fault.status, 0, "fault", headers=fault.headers, body=copy.deepcopy(fault.body))

    # ------------------------------------------------------------------------- REST: misc

    async def _get_gateway(self, req: _Request) -> tuple[int, Any]:
        return 200, {"url": self.gateway_url}

    async def _get_gateway_bot(self, req: _Request) -> tuple[int, Any]:
        return 200, {
            "url": self.gateway_url,
            "shards": self.recommended_shards,
            "session_start_limit": {
                "total": 1000,
                "remaining": self._session_starts_remaining,
                "reset_after": 86_400_000,
                "max_concurrency": self.max_concurrency,
            },
        }

    async def _get_me(self, req: _Request) -> tuple[int, Any]:
        return 200, {
            **copy.deepcopy(self._bot_user),
            "verified": True,
            "mfa_enabled": False,
            "email": None,
            "locale": "en-US",
            "premium_type": 0,
        }

    async def _get_user(self, req: _Request) -> tuple[int, Any]:
        user = self._users.get(req.params["user_id"])
        if user is None:
            raise _unknown(10013, "User")
        return 200, copy.deepcopy(user)

    async def _create_dm(self, req: _Request) -> tuple[int, Any]:
        recipient = str((req.json or {}).get("recipient_id", ""))
        user = self._users.get(recipient)
        if user is None:
            raise _unknown(10013, "User")
        return 200, copy.deepcopy(self._channels[self._dm_channel_for(user)])

    def _application_flags(self) -> int:
        flags = 1 << 23  # APPLICATION_COMMAND_BADGE
        for intent, flag in _APP_FLAG_FOR_INTENT.items():
            if self.approved_intents & intent:
                flags |= flag
        return flags

    async def _get_application(self, req: _Request) -> tuple[int, Any]:
        return 200, {
            "id": self.application_id,
            "name": self._bot_user["username"],
            "icon": None,
            "description": "",
            "summary": "",
            "type": None,
            "hook": True,
            "bot_public": False,
            "bot_require_code_grant": False,
            "verify_key": "0" * 64,
            "flags": self._application_flags(),
            "owner": copy.deepcopy(self._owner),
            "team": None,
            "rpc_origins": [],
            "bot": copy.deepcopy(self._bot_user),
            "approximate_guild_count": len(self._guilds),
            "approximate_user_install_count": 0,
            "interactions_endpoint_url": None,
            "role_connections_verification_url": None,
            "event_webhooks_url": None,
            "event_webhooks_status": 1,
            "redirect_uris": [],
            "tags": [],
            "integration_types_config": {"0": {}},
            "is_monetized": False,
            "explicit_content_filter": 0,
        }

    # ------------------------------------------------------------------------- REST: channels

    def _channel_or_404(self, channel_id: str) -> JSON:
        channel = self._channels.get(channel_id)
        if channel is None:
            raise _unknown(10003, "Channel")
        if channel["type"] not in _DM_TYPES and not self._bot_permissions(channel) & Permission.VIEW_CHANNEL:
            raise _ApiError(403, 50001, "Missing Access")
        return channel

    def _message_or_404(self, channel_id: str, message_id: str) -> _StoredMessage:
        self._channel_or_404(channel_id)
        stored = self._messages.get(message_id)
        if stored is None or stored.channel_id != channel_id or stored.ephemeral:
            raise _unknown(10008, "Message")
        return stored

    def _rest_message(self, stored: _StoredMessage) -> JSON:
        data = copy.deepcopy(stored.data)
        if not self.approved_intents & Intent.MESSAGE_CONTENT:
            # Without the approved intent REST reads are emptied like gateway events.
            pseudo = _Session(id="", intents=0, shard=None)
            if not self._sees_content(pseudo, stored):
                data = self._gateway_message(stored, full=False)
                data.pop("guild_id", None)
                data.pop("member", None)
        return data

    async def _get_channel(self, req: _Request) -> tuple[int, Any]:
        return 200, copy.deepcopy(self._channel_or_404(req.params["channel_id"]))

    async def _list_messages(self, req: _Request) -> tuple[int, Any]:
        channel_id = req.params["channel_id"]
        self._channel_or_404(channel_id)
        limit = max(1, min(100, int(req.query.get("limit", "50"))))
        ids = [
            m
            for m in self._channel_messages.get(channel_id, [])
            if m in self._messages and not self._messages[m].ephemeral
        ]
        if "before" in req.query:
            ids = [m for m in ids if int(m) < int(req.query["before"])]
        if "after" in req.query:
            ids = [m for m in ids if int(m) > int(req.query["after"])][:limit]
        newest_first = list(reversed(ids))[:limit]
        return 200, [self._rest_message(self._messages[m]) for m in newest_first]

    async def _create_message(self, req: _Request) -> tuple[int, Any]:
        channel = self._channel_or_404(req.params["channel_id"])
        self._require_send(channel)
        stored = self._new_bot_message(
            req.json or {},
            req.files,
            channel=channel,
            allowed_flags=_CHANNEL_MESSAGE_FLAGS,
            default_parse=_MENTION_PARSE,
        )
        await self._dispatch_message("MESSAGE_CREATE", stored)
        return 200, self._rest_message(stored)

    async def _get_message(self, req: _Request) -> tuple[int, Any]:
        stored = self._message_or_404(req.params["channel_id"], req.params["message_id"])
        return 200, self._rest_message(stored)

    async def _edit_message(self, req: _Request) -> tuple[int, Any]:
        stored = self._message_or_404(req.params["channel_id"], req.params["message_id"])
        if str(stored.data["author"]["id"]) != self.bot_user_id or stored.interaction_id:
            raise _ApiError(403, 50005, "Cannot edit a message authored by another user")
        self._apply_edit(stored, req.json or {}, req.files, _CHANNEL_MESSAGE_FLAGS)
        await self._dispatch_message("MESSAGE_UPDATE", stored)
        return 200, self._rest_message(stored)

    async def _delete_message(self, req: _Request) -> tuple[int, Any]:
        stored = self._message_or_404(req.params["channel_id"], req.params["message_id"])
        await self._delete(stored)
        return 204, None

    async def _delete(self, stored: _StoredMessage) -> None:
        self._messages.pop(stored.id, None)
        if stored.ephemeral:
            return
        payload: JSON = {"id": stored.id, "channel_id": stored.channel_id}
        if stored.guild_id:
            payload["guild_id"] = stored.guild_id
        needed = Intent.GUILD_MESSAGES if stored.guild_id else Intent.DIRECT_MESSAGES
        await self._dispatch(
            "MESSAGE_DELETE", lambda s: dict(payload) if s.intents & needed else None, guild_id=stored.guild_id
        )

    async def _add_reaction(self, req: _Request) -> tuple[int, Any]:
        stored = self._message_or_404(req.params["channel_id"], req.params["message_id"])
        name = req.params["emoji"]
        reactions = stored.data.setdefault("reactions", [])
        for reaction in reactions:
            if reaction["emoji"]["name"] == name:
                if not reaction["me"]:
                    reaction["me"] = True
                    reaction["count"] += 1
                break
        else:
            reactions.append(
                {
                    "count": 1,
                    "count_details": {"burst": 0, "normal": 1},
                    "me": True,
                    "me_burst": False,
                    "burst_colors": [],
                    "emoji": {"id": None, "name": name},
                }
            )
        return 204, None

    async def _remove_reaction(self, req: _Request) -> tuple[int, Any]:
        stored = self._message_or_404(req.params["channel_id"], req.params["message_id"])
        name = req.params["emoji"]
        reactions = stored.data.get("reactions", [])
        for reaction in list(reactions):
            if reaction["emoji"]["name"] == name and reaction["me"]:
                reaction["me"] = False
                reaction["count"] -= 1
                if reaction["count"] == 0:
                    reactions.remove(reaction)
        return 204, None

    async def _trigger_typing(self, req: _Request) -> tuple[int, Any]:
        channel = self._channel_or_404(req.params["channel_id"])
        self._require_send(channel)
        self._typing[str(channel["id"])] += 1
        return 204, None

    async def _new_thread(self, parent: JSON, body: JSON, thread_id: str, *, private: bool) -> JSON:
        errors = _FormErrors()
        errors.string(("name",), body.get("name"), min_length=1, max_length=100, required=True)
        errors.raise_if_any()
        guild = self._guilds[parent["guild_id"]]
        thread = make_thread(thread_id, parent["id"], body["name"], owner_id=self.bot_user_id, private=private)
        thread["thread_metadata"]["auto_archive_duration"] = body.get("auto_archive_duration", 1440)
        thread["member"] = {
            "id": thread_id,
            "user_id": self.bot_user_id,
            "join_timestamp": _now_iso(),
            "flags": 0,
        }
        stored = self._register_channel(guild, thread)
        await self._dispatch(
            "THREAD_CREATE",
            lambda s: {**copy.deepcopy(stored), "newly_created": True} if s.intents & Intent.GUILDS else None,
            guild_id=guild.id,
        )
        return stored

    async def _start_thread_from_message(self, req: _Request) -> tuple[int, Any]:
        stored = self._message_or_404(req.params["channel_id"], req.params["message_id"])
        parent = self._channels[stored.channel_id]
        if parent["type"] in _THREAD_TYPES or parent["type"] in _DM_TYPES:
            raise _ApiError(400, 50024, "Cannot execute action on this channel type")
        if stored.id in self._channels:
            raise _ApiError(400, 160004, "A thread has already been created for this message")
        thread = await self._new_thread(parent, req.json or {}, stored.id, private=False)
        stored.data["thread"] = copy.deepcopy(thread)
        return 201, copy.deepcopy(thread)

    async def _start_thread(self, req: _Request) -> tuple[int, Any]:
        parent = self._channel_or_404(req.params["channel_id"])
        body = req.json or {}
        if parent["type"] in _THREAD_TYPES or parent["type"] in _DM_TYPES:
            raise _ApiError(400, 50024, "Cannot execute action on this channel type")
        thread_id = self._snowflake()
        if parent["type"] == ChannelType.GUILD_FORUM:
            starter = body.get("message") or {}
            self._check_message_body(
                starter, channel_id=thread_id, allowed_flags=_CHANNEL_MESSAGE_FLAGS, creating=False
            )
            thread = await self._new_thread(parent, body, thread_id, private=False)
            data = self._message_object(
                channel_id=thread_id,
                author=self._bot_user,
                content=starter.get("content") or "",
                embeds=list(starter.get("embeds") or []),
                components=list(starter.get("components") or []),
                flags=starter.get("flags") or 0,
                mentions=[],
                mention_roles=[],
                mention_everyone=False,
                message_id=thread_id,
            )
            message = self._store(data, guild_id=parent["guild_id"], allowed_mentions=starter.get("allowed_mentions"))
            await self._dispatch_message("MESSAGE_CREATE", message)
            return 201, {**copy.deepcopy(thread), "message": self._rest_message(message)}
        private = body.get("type", int(ChannelType.PRIVATE_THREAD)) == ChannelType.PRIVATE_THREAD
        thread = await self._new_thread(parent, body, thread_id, private=private)
        return 201, copy.deepcopy(thread)

    async def _join_thread(self, req: _Request) -> tuple[int, Any]:
        channel = self._channel_or_404(req.params["channel_id"])
        if channel["type"] not in _THREAD_TYPES:
            raise _ApiError(400, 50024, "Cannot execute action on this channel type")
        return 204, None

    # ------------------------------------------------------------------------- REST: guilds

    def _guild_or_404(self, guild_id: str) -> _Guild:
        guild = self._guilds.get(guild_id)
        if guild is None:
            raise _unknown(10004, "Guild")
        return guild

    async def _get_guild(self, req: _Request) -> tuple[int, Any]:
        guild = self._guild_or_404(req.params["guild_id"])
        data = {**copy.deepcopy(guild.data), "roles": copy.deepcopy(list(guild.roles.values()))}
        if req.query.get("with_counts") in ("true", "1"):
            data["approximate_member_count"] = len(guild.members)
            data["approximate_presence_count"] = 0
        return 200, data

    async def _get_guild_channels(self, req: _Request) -> tuple[int, Any]:
        guild = self._guild_or_404(req.params["guild_id"])
        return 200, [copy.deepcopy(self._channels[c]) for c in guild.channel_ids]

    async def _get_guild_roles(self, req: _Request) -> tuple[int, Any]:
        guild = self._guild_or_404(req.params["guild_id"])
        return 200, copy.deepcopy(list(guild.roles.values()))

    async def _get_active_threads(self, req: _Request) -> tuple[int, Any]:
        guild = self._guild_or_404(req.params["guild_id"])
        threads = [
            copy.deepcopy(self._channels[t])
            for t in guild.thread_ids
            if not self._channels[t]["thread_metadata"].get("archived")
        ]
        return 200, {"threads": threads, "members": []}

    async def _get_member(self, req: _Request) -> tuple[int, Any]:
        guild = self._guild_or_404(req.params["guild_id"])
        member = guild.members.get(req.params["user_id"])
        if member is None:
            raise _unknown(10007, "Member")
        return 200, copy.deepcopy(member)

    # ------------------------------------------------------------------------- REST: interactions

    def _interaction_for_callback(self, req: _Request) -> _Interaction:
        interaction = self._interactions.get(req.params["interaction_id"])
        if interaction is None or interaction.token != req.params["token"]:
            raise _unknown(10062, "interaction")
        if interaction.response_type is not None:
            raise _ApiError(400, 40060, "Interaction has already been acknowledged.")
        if time.monotonic() - interaction.created > self.interaction_response_timeout:
            raise _unknown(10062, "interaction")
        return interaction

    def _callback_result(self, interaction: _Interaction, kind: int, message: _StoredMessage | None) -> JSON:
        result: JSON = {
            "interaction": {
                "id": interaction.id,
                "type": interaction.type,
                "response_message_loading": interaction.loading,
                "response_message_ephemeral": bool(message and message.ephemeral),
            }
        }
        if message is not None:
            result["interaction"]["response_message_id"] = message.id
            result["resource"] = {"type": kind, "message": self._rest_message(message)}
        return result

    async def _interaction_callback(self, req: _Request) -> tuple[int, Any]:
        interaction = self._interaction_for_callback(req)
        body = req.json or {}
        kind = body.get("type")
        data = body.get("data") or {}
        if kind not in _KNOWN_CALLBACK_TYPES:
            errors = _FormErrors()
            errors.add(
                ("type",),
                "BASE_TYPE_CHOICES",
                "Value must be one of {1, 4, 5, 6, 7, 8, 9, 10, 12}.",
            )
            errors.raise_if_any()
        allowed = set(_CALLBACKS_ALLOWED.get(interaction.type, set()))
        if interaction.source_message_id is None:
            allowed -= {_DEFERRED_UPDATE_MESSAGE, _UPDATE_MESSAGE}
        if kind not in allowed:
            # Discord documents which types fit which interaction, not the exact error text.
            raise _ApiError(400, 40043, "Interaction response type is not valid for this interaction")
        channel = self._channels[interaction.channel_id]
        message: _StoredMessage | None = None
        if kind == _CHANNEL_MESSAGE_WITH_SOURCE:
            message = self._new_bot_message(
                data,
                req.files,
                channel=channel,
                allowed_flags=_INTERACTION_MESSAGE_FLAGS,
                default_parse=("users",),
                interaction=interaction,
                message_type=self._response_message_type(interaction),
            )
            interaction.original_message_id = message.id
        elif kind == _DEFERRED_CHANNEL_MESSAGE_WITH_SOURCE:
            flags = data.get("flags") or 0
            if flags & ~_EPHEMERAL:
                errors = _FormErrors()
                errors.add(("data", "flags"), "MESSAGE_FLAGS_INVALID", "Invalid flags")
                errors.raise_if_any()
            data_obj = self._message_object(
                channel_id=interaction.channel_id,
                author=self._bot_user,
                content="",
                embeds=[],
                components=[],
                flags=_LOADING | (flags & _EPHEMERAL),
                mentions=[],
                mention_roles=[],
                mention_everyone=False,
                message_type=self._response_message_type(interaction),
            )
            data_obj["webhook_id"] = self.application_id
            data_obj["application_id"] = self.application_id
            data_obj["interaction_metadata"] = self._interaction_metadata(interaction)
            message = self._store(
                data_obj,
                guild_id=interaction.guild_id,
                allowed_mentions=None,
                interaction_id=interaction.id,
            )
            interaction.original_message_id = message.id
            interaction.loading = True
        elif kind == _DEFERRED_UPDATE_MESSAGE:
            interaction.original_message_id = interaction.source_message_id
        elif kind == _UPDATE_MESSAGE:
            source = self._messages.get(interaction.source_message_id or "")
            if source is None:
                raise _unknown(10008, "Message")
            self._apply_edit(source, data, req.files, _INTERACTION_MESSAGE_FLAGS)
            interaction.original_message_id = source.id
            message = source
        elif kind == _AUTOCOMPLETE_RESULT:
            errors = _FormErrors()
            errors.array(("data", "choices"), data.get("choices") or [], max_length=25)
            errors.raise_if_any()
        elif kind == _MODAL:
            errors = _FormErrors()
            _check_modal(errors, body.get("data"))
            errors.raise_if_any()
            interaction.modal = copy.deepcopy(data)
        interaction.response_type = kind
        if message is not None and kind in (
            _CHANNEL_MESSAGE_WITH_SOURCE,
            _DEFERRED_CHANNEL_MESSAGE_WITH_SOURCE,
        ):
            await self._dispatch_message("MESSAGE_CREATE", message)
        elif message is not None and kind == _UPDATE_MESSAGE:
            await self._dispatch_message("MESSAGE_UPDATE", message)
        if req.query.get("with_response") not in ("1", "true", "True"):
            return 204, None
        return 200, self._callback_result(interaction, kind, message if kind != _DEFERRED_UPDATE_MESSAGE else None)

    @staticmethod
    def _response_message_type(interaction: _Interaction) -> int:
        return _CHAT_INPUT_COMMAND_MESSAGE if interaction.type == _APPLICATION_COMMAND else _DEFAULT_MESSAGE

    def _interaction_for_webhook(self, req: _Request) -> _Interaction:
        interaction = self._interactions_by_token.get(req.params["token"])
        if interaction is None or req.params["application_id"] != self.application_id:
            raise _unknown(10015, "Webhook")
        if interaction.response_type is None:
            # Followups and @original only exist once the interaction was answered.
            raise _unknown(10015, "Webhook")
        if time.monotonic() - interaction.created > self.interaction_token_ttl:
            raise _ApiError(401, 50027, "Invalid Webhook Token")
        return interaction

    async def _execute_followup(self, req: _Request) -> tuple[int, Any]:
        interaction = self._interaction_for_webhook(req)
        body = req.json or {}
        channel = self._channels[interaction.channel_id]
        if interaction.loading and interaction.original_message_id in self._messages:
            # The first followup after a "thinking" defer fills in the loading message.
            original = self._messages[interaction.original_message_id]
            edit = dict(body)
            edit.pop("flags", None)
            self._apply_edit(original, edit, req.files, _INTERACTION_MESSAGE_FLAGS)
            original.data["edited_timestamp"] = None
            interaction.loading = False
            interaction.followup_ids.append(original.id)
            await self._dispatch_message("MESSAGE_UPDATE", original)
            message = original
        else:
            message = self._new_bot_message(
                body,
                req.files,
                channel=channel,
                allowed_flags=_INTERACTION_MESSAGE_FLAGS,
                default_parse=("users",),
                interaction=interaction,
                message_type=self._response_message_type(interaction),
            )
            interaction.followup_ids.append(message.id)
            await self._dispatch_message("MESSAGE_CREATE", message)
        if req.query.get("wait") not in ("1", "true", "True"):
            return 204, None
        return 200, self._rest_message(message)

    def _webhook_message(self, interaction: _Interaction, message_id: str) -> _StoredMessage:
        if message_id == "@original":
            if interaction.original_message_id is None:
                raise _unknown(10008, "Message")
            message_id = interaction.original_message_id
        elif message_id not in interaction.followup_ids:
            raise _unknown(10008, "Message")
        stored = self._messages.get(message_id)
        if stored is None:
            raise _unknown(10008, "Message")
        return stored

    async def _get_webhook_message(self, req: _Request) -> tuple[int, Any]:
        interaction = self._interaction_for_webhook(req)
        stored = self._webhook_message(interaction, req.params["message_id"])
        return 200, self._rest_message(stored)

    async def _edit_webhook_message(self, req: _Request) -> tuple[int, Any]:
        interaction = self._interaction_for_webhook(req)
        stored = self._webhook_message(interaction, req.params["message_id"])
        self._apply_edit(stored, req.json or {}, req.files, _INTERACTION_MESSAGE_FLAGS)
        if stored.id == interaction.original_message_id:
            interaction.loading = False
        await self._dispatch_message("MESSAGE_UPDATE", stored)
        return 200, self._rest_message(stored)

    async def _delete_webhook_message(self, req: _Request) -> tuple[int, Any]:
        interaction = self._interaction_for_webhook(req)
        stored = self._webhook_message(interaction, req.params["message_id"])
        await self._delete(stored)
        return 204, None

    # ------------------------------------------------------------------------- REST: commands

    def _command_scope(self, req: _Request) -> str | None:
        if req.params["application_id"] != self.application_id:
            raise _ApiError(403, 50001, "Missing Access")
        guild_id = req.params.get("guild_id")
        if guild_id is not None:
            self._guild_or_404(guild_id)
        return guild_id

    def _command_object(self, body: JSON, guild_id: str | None, existing: JSON | None) -> JSON:
        kind = body.get("type", 1)
        command: JSON = {
            "id": existing["id"] if existing else self._snowflake(),
            "application_id": self.application_id,
            "version": self._snowflake(),
            "type": kind,
            "name": body["name"],
            "name_localizations": body.get("name_localizations"),
            "description": body.get("description", "") if kind == 1 else "",
            "description_localizations": body.get("description_localizations"),
            "default_member_permissions": body.get("default_member_permissions"),
            "nsfw": body.get("nsfw", False),
            "integration_types": body.get("integration_types") or [0],
            "contexts": body.get("contexts"),
        }
        if body.get("options"):
            command["options"] = copy.deepcopy(body["options"])
        if guild_id is not None:
            command["guild_id"] = guild_id
        else:
            command["dm_permission"] = body.get("dm_permission", True)
        return command

    async def _list_commands(self, req: _Request) -> tuple[int, Any]:
        return 200, copy.deepcopy(self._commands.get(self._command_scope(req), []))

    async def _overwrite_commands(self, req: _Request) -> tuple[int, Any]:
        scope = self._command_scope(req)
        body = req.json
        errors = _FormErrors()
        entries = errors.array((), body, max_length=200)
        for i, command in enumerate(entries):
            _check_command(errors, (i,), command)
        names = [(c.get("type", 1), c.get("name")) for c in entries if isinstance(c, dict)]
        if len(set(names)) != len(names):
            errors.add(
                (),
                "APPLICATION_COMMANDS_DUPLICATE_NAME",
                "Application command names must be unique",
            )
        errors.raise_if_any()
        previous = {(c["type"], c["name"]): c for c in self._commands.get(scope, [])}
        self._commands[scope] = [
            self._command_object(c, scope, previous.get((c.get("type", 1), c["name"]))) for c in entries
        ]
        return 200, copy.deepcopy(self._commands[scope])

    async def _create_command(self, req: _Request) -> tuple[int, Any]:
        scope = self._command_scope(req)
        body = req.json or {}
        errors = _FormErrors()
        _check_command(errors, (), body)
        errors.raise_if_any()
        current = self._commands.setdefault(scope, [])
        existing = next(
            (c for c in current if (c["type"], c["name"]) == (body.get("type", 1), body["name"])),
            None,
        )
        command = self._command_object(body, scope, existing)
        if existing is not None:
            current[current.index(existing)] = command
            return 200, copy.deepcopy(command)
        current.append(command)
        return 201, copy.deepcopy(command)

    def _command_or_404(self, req: _Request) -> tuple[list[JSON], JSON]:
        current = self._commands.get(self._command_scope(req), [])
        command = next((c for c in current if c["id"] == req.params["command_id"]), None)
        if command is None:
            raise _unknown(10063, "application command")
        return current, command

    async def _get_command(self, req: _Request) -> tuple[int, Any]:
        _, command = self._command_or_404(req)
        return 200, copy.deepcopy(command)

    async def _edit_command(self, req: _Request) -> tuple[int, Any]:
        current, command = self._command_or_404(req)
        merged = {**command, **(req.json or {})}
        errors = _FormErrors()
        _check_command(errors, (), merged)
        errors.raise_if_any()
        updated = self._command_object(merged, command.get("guild_id"), command)
        current[current.index(command)] = updated
        return 200, copy.deepcopy(updated)

    async def _delete_command(self, req: _Request) -> tuple[int, Any]:
        current, command = self._command_or_404(req)
        current.remove(command)
        return 204, None

    # ------------------------------------------------------------------------- gateway

    def _live_sessions(self) -> list[_Session]:
        return [s for s in self._sessions.values() if not s.invalid]

    async def _send(self, connection: _Connection, payload: JSON) -> None:
        text = json.dumps(payload, separators=(",", ":"))
        async with connection.send_lock:
            if connection.ws.closed:
                return
            try:
                if connection.compress is not None:
                    await connection.ws.send_bytes(connection.compress(text.encode()))
                else:
                    await connection.ws.send_str(text)
            except ConnectionError:
                return

    async def _dispatch(self, event: str, build: Callable[[_Session], JSON | None], *, guild_id: str | None) -> None:
        """Send a dispatch to every live session of the event's shard (buffered for RESUME while disconnected).

        Args:
            event: The dispatch's ``t``.
            build: The ``d`` for a session, or None to send it nothing (intents).
            guild_id: The guild the event belongs to; None for a DM (shard 0 only).
        """
        for session in self._live_sessions():
            if not _on_shard(session.shard, guild_id):
                continue
            data = build(session)
            if data is not None:
                await self._dispatch_to(session, event, data)

    async def _dispatch_to(self, session: _Session, event: str, data: JSON) -> None:
        async with session.lock:
            session.seq += 1
            frame = {"op": _OP_DISPATCH, "t": event, "s": session.seq, "d": data}
            session.buffer.append(frame)
            del session.buffer[:-_EVENT_BUFFER]
            connection = session.connection
            live = connection is not None and connection.ready
            self._dispatch_log.append(
                DispatchedEvent(
                    event=event, session_id=session.id, shard=_shard_of(session.shard), data=data, delivered=live
                )
            )
            if connection is not None and live:
                await self._send(connection, frame)

    async def _handle_gateway(self, request: web.Request) -> web.StreamResponse:
        if self.gateway_down:
            return web.Response(status=503, text="gateway unavailable (stand-in: gateway_down)")
        ws = web.WebSocketResponse(max_msg_size=0)
        await ws.prepare(request)
        record = GatewayConnection(path=request.path, query=dict(request.query))
        self._gateway_log.append(record)
        connection = _Connection(ws=ws, record=record)
        connection.compress = _stream_compressor(request.query.get("compress"))
        self._connections.append(connection)
        try:
            if request.query.get("v", "10") != "10":
                await self._close(connection, _CLOSE_INVALID_API_VERSION, "Invalid API version")
                return ws
            await self._send(
                connection,
                {
                    "op": _OP_HELLO,
                    "d": {"heartbeat_interval": self.heartbeat_interval_ms, "_trace": ["standin"]},
                    "s": None,
                    "t": None,
                },
            )
            async for message in ws:
                if message.type is not WSMsgType.TEXT:
                    await self._close(connection, _CLOSE_DECODE_ERROR, "Error while decoding payload.")
                    break
                try:
                    payload = json.loads(message.data)
                except ValueError:
                    await self._close(connection, _CLOSE_DECODE_ERROR, "Error while decoding payload.")
                    break
                try:
                    await self._on_gateway_message(connection, payload)
                except Exception:
                    log.exception("Discord stand-in failed on gateway payload %s", payload)
                    await self._close(connection, WSCloseCode.INTERNAL_ERROR, "stand-in error")
                    break
        finally:
            connection.ready = False
            record.close_code = ws.close_code
            if connection in self._connections:
                self._connections.remove(connection)
            session = connection.session
            if session is not None and session.connection is connection:
                session.connection = None
                # A client closing with 1000/1001 ends its session (Discord docs, "Resuming").
                if not connection.closed_by_server and ws.close_code in (1000, 1001):
                    session.invalid = True
            await self._notify()
        return ws

    async def _close(self, connection: _Connection, code: int, reason: str) -> None:
        connection.ready = False
        connection.closed_by_server = True
        await connection.ws.close(code=code, message=reason.encode())

    async def _on_gateway_message(self, connection: _Connection, payload: Any) -> None:
        op = payload.get("op") if isinstance(payload, dict) else None
        data = payload.get("d") if isinstance(payload, dict) else None
        if op == _OP_HEARTBEAT:
            await self._send(connection, {"op": _OP_HEARTBEAT_ACK, "d": None, "s": None, "t": None})
        elif op == _OP_IDENTIFY:
            await self._identify(connection, data or {})
        elif op == _OP_RESUME:
            await self._resume(connection, data or {})
        elif op in (_OP_PRESENCE, _OP_VOICE, _OP_REQUEST_MEMBERS):
            if connection.session is None:
                await self._close(connection, _CLOSE_NOT_AUTHENTICATED, "Not authenticated.")
            elif op == _OP_PRESENCE:
                self._presences.append(copy.deepcopy(data or {}))
            elif op == _OP_REQUEST_MEMBERS:
                await self._members_chunk(connection.session, data or {})
        else:
            await self._close(connection, _CLOSE_UNKNOWN_OPCODE, "Unknown opcode.")

    async def _identify(self, connection: _Connection, data: JSON) -> None:
        if connection.session is not None:
            await self._close(connection, _CLOSE_ALREADY_AUTHENTICATED, "Already authenticated.")
            return
        if data.get("token") != self.bot_token:
            await self._close(connection, _CLOSE_AUTH_FAILED, "Authentication failed.")
            return
        intents = data.get("intents")
        if not isinstance(intents, int) or intents < 0 or intents & ~_ALL_INTENTS:
            await self._close(connection, _CLOSE_INVALID_INTENTS, "Invalid intent(s).")
            return
        if intents & _PRIVILEGED_INTENTS & ~self.approved_intents:
            await self._close(connection, _CLOSE_DISALLOWED_INTENTS, "Disallowed intent(s).")
            return
        shard = data.get("shard")
        if shard is not None and (not isinstance(shard, list) or len(shard) != 2 or not 0 <= shard[0] < shard[1]):
            await self._close(connection, _CLOSE_INVALID_SHARD, "Invalid shard.")
            return
        self._identifies.append({k: copy.deepcopy(v) for k, v in data.items() if k != "token"})
        self._session_starts_remaining -= 1
        session = _Session(id=secrets.token_hex(16), intents=intents, shard=shard)
        shard_id, shard_count = _shard_of(shard)
        self._identify_log.append(
            IdentifyRecord(
                at=time.monotonic(),
                shard=(shard_id, shard_count),
                bucket=shard_id % self.max_concurrency,
                session_id=session.id,
            )
        )
        guilds = [g for g in self._guilds.values() if _on_shard(shard, g.id)]
        self._sessions[session.id] = session
        connection.session = session
        connection.record.kind = "identify"
        connection.record.session_id = session.id
        session.connection = connection
        async with session.lock:
            ready: JSON = {
                "v": 10,
                "user_settings": {},
                "user": {**copy.deepcopy(self._bot_user), "verified": True, "mfa_enabled": False},
                "guilds": [{"id": g.id, "unavailable": True} for g in guilds],
                "session_id": session.id,
                "session_type": "normal",
                "resume_gateway_url": self.resume_gateway_url,
                "private_channels": [],
                "relationships": [],
                "presences": [],
                "guild_join_requests": [],
                "geo_ordered_rtc_regions": [],
                "auth": {},
                "application": {"id": self.application_id, "flags": self._application_flags()},
                "_trace": ["standin"],
            }
            if shard is not None:
                ready["shard"] = shard
            for event, event_data in [
                ("READY", ready),
                *(("GUILD_CREATE", self._guild_create(g, session)) for g in guilds),
            ]:
                session.seq += 1
                frame = {"op": _OP_DISPATCH, "t": event, "s": session.seq, "d": event_data}
                session.buffer.append(frame)
                await self._send(connection, frame)
            connection.ready = True
        await self._notify()

    async def _resume(self, connection: _Connection, data: JSON) -> None:
        if connection.session is not None:
            await self._close(connection, _CLOSE_ALREADY_AUTHENTICATED, "Already authenticated.")
            return
        if data.get("token") != self.bot_token:
            await self._close(connection, _CLOSE_AUTH_FAILED, "Authentication failed.")
            return
        connection.record.kind = "resume"
        session = self._sessions.get(str(data.get("session_id")))
        seq = data.get("seq")
        if (
            session is None
            or session.invalid
            or not isinstance(seq, int)
            or seq > session.seq
            or (session.buffer and seq < session.buffer[0]["s"] - 1)
        ):
            await self._send(connection, {"op": _OP_INVALID_SESSION, "d": False, "s": None, "t": None})
            return
        previous = session.connection
        if previous is not None and previous is not connection:
            previous.closed_by_server = True
            await previous.ws.close(code=4000, message=b"session resumed elsewhere")
        connection.session = session
        connection.record.session_id = session.id
        session.connection = connection
        async with session.lock:
            for frame in session.buffer:
                if frame["s"] > seq:
                    await self._send(connection, frame)
            session.seq += 1
            resumed = {
                "op": _OP_DISPATCH,
                "t": "RESUMED",
                "s": session.seq,
                "d": {"_trace": ["standin"]},
            }
            session.buffer.append(resumed)
            await self._send(connection, resumed)
            connection.ready = True
        self._resumes += 1
        await self._notify()

    async def _members_chunk(self, session: _Session, data: JSON) -> None:
        guild = self._guilds.get(str(data.get("guild_id")))
        if guild is None:
            return
        members = list(guild.members.values())
        user_ids = data.get("user_ids")
        not_found: list[str] = []
        if user_ids is not None:
            wanted = [str(u) for u in (user_ids if isinstance(user_ids, list) else [user_ids])]
            members = [m for m in members if str(m["user"]["id"]) in wanted]
            not_found = [u for u in wanted if u not in guild.members]
        else:
            query = str(data.get("query") or "").lower()
            members = [m for m in members if str(m["user"]["username"]).lower().startswith(query)]
            limit = data.get("limit") or 0
            if limit:
                members = members[:limit]
        chunk: JSON = {
            "guild_id": guild.id,
            "members": copy.deepcopy(members),
            "chunk_index": 0,
            "chunk_count": 1,
            "not_found": not_found,
        }
        if data.get("nonce") is not None:
            chunk["nonce"] = data["nonce"]
        if data.get("presences"):
            chunk["presences"] = []
        await self._dispatch_to(session, "GUILD_MEMBERS_CHUNK", chunk)


def _stream_compressor(kind: str | None) -> Callable[[bytes], bytes] | None:
    """Transport compression for one connection, flushed after every payload as Discord does.

    ``zlib-stream`` ends each payload with the ``00 00 ff ff`` sync-flush suffix; ``zstd-stream``
    flushes a block per payload. Without ``compress`` (or with zstd and no zstd library) frames
    are plain text, which discord.py reads too.
    """
    if kind == "zlib-stream":
        zlib_context = zlib.compressobj()
        return lambda data: zlib_context.compress(data) + zlib_context.flush(zlib.Z_SYNC_FLUSH)
    if kind == "zstd-stream" and _zstd is not None:
        zstd_context = _zstd.ZstdCompressor().compressobj()
        flush_block = _zstd.COMPRESSOBJ_FLUSH_BLOCK
        return lambda data: zstd_context.compress(data) + zstd_context.flush(flush_block)
    return None


def _shard_of(shard: list[int] | None) -> tuple[int, int]:
    """``(shard_id, shard_count)`` of an IDENTIFY's ``shard``; a session without one is ``(0, 1)``."""
    return (0, 1) if shard is None else (int(shard[0]), int(shard[1]))


def _on_shard(shard: list[int] | None, guild_id: str | None) -> bool:
    """Whether an event of `guild_id` (None: a DM) goes to a session on `shard`.

    Discord's Gateway docs, "Sharding": ``shard_id = (guild_id >> 22) % num_shards``; DMs only
    go to shard 0.
    """
    shard_id, count = _shard_of(shard)
    if guild_id is None:
        return shard_id == 0
    return (int(guild_id) >> 22) % count == shard_id


def _unique_users(users: Iterable[JSON]) -> list[JSON]:
    seen: dict[str, JSON] = {}
    for user in users:
        seen.setdefault(str(user["id"]), user)
    return [copy.deepcopy(u) for u in seen.values()]


def _submitted(component: JSON, values: Mapping[str, str | Sequence[str]]) -> JSON:
    """The MODAL_SUBMIT shape of one modal component, filled with the person's input."""
    kind = component.get("type")
    if kind == _ACTION_ROW:
        return {
            "type": _ACTION_ROW,
            "id": component["id"],
            "components": [_submitted(c, values) for c in component.get("components") or []],
        }
    if kind == _LABEL:
        return {
            "type": _LABEL,
            "id": component["id"],
            "component": _submitted(component["component"], values),
        }
    if kind == _TEXT_INPUT:
        custom_id = component["custom_id"]
        value = values.get(custom_id, component.get("value") or "")
        if not isinstance(value, str):
            raise ValueError(f"text input {custom_id!r} takes a string")
        if component.get("required", True) and not value:
            raise ValueError(f"text input {custom_id!r} is required")
        low, high = component.get("min_length") or 0, component.get("max_length") or 4000
        if value and not low <= len(value) <= high:
            raise ValueError(f"text input {custom_id!r} takes {low}..{high} characters")
        return {"type": _TEXT_INPUT, "id": component["id"], "custom_id": custom_id, "value": value}
    if kind in _SELECTS:
        custom_id = component["custom_id"]
        chosen = values.get(custom_id, [])
        chosen_list = [chosen] if isinstance(chosen, str) else list(chosen)
        return {
            "type": kind,
            "id": component["id"],
            "custom_id": custom_id,
            "values": chosen_list,
        }
    return {"type": kind, "id": component.get("id")}


# --------------------------------------------------------------------------- discord.py routing


class OutsideStandInError(AssertionError):
    """discord.py tried to reach a URL that is not the stand-in (e.g. discord.com or its CDN)."""


@dataclass(slots=True)
class DiscordPyRouting:
    """What ``point_discord_py_at`` set up.

    Attributes:
        api_url: The REST root discord.py uses.
        gateway_url: The gateway URL ``GET /gateway/bot`` answered (set at login).
        blocked: URLs discord.py tried outside the stand-in (each also raised
            ``OutsideStandInError`` where it happened; background tasks may swallow that, so
            tests should assert this list is empty).
    """

    api_url: str
    gateway_url: str | None = None
    blocked: list[str] = field(default_factory=list)


async def use_gateway_from_api(client: discord.Client) -> str:
    """Ask ``GET /gateway/bot`` through the client's HTTP session and make discord.py use it.

    A plain ``discord.Client`` never asks Discord for the gateway: it connects to the class
    attribute ``discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY`` (``wss://gateway.discord.gg/``)
    for the first IDENTIFY, and falls back to it again after an INVALID_SESSION with
    ``d: false``. Setting that attribute to what ``/gateway/bot`` answers covers both; RESUMEs go
    to READY's ``resume_gateway_url``, which the server controls (and when a RESUME is refused,
    discord.py IDENTIFYs at the URL it tried to resume at). Call it after ``login`` (the HTTP
    session exists from then on), e.g. at the start of ``setup_hook``.

    Args:
        client: A logged-in client.

    Returns:
        The gateway URL now in use.
    """
    _shards, url, _limits = await client.http.get_bot_gateway()
    discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(url)
    return url


@contextlib.contextmanager
def point_discord_py_at(api_url: str) -> Iterator[DiscordPyRouting]:
    """Point every discord.py client in this process at a Discord stand-in; restore on exit.

    What it changes, and why each is needed:

    1. ``discord.http.Route.BASE = api_url``. Every REST call builds a ``Route`` whose URL is
       ``Route.BASE + path``, read when the Route is created, so setting it before ``login``
       moves all REST traffic. Interaction callbacks and followups (``discord.webhook.async_``)
       import the same ``Route`` class, so they move too.
    2. ``discord.Client.login`` is wrapped to call ``use_gateway_from_api`` after the stock login
       (``GET /users/@me``, ``GET /oauth2/applications/@me``): it asks ``GET /gateway/bot`` and
       sets ``DiscordWebSocket.DEFAULT_GATEWAY``, which discord.py uses for the first IDENTIFY
       and again after an INVALID_SESSION. RESUMEs use READY's ``resume_gateway_url``.
    3. A guard: ``HTTPClient.request``, ``HTTPClient.ws_connect``, ``HTTPClient.get_from_cdn``
       and the webhook adapter's ``request`` refuse any URL whose host and port differ from
       ``api_url``'s, raising ``OutsideStandInError`` and recording it in ``blocked``.

    These are class attributes, so the effect is process-wide: one stand-in at a time.

    Args:
        api_url: The stand-in's REST root, e.g. ``DiscordStandIn.api_url``.

    Yields:
        The routing record; ``gateway_url`` is filled at login, ``blocked`` by the guard.
    """
    routing = DiscordPyRouting(api_url=api_url.rstrip("/"))
    allowed = yarl.URL(routing.api_url)
    http_client = discord.http.HTTPClient
    adapter = discord.webhook.async_.AsyncWebhookAdapter
    saved: dict[tuple[Any, str], Any] = {
        (discord.http.Route, "BASE"): discord.http.Route.BASE,
        (discord.gateway.DiscordWebSocket, "DEFAULT_GATEWAY"): (discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY),
        (discord.Client, "login"): discord.Client.login,
        (http_client, "request"): http_client.request,
        (http_client, "ws_connect"): http_client.ws_connect,
        (http_client, "get_from_cdn"): http_client.get_from_cdn,
        (adapter, "request"): adapter.request,
    }

    def check(url: Any) -> None:
        target = yarl.URL(str(url))
        if (target.host, target.port) != (allowed.host, allowed.port):
            routing.blocked.append(str(url))
            raise OutsideStandInError(f"discord.py tried to reach {url} outside the stand-in")

    original_login = discord.Client.login
    original_request = http_client.request
    original_ws_connect = http_client.ws_connect
    original_cdn = http_client.get_from_cdn
    original_adapter_request = adapter.request

    async def login(self: discord.Client, token: str) -> None:
        await original_login(self, token)
        routing.gateway_url = await use_gateway_from_api(self)

    async def request(self: Any, route: Any, **kwargs: Any) -> Any:
        check(route.url)
        return await original_request(self, route, **kwargs)

    async def ws_connect(self: Any, url: str, **kwargs: Any) -> Any:
        check(url)
        return await original_ws_connect(self, url, **kwargs)

    async def get_from_cdn(self: Any, url: str) -> bytes:
        check(url)
        return await original_cdn(self, url)

    async def adapter_request(self: Any, route: Any, *args: Any, **kwargs: Any) -> Any:
        check(route.url)
        return await original_adapter_request(self, route, *args, **kwargs)

    discord.http.Route.BASE = routing.api_url
    discord.Client.login = login  # type: ignore[method-assign]
    http_client.request = request  # type: ignore[method-assign]
    http_client.ws_connect = ws_connect  # type: ignore[method-assign]
    http_client.get_from_cdn = get_from_cdn  # type: ignore[method-assign]
    adapter.request = adapter_request  # type: ignore[method-assign]
    try:
        yield routing
    finally:
        for (owner, name), value in saved.items():
            setattr(owner, name, value)

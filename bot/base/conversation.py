"""Who is talking and where: the values adapters hand to the core.

Thread ids follow DESIGN.md ("Conversations and thread ids"): derived on the server from the
platform's authenticated payload, never from message text, and always including the workspace
(team / guild) id so that two workspaces never share state.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

DM_WORKSPACE = "dm"
"""The workspace id of Discord DMs (DESIGN.md: `discord:<guild_id or dm>:...`): no server owns them."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ConversationRef:
    """One conversation: a channel, or a ticket (a thread) inside it.

    Attributes:
        platform: `slack`, `discord` or `console`.
        workspace_id: Slack team id, Discord guild id, or `dm` for a Discord DM.
        channel_id: the platform's channel id.
        thread: Slack `thread_ts` or Discord thread id when the conversation is a ticket.
    """

    platform: str
    workspace_id: str
    channel_id: str
    thread: str | None = None

    def __post_init__(self) -> None:
        for name in ("platform", "workspace_id", "channel_id"):
            value = getattr(self, name)
            if not value or ":" in value:
                raise ValueError(f"{name} must be non-empty and contain no ':', got {value!r}")
        if self.thread is not None and (not self.thread or ":" in self.thread):
            raise ValueError(f"thread must be non-empty and contain no ':', got {self.thread!r}")

    @property
    def thread_id(self) -> str:
        """The LangGraph `thread_id`: `<platform>:<workspace>:<channel>[:<thread>]`."""
        base = f"{self.platform}:{self.workspace_id}:{self.channel_id}"
        return f"{base}:{self.thread}" if self.thread else base

    @classmethod
    def from_thread_id(cls, thread_id: str) -> ConversationRef:
        """Parse a thread id made by `thread_id`.

        Raises:
            ValueError: when the string has fewer than three or more than four parts.
        """
        parts = thread_id.split(":")
        if len(parts) not in (3, 4):
            raise ValueError(f"not a Countersign thread id: {thread_id!r}")
        return cls(
            platform=parts[0],
            workspace_id=parts[1],
            channel_id=parts[2],
            thread=parts[3] if len(parts) == 4 else None,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Actor:
    """An authenticated person, as the platform vouched for them.

    Attributes:
        platform: as in `ConversationRef`.
        workspace_id: the workspace the payload came from.
        user_id: the platform's user id (never a display name).
        display_name: for cards and audit rows only; never used to decide anything.
        is_admin: whether the platform says they administer the workspace; None when the
            adapter did not look it up (the core asks the platform port when it matters).
        groups: role or user-group ids, for approver rules.
        channel_id: for a click, the channel of the clicked message as the platform's signed
            payload names it (the person can see that channel); None when not known. A card
            escalated to a channel may be decided by whoever clicks in that channel.
    """

    platform: str
    workspace_id: str
    user_id: str
    display_name: str
    is_admin: bool | None = None
    groups: frozenset[str] = field(default_factory=frozenset)
    channel_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class IncomingMessage:
    """A message for the agent.

    Attributes:
        actor: who wrote it.
        conversation: where it belongs.
        text: the text with the bot's own mention removed (made storable on construction:
            see `storable_text`).
        message_id: the platform's id of the message (Slack `ts`, Discord message id), used to
            show progress on it and to drop platform retries of the same event.
    """

    actor: Actor
    conversation: ConversationRef
    text: str
    message_id: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "text", storable_text(self.text))


_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def storable_text(text: str) -> str:
    """`text` with U+FFFD in place of what PostgreSQL and UTF-8 cannot hold.

    PostgreSQL's text and jsonb refuse U+0000, and UTF-8 cannot encode a lone surrogate
    (JSON can carry one as an escape, so a platform payload can too). A message holding either could
    not be stored in the inbox or the checkpoint and would fail on every attempt; replaced, it
    reads the same to the model and to people.
    """
    return _UNSTORABLE.sub("\ufffd", text)

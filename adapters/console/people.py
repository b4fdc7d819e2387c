"""Who is at the terminal, and how the terminal names people and channels.

The terminal is one workspace (`console`/`local`) whose one conversation is the channel
`terminal`. The person who started `countersign chat` (the OS user) administers it; `/as <name>`
lets them act as a pretend teammate, whose user id is simply the name. People are written
`@name` and channels `#name`, in commands (`TERMINAL_MENTIONS`, handed to the core's parser) and
in replies (`CONSOLE_MARKUP`). User groups and roles have no terminal spelling: a team tries
them on Slack or Discord.
"""

from __future__ import annotations

import getpass
import re
from dataclasses import replace

from adapters.console import messages as msg
from adapters.words.markup import Markup
from bot.admin.parse import USAGE as CHAT_USAGE
from bot.admin.parse import Mentions
from bot.base.conversation import Actor, ConversationRef

PLATFORM = "console"
WORKSPACE = "local"
CHANNEL = "terminal"
TERMINAL = ConversationRef(platform=PLATFORM, workspace_id=WORKSPACE, channel_id=CHANNEL)
"""The terminal's own conversation: where `countersign chat` tells its operator, the admin, of held MCP tools."""

_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}"
NAME = re.compile(_NAME)
"""A name at the terminal: a pretend person's (their user id) or a channel's."""

TERMINAL_MENTIONS = Mentions(user=re.compile(f"@({_NAME})"), channel=re.compile(f"#({_NAME})"))
"""`@name` and `#name`, as `bot.admin.parse.parse_command` matches them for the terminal."""

CONSOLE_MARKUP = Markup(
    bold=lambda text: text,
    user=lambda user_id: f"@{user_id}",
    channel=lambda channel_id: f"#{channel_id}",
    role=lambda role_id: f"role {role_id}",
    group=lambda group_id: f"group {group_id}",
    when=lambda moment: moment.astimezone().strftime("%Y-%m-%d %H:%M"),
    escape=lambda text: text,
    admins_are="the person at the terminal",
    usage={**CHAT_USAGE, **msg.USAGE},
    examples=msg.HELP_EXAMPLES,
)
"""`/countersign` replies in the terminal: plain text, people as `@name`, channels as `#name`."""


def operator_name() -> str:
    """The OS user who runs the terminal chat (its admin)."""
    try:
        return getpass.getuser() or "operator"
    except Exception:  # no user name in the environment or the password database
        return "operator"


def person_name(text: str) -> str | None:
    """The name in `/as` text (`bob` or `@bob`), or None when it is not a name."""
    name = text.strip().removeprefix("@")
    return name if NAME.fullmatch(name) else None


class Session:
    """Who types at the terminal now: the operator, or a pretend person (`/as`).

    Args:
        operator: the OS user; the only one the terminal counts as an admin (others only when
            `/countersign admins add` made them bot admins).
        channel_id: the terminal conversation's channel.
    """

    def __init__(self, operator: str, channel_id: str = CHANNEL) -> None:
        self.operator = operator
        self.name = operator
        self.conversation = ConversationRef(platform=PLATFORM, workspace_id=WORKSPACE, channel_id=channel_id)
        self._actor = Actor(
            platform=PLATFORM,
            workspace_id=WORKSPACE,
            user_id=operator,
            display_name=operator,
            is_admin=True,
            channel_id=channel_id,
        )

    @property
    def pretending(self) -> bool:
        """Whether someone other than the operator types now."""
        return self.name != self.operator

    @property
    def prompt(self) -> str:
        """The message prompt: `you> `, or `bob> ` while acting as bob."""
        return msg.PROMPT.format(name=self.name if self.pretending else msg.YOU)

    def become(self, name: str | None) -> str:
        """Act as `name` from now on (None or the operator's name: yourself again); return what to print."""
        self.name = name or self.operator
        if not self.pretending:
            return msg.AS_YOURSELF.format(name=self.operator)
        return msg.AS_SOMEONE.format(name=self.name)

    def actor(self, *, channel_id: str | None = None) -> Actor:
        """The current person as the core's `Actor`.

        Args:
            channel_id: where their click happens (a card posted in or escalated to a channel
                is answered there); the terminal's channel by default.
        """
        channel = channel_id or self.conversation.channel_id
        if not self.pretending:
            return replace(self._actor, channel_id=channel)
        return Actor(
            platform=PLATFORM,
            workspace_id=WORKSPACE,
            user_id=self.name,
            display_name=self.name,
            is_admin=False,
            channel_id=channel,
        )

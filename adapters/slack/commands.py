"""`/countersign` in Slack: a slash command whose words become a core admin command.

Acknowledged at once; the reply is ephemeral, through the command's `response_url`.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncRespond

from adapters.admin_text import Markup, error_text, render
from adapters.slack import messages as msg
from adapters.slack.blocks import when_token
from adapters.slack.platform import UserDirectory
from adapters.slack.text import MESSAGE_CHARS, escape, plain_text, split_message
from bot.admin.parse import parse_command
from bot.admin.service import AdminService
from bot.conversation import Actor
from bot.errors import CountersignError

log = logging.getLogger(__name__)

COMMAND = "/countersign"

SLACK_MARKUP = Markup(
    bold=lambda text: f"*{text}*",
    user=lambda user_id: f"<@{user_id}>",
    channel=lambda channel_id: f"<#{channel_id}>",
    role=lambda role_id: f"role {role_id}",
    group=lambda group_id: f"<!subteam^{group_id}>",
    when=lambda moment: when_token(moment) if isinstance(moment, datetime) else "",
    escape=escape,
    admins_are="workspace admins and owners",
)


RESPONSE_URL_POSTS = 5
"""How many times one `response_url` may be used (Slack's documented limit)."""


class SlackCommands:
    """The slash command listener.

    Args:
        admin: the admin use case.
        users: the user directory (names for the audit log).
    """

    def __init__(self, admin: AdminService, users: UserDirectory) -> None:
        self._admin = admin
        self._users = users

    def register(self, app: AsyncApp) -> None:
        """Attach the `/countersign` listener."""
        app.command(COMMAND)(self.on_command)

    async def on_command(self, ack: AsyncAck, command: dict[str, Any], respond: AsyncRespond) -> None:
        """Run the command and answer privately; bad input changes nothing."""
        await ack()
        user_id = command["user_id"]
        user = await self._users.get(user_id)
        actor = Actor(
            platform="slack", workspace_id=command["team_id"], user_id=user_id, display_name=user.display_name
        )
        try:
            parsed = parse_command(command.get("text", ""), condition_text=plain_text)
            text = render(await self._admin.execute(actor, parsed, here=command["channel_id"]), SLACK_MARKUP)
        except CountersignError as exc:
            text = error_text(exc, SLACK_MARKUP)
        except Exception as exc:
            log.exception("/countersign failed for %s", user_id)
            text = error_text(exc, SLACK_MARKUP)
        for chunk in _reply_chunks(text):
            await respond(text=chunk, response_type="ephemeral", replace_original=False)


def _reply_chunks(text: str) -> list[str]:
    """The reply in messages Slack accepts, at most `RESPONSE_URL_POSTS` of them.

    A `response_url` takes up to five posts (Slack: "Handling user interaction"); a reply
    longer than that (a long audit log) is cut, saying so, rather than refused as too long.
    """
    chunks = split_message(text, MESSAGE_CHARS)
    if len(chunks) <= RESPONSE_URL_POSTS:
        return chunks
    return [*chunks[: RESPONSE_URL_POSTS - 1], msg.REPLY_CUT]

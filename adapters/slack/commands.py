"""`/countersign` in Slack: a slash command whose words become a core admin command.

Acknowledged at once; the reply is ephemeral, through the command's `response_url`.

`context` and `stop` are about a conversation, which the core decides as for a message
(`Countersign.conversation_at`): a DM, or a channel with `scope channel`, is one conversation; in
a channel with a conversation per thread, the thread is named by its link
(`adapters.slack.thread_links`), since a slash command's payload never says which thread it
was typed in. (A turn's Stop button, on its progress message, needs no link.)
"""

from __future__ import annotations

import logging
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncRespond

from adapters.slack import messages as msg
from adapters.slack.after_ack import AfterAck
from adapters.slack.markup import SLACK_MARKUP
from adapters.slack.platform import UserDirectory
from adapters.slack.text import MESSAGE_CHARS, plain_text, split_message
from adapters.slack.thread_links import ThreadLinkError, take_thread_link, thread_of_link
from adapters.words.admin import error_text, render
from bot.admin.commands import IN_A_CONVERSATION, SUBCOMMANDS
from bot.admin.parse import parse_command
from bot.admin.service import AdminService
from bot.base.conversation import Actor, ConversationRef
from bot.base.errors import CountersignError
from bot.service import Countersign

log = logging.getLogger(__name__)

COMMAND = "/countersign"

PLATFORM = "slack"


RESPONSE_URL_POSTS = 5
"""How many times one `response_url` may be used (Slack's documented limit)."""


class SlackCommands:
    """The slash command listener.

    Args:
        admin: the admin use case.
        service: the core (decides the conversation a `context` or `stop` command is about).
        users: the user directory (names for the audit log).
        after_ack: runs a command once Slack has its ack (`adapters.slack.after_ack`).
    """

    def __init__(self, admin: AdminService, service: Countersign, users: UserDirectory, after_ack: AfterAck) -> None:
        self._admin = admin
        self._service = service
        self._after_ack = after_ack
        self._users = users

    def register(self, app: AsyncApp) -> None:
        """Attach the `/countersign` listener."""
        app.command(COMMAND)(self.on_command)

    async def on_command(self, ack: AsyncAck, command: dict[str, Any], respond: AsyncRespond) -> None:
        """Ack, then run the command in the background and answer privately; bad input changes nothing."""
        await ack()
        self._after_ack.run(self._run(command, respond), "/countersign")

    async def _run(self, command: dict[str, Any], respond: AsyncRespond) -> None:
        user_id = command["user_id"]
        user = await self._users.get(command["team_id"], user_id)
        actor = Actor(
            platform=PLATFORM, workspace_id=command["team_id"], user_id=user_id, display_name=user.display_name
        )
        try:
            words, link = take_thread_link(command.get("text", ""))
            parsed = parse_command(words, condition_text=plain_text)
            conversation = await self._conversation(command, link) if isinstance(parsed, IN_A_CONVERSATION) else None
            if isinstance(parsed, IN_A_CONVERSATION) and conversation is None:
                command_word = SUBCOMMANDS[type(parsed)].split()[0]
                text = msg.CONTEXT_NEEDS_LINK.format(
                    command=command_word, also=msg.CONTEXT_NEEDS_LINK_ALSO.get(command_word, "")
                )
            else:
                reply = await self._admin.execute(actor, parsed, here=command["channel_id"], conversation=conversation)
                text = render(reply, SLACK_MARKUP)
        except ThreadLinkError as exc:
            text = msg.CONTEXT_LINK_PROBLEMS[exc.problem.value]
        except CountersignError as exc:
            text = error_text(exc, SLACK_MARKUP)
        except Exception as exc:
            log.exception("/countersign failed for %s", user_id)
            text = error_text(exc, SLACK_MARKUP)
        for chunk in _reply_chunks(text):
            await respond(text=chunk, response_type="ephemeral", replace_original=False)

    async def _conversation(self, command: dict[str, Any], link: str | None) -> ConversationRef | None:
        """The conversation a `context` or `stop` command is about; None when a thread must be named.

        A link is checked wherever it is given (a link into another channel is refused even
        where none is needed). In a DM without a link, the DM's own conversation; with one, the
        thread it names (replies in a DM thread are a conversation of their own).

        Raises:
            ThreadLinkError: the link names no thread of this channel.
        """
        team, channel = command["team_id"], command["channel_id"]
        thread = thread_of_link(link, channel_id=channel, team_domain=command.get("team_domain")) if link else None
        return await self._service.conversation_at(
            PLATFORM, team, channel, thread, is_dm=channel.startswith("D"), thread_required=True
        )


def _reply_chunks(text: str) -> list[str]:
    """The reply in messages Slack accepts, at most `RESPONSE_URL_POSTS` of them.

    A `response_url` takes up to five posts (Slack: "Handling user interaction"); a reply
    longer than that (a long audit log) is cut, saying so, rather than refused as too long.
    """
    chunks = split_message(text, MESSAGE_CHARS)
    if len(chunks) <= RESPONSE_URL_POSTS:
        return chunks
    return [*chunks[: RESPONSE_URL_POSTS - 1], msg.REPLY_CUT]

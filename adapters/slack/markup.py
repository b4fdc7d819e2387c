"""How Slack writes the shared sentences (`adapters.words`): mrkdwn bold, `<@U…>` mentions, date tokens.

The one `Markup` of the Slack adapter (docs/decisions/0060-words-in-one-place.md); limits and
escaping live in `adapters.slack.text`.
"""

from __future__ import annotations

from datetime import datetime

from adapters.slack.blocks import when_token
from adapters.slack.text import escape
from adapters.words.admin import HELP_EXAMPLES
from adapters.words.markup import Markup
from bot.admin.parse import USAGE

SLACK_MARKUP = Markup(
    bold=lambda text: f"*{text}*",
    user=lambda user_id: f"<@{user_id}>",
    channel=lambda channel_id: f"<#{channel_id}>",
    role=lambda role_id: f"role {role_id}",
    group=lambda group_id: f"<!subteam^{group_id}>",
    when=lambda moment: when_token(moment) if isinstance(moment, datetime) else "",
    escape=escape,
    admins_are="workspace admins and owners",
    usage={**USAGE, "context": "context [reset] [<link to the thread>]", "stop": "stop [<link to the thread>]"},
    examples=(
        *HELP_EXAMPLES,
        (
            "context https://<workspace>.slack.com/archives/C…/p…",
            "the same for a thread, by the link of one of its messages (Slack does not tell a command its thread)",
        ),
        (
            "stop https://<workspace>.slack.com/archives/C…/p…",
            "stop the bot's running turn in that thread (or press Stop on its progress message)",
        ),
    ),
)
"""`/countersign` replies in Slack (mrkdwn), also used for refusals of Stop and of batch buttons."""

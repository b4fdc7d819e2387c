"""An MCP server's question (elicitation) in the words Slack and Discord share.

The cards, forms and their limits differ per platform (`adapters.slack.forms`,
`adapters.discord.forms`; docs/decisions/0050-elicitation-forms-on-slack-and-discord.md).
"""

from __future__ import annotations

QUESTION_ASKS = "<@{user}>, the MCP server `{server}` asks, while running `{tool}`:"
"""The card's first line: the requester's mention, the server and the tool it runs."""
QUESTION_LINK = (
    "`{server}` asks you to open this link (only you see it): {link}\n"
    "Open it only if you expect it; it may sign you in somewhere."
)
"""The requester's ephemeral message with the link of a URL-mode question."""

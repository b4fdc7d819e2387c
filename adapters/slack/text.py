"""Making agent text safe and sized for Slack.

Slack's "Formatting text for app surfaces" doc: `&`, `<` and `>` are control characters and
must be escaped as `&amp;`, `&lt;`, `&gt;`. Escaping them is what stops agent text from
broadcasting (`<!channel>`, `<!here>`, `<!everyone>`), mentioning (`<@U...>`, `<!subteam^...>`)
or hiding a link behind other words.
"""

from __future__ import annotations

import re

from adapters import chunking

__all__ = ["MESSAGE_CHARS", "escape", "plain_text", "split_message", "to_mrkdwn", "unescape"]

MESSAGE_CHARS = 3500
"""Characters per posted message: under Slack's 4,000 display limit."""

_BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*")


def escape(text: str) -> str:
    """Escape Slack's three control characters."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


_LINK = re.compile(r"<((?:https?|mailto):[^|>]*)(?:\|([^>]*))?>")


def plain_text(text: str) -> str:
    """What a person typed, from Slack's escaped text with link tokens.

    With escaping on (the manifest's `should_escape`), a typed URL or address arrives as a link
    token, `<https://a.example>` or `<mailto:x@a.example|x@a.example>`: it is replaced by the
    text shown (the label, else the URL), then the escaped `&`, `<`, `>` are decoded. Mention
    tokens are left as they are.
    """
    return unescape(_LINK.sub(lambda m: m.group(2) if m.group(2) is not None else m.group(1), text))


def unescape(text: str) -> str:
    """What a person typed, from Slack's escaped text (message `text`, slash command `text`).

    Slack sends `&`, `<` and `>` that a person typed as `&amp;`, `&lt;` and `&gt;`, so that
    its own `<@U123>` style tokens stay unambiguous; those tokens are left as they are.
    """
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def to_mrkdwn(text: str) -> str:
    """Agent Markdown to Slack mrkdwn: escape, then `**bold**` to `*bold*`."""
    return _BOLD.sub(r"*\1*", escape(text))


def split_message(text: str, limit: int = MESSAGE_CHARS) -> list[str]:
    """Split escaped mrkdwn into Slack-sized messages (see `adapters.chunking.split_message`)."""
    return chunking.split_message(text, limit)

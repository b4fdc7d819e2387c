"""Making agent text safe and sized for Slack.

Slack's "Formatting text for app surfaces" doc: `&`, `<` and `>` are control characters and
must be escaped as `&amp;`, `&lt;`, `&gt;`. Escaping them is what stops agent text from
broadcasting (`<!channel>`, `<!here>`, `<!everyone>`), mentioning (`<@U...>`, `<!subteam^...>`)
or hiding a link behind other words.
"""

from __future__ import annotations

import re

MESSAGE_CHARS = 3500
"""Characters per posted message: under Slack's 4,000 display limit and a section's 3,000+."""

_FENCE = "```"
_BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*")


def escape(text: str) -> str:
    """Escape Slack's three control characters."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def to_mrkdwn(text: str) -> str:
    """Agent Markdown to Slack mrkdwn: escape, then `**bold**` to `*bold*`."""
    return _BOLD.sub(r"*\1*", escape(text))


def split_message(text: str, limit: int = MESSAGE_CHARS) -> list[str]:
    """Split already-escaped `text` into chunks of at most `limit` characters.

    Cuts at a paragraph, then a line, then a sentence, then a space, and only then mid-word.
    A chunk that ends inside a ``` fence is closed and the next one reopens it, so code stays
    formatted across messages.

    Raises:
        ValueError: when `limit` is too small to hold a fence pair (< 16).
    """
    if limit < 16:
        raise ValueError("limit must be at least 16")
    chunks: list[str] = []
    rest = text.strip()
    reopen = False
    while rest:
        prefix = _FENCE + "\n" if reopen else ""
        room = limit - len(prefix) - len("\n" + _FENCE)
        if len(prefix) + len(rest) <= limit:
            chunks.append(prefix + rest)
            break
        cut = _cut_point(rest, room)
        piece, rest = rest[:cut].rstrip(), rest[cut:].lstrip()
        body = prefix + piece
        reopen = body.count(_FENCE) % 2 == 1
        chunks.append(body + "\n" + _FENCE if reopen else body)
    return [c for c in chunks if c.strip()]


def _cut_point(text: str, room: int) -> int:
    window = text[:room]
    for separator in ("\n\n", "\n", ". ", " "):
        index = window.rfind(separator)
        if index > room // 3:
            return index + len(separator)
    entity = window.rfind("&", max(0, room - 5))
    if entity > 0 and ";" not in window[entity:]:
        return entity  # never cut an escaped `&amp;` / `&lt;` / `&gt;` in half
    return room

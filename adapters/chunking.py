"""Splitting long text into messages a platform accepts (Slack ~4,000, Discord 2,000)."""

from __future__ import annotations

_FENCE = "```"


def split_message(text: str, limit: int) -> list[str]:
    """Split `text` (already escaped for its platform) into chunks of at most `limit` characters.

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
        # Only line breaks are dropped at a cut: the next chunk keeps a code line's indentation.
        piece, rest = rest[:cut].rstrip(), rest[cut:].lstrip("\n")
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
    cut = room
    entity = window.rfind("&", max(0, room - 5))
    if entity > 0 and ";" not in window[entity:]:
        cut = entity  # never cut an escaped `&amp;` / `&lt;` / `&gt;` in half
    while cut > 1 and text[cut - 1] == "`" and text[cut] == "`":
        cut -= 1  # never cut a ``` fence marker in half
    fence = window.rfind(_FENCE, 0, cut)
    if window[:cut].count(_FENCE) % 2 == 1 and "\n" not in window[fence:cut]:
        # The cut would split inline ```code``` on one line: cut before it if there is room.
        space = window.rfind(" ", 0, fence)
        if space > 0:
            return space + 1
    return cut

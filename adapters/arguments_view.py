"""Drawing a call's arguments in code blocks, for every chat adapter: fences that hold, and parts that fit.

The core lays the arguments out (`bot.reviews.shown`); each adapter draws them in its own
markup within its own limits. What they share is here: text that cannot close the code block
it is drawn in (`fence_safe`), one argument's line as a card draws it (`drawn`), and the whole
arguments cut into parts that each fit one block (`parts`), for the full views ("All
arguments") that show every character
(docs/decisions/0034-arguments-approvers-can-see.md).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from bot.reviews.shown import ShownLine

_TWO_TICKS = re.compile(r"`(?=`)")
ZERO_WIDTH = "\u200b"


def fence_safe(text: str) -> str:
    """`text` with a zero-width space after every backtick that another follows.

    A ``` inside a value would close the code block it is drawn in and let the rest render as
    markup (a way to spoof a card). With no two backticks side by side, no run of them can
    form a fence, however many the value holds (a plain replace of "```" leaves one in
    "````"). The inserted spaces come after `reveal_invisible`, so they are not shown as
    escapes: they only keep the backticks apart.
    """
    return _TWO_TICKS.sub("`" + ZERO_WIDTH, text)


LINE_CUT = "… (+{hidden} characters)"
"""The end of a shortened argument's line on a card (inside its code block); the full view shows the rest."""


def drawn(line: ShownLine) -> str:
    """One argument's line as a card draws it (before any markup escaping): fence-safe, its cut marked."""
    text = fence_safe(line.text)
    if line.hidden:
        text += LINE_CUT.format(hidden=f"{line.hidden:,}")
    return text


def parts(text: str, room: int, cost: Callable[[str], int], *, at_lines: bool = True) -> list[str]:
    """`text` cut into consecutive parts that each cost at most `room`; joined, they are `text`.

    Args:
        text: what to cut (already `fence_safe`).
        room: the most one part may cost.
        cost: what a part costs as the adapter draws it (e.g. its length once escaped for
            Slack); it must grow with the part and be at least the part's length.
        at_lines: end a part after a line break when one is in its second half (easier to
            read); False fills every part to the brim, so that the number of parts depends
            only on the text's cost (what a platform's limit is measured against).

    Returns:
        The parts in order; empty for an empty text.

    Raises:
        ValueError: when `room` cannot hold a single character.
    """
    found: list[str] = []
    start = 0
    while start < len(text):
        # The longest prefix of the rest that fits: a part costs at least its length, so at
        # most `room` characters.
        low, high = 0, min(room, len(text) - start) + 1
        while high - low > 1:
            middle = (low + high) // 2
            if cost(text[start : start + middle]) <= room:
                low = middle
            else:
                high = middle
        if low == 0:
            raise ValueError(f"a part of {room} cannot hold {text[start]!r}")
        end = start + low
        if at_lines and end < len(text):
            line_end = text.rfind("\n", start + low // 2, end)
            if line_end != -1:
                end = line_end + 1
        found.append(text[start:end])
        start = end
    return found

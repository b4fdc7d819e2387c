"""What an approver is shown of a call's arguments, on every surface that decides.

The rule (docs/decisions/0034-arguments-approvers-can-see.md): before deciding, an approver can
see every key and every value that will run. A card lists every top-level key, shortening long
values visibly within its room (`shorten`); the whole arguments are one click away (`Arguments.
text`, shown by each adapter in a view of several parts); and a platform that cannot show them
in full says so (`Unshowable`), so the call cannot be approved there (`bot.reviews.decide`).

The keys are laid out in the tool's own order (`arrange`): the properties of its schema as the
tool declares them, which puts short, decisive keys first (`method`, `url` before `body`), then
any other keys, shortest value first. Never in the order the arguments were stored in (the
`jsonb` they were once kept as put shorter keys first, which let a long `body` push `method` and
`headers` off a card). Nested objects keep their keys in the order the call runs in: the
database keeps that order (docs/decisions/0034-arguments-approvers-can-see.md).
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

_KEEP = {"\n", "\t"}
_HIDDEN = {"Cc", "Cf", "Co", "Cn", "Zl", "Zp"}
"""Categories revealed: control, format, private-use and unassigned characters, and the line and
paragraph separators (U+2028, U+2029), which Slack and Discord draw as line breaks."""

LEAST_SHOWN = 32
"""Characters of a key's line a card always shows, however many keys share its room."""


def reveal_invisible(text: str) -> str:
    r"""Replace invisible, direction-changing and line-breaking characters with visible escapes like `\u202e`.

    Unicode format characters (category Cf: right-to-left overrides, zero-width spaces and
    joiners, ...) and control characters would let a card display arguments that read
    differently from the ones that run ("Trojan Source"); the escapes make them obvious. Every
    character but `\n` that breaks a line when drawn is revealed too (`\r`, `\x0b`, `\x0c`,
    `\x1c`-`\x1e`, `\x85` are controls; U+2028 and U+2029 are separators): one would let a value
    draw a line of its own, such as a forged `"cc": []` above the real `cc` of a card.
    Newlines and tabs are kept.
    """
    hidden = {
        ord(ch): f"\\u{ord(ch):04x}" for ch in set(text) if ch not in _KEEP and unicodedata.category(ch) in _HIDDEN
    }
    return text.translate(hidden) if hidden else text


def _json(value: Any, *, indent: int | None = None) -> str:
    # `default=str`: arguments are JSON values; anything else is shown, never a crash.
    return json.dumps(value, ensure_ascii=False, indent=indent, default=str)


@dataclass(frozen=True, slots=True)
class Arguments:
    """A call's arguments in the order approvers see them (`arrange`).

    Attributes:
        items: `(key, value)` for every top-level key, in order.
    """

    items: tuple[tuple[str, Any], ...]

    @property
    def keys(self) -> tuple[str, ...]:
        """The top-level keys, in order."""
        return tuple(key for key, _ in self.items)

    def as_dict(self) -> dict[str, Any]:
        """The arguments as a dict whose iteration order is this order."""
        return dict(self.items)

    def text(self) -> str:
        """The whole arguments as every full view shows them.

        Indented JSON in this order, non-ASCII kept, invisible characters revealed
        (`reveal_invisible`).
        """
        return reveal_invisible(_json(self.as_dict(), indent=2))

    def lines(self) -> tuple[str, ...]:
        """One line per key, `"key": value` in compact JSON, not yet revealed (`shorten` cuts them)."""
        return tuple(f"{_json(key)}: {_json(value)}" for key, value in self.items)


def arrange(args: Mapping[str, Any], tool_order: Iterable[str] = ()) -> Arguments:
    """Lay out `args` in the tool's own order.

    Args:
        args: the call's arguments (top level; nested values are kept as they are, in the
            order the call runs in).
        tool_order: the tool's argument names in its schema's order (`ToolRegistry.argument_order`);
            empty when unknown.

    Returns:
        The keys `tool_order` names, in its order, then every other key by the length of its
        value as JSON (shortest first) and then by name. The result never depends on the order
        in which `args` iterates.
    """
    named = [key for key in dict.fromkeys(tool_order) if key in args]
    known = set(named)
    others = sorted((key for key in args if key not in known), key=lambda key: (len(_json(args[key])), key))
    return Arguments(items=tuple((key, args[key]) for key in named + others))


@dataclass(frozen=True, slots=True)
class ShownLine:
    """One key of a card: its line, revealed, and how much of it was cut off.

    Attributes:
        text: `"key": value` (`Arguments.lines`) with invisible characters revealed, cut to
            what fits when `hidden` is not 0 (the adapter then marks the cut).
        hidden: characters of the line not shown (0: the whole line is shown).
    """

    text: str
    hidden: int = 0


def shorten(
    arguments: Arguments, room: int, cost: Callable[[ShownLine], int], *, least: int = LEAST_SHOWN
) -> tuple[ShownLine, ...] | None:
    """One line per key, every key shown, the longest lines cut so that all of them fit `room`.

    The room is shared like water: each line gets at most the same number of characters, as
    many as fit, so short lines stay whole and the room they leave goes to the long ones. A cut
    line keeps its start (the key first); characters are cut before invisible ones are
    revealed, so an escape is never cut in half and `hidden` counts the arguments' own
    characters.

    Args:
        arguments: the arranged arguments.
        room: what the lines may cost together, in the adapter's units.
        cost: what one line costs as the adapter draws it (escaping, its mark of a cut, the
            line break), in the same units; it must grow with the line's text and be at least
            the length of its text.
        least: characters every line keeps at least.

    Returns:
        The lines in order, or None when even `least` characters per key do not fit (more keys
        than the card can list).
    """
    raw = arguments.lines()

    def drawn(limit: int | None) -> tuple[ShownLine, ...]:
        return tuple(
            ShownLine(reveal_invisible(line))
            if limit is None or len(line) <= limit
            else ShownLine(reveal_invisible(line[:limit]), len(line) - limit)
            for line in raw
        )

    def total(lines: Sequence[ShownLine]) -> int:
        return sum(cost(line) for line in lines)

    if sum(len(line) for line in raw) <= room:  # else the whole lines cannot fit (a line costs its length)
        whole = drawn(None)
        if total(whole) <= room:
            return whole
    if total(drawn(least)) > room:
        return None
    # Fits at `low`; does not at `high` (the whole lines, or a line longer than the room).
    low, high = least, min(max(len(line) for line in raw), room + 1)
    while high - low > 1:
        middle = (low + high) // 2
        if total(drawn(middle)) <= room:
            low = middle
        else:
            high = middle
    return drawn(low)


def leaves_free(matching: Sequence[str], arguments: Iterable[str]) -> tuple[str, ...]:
    """The arguments a trust grant binding `matching` leaves free: any value of them is trusted.

    Args:
        matching: the argument names the grant binds (empty: every argument, none free).
        arguments: the tool's argument names, in order (its schema's, and any the call gave).

    Returns:
        The names in `arguments` that `matching` does not name, in order, each once.
    """
    if not matching:
        return ()
    bound = set(matching)
    return tuple(name for name in dict.fromkeys(arguments) if name not in bound)


class Shortfall(StrEnum):
    """Why a platform cannot show a call's arguments in full."""

    CHARACTERS = "characters"
    """The whole arguments do not fit the platform's full view."""
    KEYS = "keys"
    """The card cannot list every key."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Unshowable:
    """A platform cannot show a call's arguments in full: the call cannot be approved there.

    Attributes:
        platform: the platform (`Platform.name`).
        shortfall: what does not fit.
        size: the characters of the arguments as the platform would show them, or their keys.
        limit: the most the platform shows, in the same unit.
    """

    platform: str
    shortfall: Shortfall
    size: int
    limit: int


class ArgumentsViewer(Protocol):
    """What a platform can show of a call's arguments (each `bot.ports.Platform` says)."""

    def unshowable(self, arguments: Arguments) -> Unshowable | None:
        """Why its cards and full view cannot show `arguments` in full; None when they can.

        The adapter answers from the very layout it draws, so a card offers Approve exactly when
        the core would record the approval.
        """
        ...

"""How one platform writes bold text, mentions, dates and untrusted text in a shared sentence.

This is the only part of a shared sentence that differs between Slack, Discord and the terminal.

Each platform defines its `Markup` once (`adapters.slack.markup`, `adapters.discord.markup`,
`adapters.console.people`); the shared sentences (`adapters.words`) take it as an argument
(docs/decisions/0060-words-in-one-place.md).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from bot.admin.parse import USAGE


@dataclass(frozen=True, slots=True, kw_only=True)
class Markup:
    """How one platform writes bold text, mentions and dates."""

    bold: Callable[[str], str]
    user: Callable[[str], str]
    channel: Callable[[str], str]
    role: Callable[[str], str]
    group: Callable[[str], str]
    when: Callable[[datetime], str]
    escape: Callable[[str], str]
    admins_are: str
    """Who counts as a workspace admin on this platform, in words."""
    usage: Mapping[str, str] = field(default_factory=lambda: dict(USAGE))
    """How each subcommand is typed here (Slack: words; Discord: typed options)."""
    examples: tuple[tuple[str, str], ...] = ()
    """`help` examples as (command after `/countersign`, meaning); empty means `adapters.words.admin.HELP_EXAMPLES`."""

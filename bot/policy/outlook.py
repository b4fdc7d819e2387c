"""What the admins are told of how an MCP tool's calls will be decided once its definition is accepted.

Plain values, computed by `bot.admin.outlook.outlook` and worded by each adapter
(`adapters/words/mcp.py`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Decided(StrEnum):
    """How a call will be decided."""

    CARD = "card"
    """Every call waits for an approver's click."""
    CARD_WHEN = "card_when"
    """A call waits for a click when the rule's condition holds, else runs without a card."""
    NO_CARD = "no_card"
    """Calls run without a card (`auto`)."""
    DENIED = "denied"
    """Calls are refused; nothing runs."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolOutlook:
    """How one accepted tool's calls will be decided in one workspace.

    Attributes:
        tool: the tool's `<server>__<tool>` name.
        decided: card, card when a condition holds, no card, or denied.
        rule: the name the deciding rule is set for (the tool's or `<server>__*`); None when no
            rule decides (the default: a card) or when the read-only hint does.
        condition: the rule's condition, for `CARD_WHEN`.
        by_hint: the server's read-only hint decides (`read-only-hint <server> auto`).
        channels_differ: some channel has its own rule for the tool or its server.
    """

    tool: str
    decided: Decided
    rule: str | None = None
    condition: str | None = None
    by_hint: bool = False
    channels_differ: bool = False

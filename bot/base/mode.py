"""The three things that can happen to a tool call."""

from __future__ import annotations

from enum import StrEnum


class Mode(StrEnum):
    """What happens to a tool call (DESIGN.md admin commands: `auto`, `review`, `deny`)."""

    AUTO = "auto"
    """Runs without a card."""
    REVIEW = "review"
    """Waits for an approver's decision."""
    DENY = "deny"
    """Never runs; the model is told it was rejected by policy."""

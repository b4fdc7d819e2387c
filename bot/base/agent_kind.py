"""Which agent answers in a channel: the ReAct agent or the supervisor with subagents."""

from __future__ import annotations

from enum import StrEnum


class AgentKind(StrEnum):
    """The two agents (DESIGN.md "Agents"); an admin picks one per channel or workspace."""

    REACT = "react"
    """One ReAct graph with the review gate (the default)."""
    SUBAGENTS = "subagents"
    """A supervisor ReAct graph whose tools are subagents, each a ReAct graph with the gate."""

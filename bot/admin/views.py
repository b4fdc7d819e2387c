"""What admin commands answer: structured results that each adapter words and formats."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bot.agents.kind import AgentKind
from bot.approvals.config import ApproverRule, CardsSetting, ConversationScope
from bot.approvals.mode import Mode
from bot.audit import AuditEntry


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolLine:
    """One tool in `show`: its effective mode, condition, and where the rule comes from.

    Attributes:
        source: `built-in`, `workspace` or `channel`.
    """

    tool: str
    mode: Mode
    condition: str | None
    source: str
    quorum: int
    self_approval: bool
    expiry_s: int | None
    approvers: tuple[ApproverRule, ...]
    """Empty: the default (the requester and the workspace's admins)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicyView:
    """`show`: the effective policy for one channel."""

    channel_id: str | None
    tools: tuple[ToolLine, ...]
    workspace_approvers: tuple[ApproverRule, ...]
    admins: tuple[str, ...]
    quorum: int
    self_approval: bool
    expiry_s: int | None
    cards: CardsSetting
    scope: ConversationScope | None
    agent: AgentKind
    agent_source: str
    """Where the agent setting comes from: `channel`, `workspace` or `default` (COUNTERSIGN_AGENT)."""
    subagents: tuple[str, ...] = ()
    """The configured subagents' names (shown when the agent is `subagents`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Changed:
    """A configuration change, as recorded in the audit log.

    Attributes:
        setting: e.g. `policy`, `approvers`, `quorum`.
        tool: the tool it concerns, if any.
        channel_id: the channel it concerns, if any.
        before / after: the values (None: not set / removed).
        changed: False when the command changed nothing (e.g. adding an existing approver).
    """

    setting: str
    tool: str | None
    channel_id: str | None
    before: Any
    after: Any
    changed: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditPage:
    """`audit`: the newest matching rows, newest first."""

    entries: tuple[AuditEntry, ...]
    tool: str | None
    user_id: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class HelpPage:
    """`help`: the subcommands and the registered tools."""

    tools: tuple[str, ...]


Reply = PolicyView | Changed | AuditPage | HelpPage

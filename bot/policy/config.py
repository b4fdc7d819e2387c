"""What admins configured for one workspace: a snapshot read from PostgreSQL.

Resolution rules (DESIGN.md "Admin commands"): a channel's setting beats the workspace's, which
beats the tool's built-in default; for per-tool settings, the tool's value beats the
workspace-wide one. An MCP tool's own setting (in the channel, else the workspace) beats its
server's `<server>__*` setting (in the channel, else the workspace), which beats the
workspace-wide one (docs/decisions/0045-server-wide-mcp-rules.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from bot.base.agent_kind import AgentKind
from bot.base.mode import Mode
from bot.reviews.escalation.rules import EscalationRule
from bot.tools.server_wide import pattern_server, server_patterns

ALL = ""
"""The empty channel id or tool name: "not narrowed" (the whole workspace, every tool)."""


class ApproverKind(StrEnum):
    """What an approver entry names."""

    USER = "user"
    ROLE = "role"
    """A Discord role."""
    GROUP = "group"
    """A Slack user group."""


class CardRouting(StrEnum):
    """Where approval cards are posted."""

    HERE = "here"
    """In the conversation (default)."""
    CHANNEL = "channel"
    """In one approvals channel; the conversation gets a line with a link."""
    DM = "dm"
    """In each listed approver's DMs; the conversation gets a line saying so."""


class ConversationScope(StrEnum):
    """How messages map to conversations in a channel."""

    CHANNEL = "channel"
    """One conversation per channel."""
    THREAD = "thread"
    """One conversation per thread (ticket)."""


class SettingKey(StrEnum):
    """Scalar settings (the `settings` table's `key`)."""

    QUORUM = "quorum"
    SELF_APPROVAL = "self_approval"
    EXPIRY_S = "expiry_s"
    CARDS = "cards"
    SCOPE = "scope"
    AGENT = "agent"
    READ_ONLY_AUTO = "read_only_auto"
    """For a `<server>__*`: True when the server's read-only hint makes a call `auto` (`read-only-hint`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolRule:
    """An admin's rule for a tool, workspace-wide (`channel_id` = "") or for one channel.

    Attributes:
        tool_name: the tool, or `<server>__*` for every tool of an MCP server.
        from_hint: the rule is no admin's rule but the server's read-only hint, which an admin let
            count for this server (`bot.policy.review.rule_here`); never stored.
    """

    tool_name: str
    mode: Mode
    condition: str | None = None
    channel_id: str = ALL
    updated_by: str = ""
    from_hint: bool = False

    @property
    def server_wide(self) -> bool:
        """Whether the rule is its server's (`<server>__*`) rather than the tool's own."""
        return pattern_server(self.tool_name) is not None


@dataclass(frozen=True, slots=True, kw_only=True)
class TrustSetting:
    """An admin's trust setting for one tool, workspace-wide (`channel_id` "") or in one channel.

    Attributes:
        tool_name: the tool.
        max_s: the longest a grant may last, in seconds; 0 in a channel: no trust there, even
            when the workspace allows it.
        matching: the argument names whose values a grant binds; empty: every argument.
        channel_id: the channel, or "" for the workspace.
        updated_by: who set it.
    """

    tool_name: str
    max_s: int
    matching: tuple[str, ...] = ()
    channel_id: str = ALL
    updated_by: str = ""

    @property
    def enabled(self) -> bool:
        """Whether a card may offer trust under this setting (False: switched off here)."""
        return self.max_s > 0


@dataclass(frozen=True, slots=True, kw_only=True)
class ApproverRule:
    """One approver entry, for every tool (`tool_name` = "") or one tool."""

    kind: ApproverKind
    subject_id: str
    tool_name: str = ALL


@dataclass(frozen=True, slots=True, kw_only=True)
class CardsSetting:
    """Card routing: where, and the approvals channel for `CHANNEL`."""

    routing: CardRouting = CardRouting.HERE
    channel_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkspaceConfig:
    """Everything configured for one `(platform, workspace)`.

    Attributes:
        rules: tool rules keyed by `(channel_id, tool_name)`.
        approvers: approver entries.
        admins: bot admins' user ids (besides the platform's own admins).
        settings: scalar values keyed by `(channel_id, tool_name, key)`.
        trust: trust settings keyed by `(channel_id, tool_name)` (docs/decisions/0022).
        escalations: each tool's escalation, by tool name.
    """

    platform: str
    workspace_id: str
    rules: dict[tuple[str, str], ToolRule] = field(default_factory=dict)
    approvers: tuple[ApproverRule, ...] = ()
    admins: frozenset[str] = frozenset()
    settings: dict[tuple[str, str, str], Any] = field(default_factory=dict)
    trust: dict[tuple[str, str], TrustSetting] = field(default_factory=dict)
    escalations: dict[str, EscalationRule] = field(default_factory=dict)

    def rule_for(self, tool_name: str, channel_id: str) -> ToolRule | None:
        """The rule in force for the tool in the channel, or None (its built-in default).

        The tool's own rule (the channel's, else the workspace's), else its MCP server's
        `<server>__*` rule (the channel's, else the workspace's). The read-only hint is not
        looked at here (`bot.policy.review.rule_here`).
        """
        for name in (tool_name, *server_patterns(tool_name)):
            rule = self.rules.get((channel_id, name)) or self.rules.get((ALL, name))
            if rule is not None:
                return rule
        return None

    def trust_for(self, tool_name: str, channel_id: str) -> TrustSetting | None:
        """The trust setting in force for the tool in the channel: the channel's, else the workspace's.

        The tool's own setting, else its MCP server's (`<server>__*`), in that order. None when
        there is none, or when the one in force is `off` (a channel that switched it off).
        """
        for name in (tool_name, *server_patterns(tool_name)):
            setting = self.trust.get((channel_id, name)) or self.trust.get((ALL, name))
            if setting is not None:
                return setting if setting.enabled else None
        return None

    def approvers_for(self, tool_name: str) -> tuple[ApproverRule, ...]:
        """The tool's own approver list if it has one, else its MCP server's, else the workspace-wide list."""
        for name in (tool_name, *server_patterns(tool_name)):
            own = tuple(a for a in self.approvers if a.tool_name == name)
            if own:
                return own
        return tuple(a for a in self.approvers if a.tool_name == ALL)

    def _tool_setting(self, tool_name: str, key: SettingKey) -> Any:
        names = (tool_name, *server_patterns(tool_name)) if tool_name else ()
        for scope in (*((ALL, name, key.value) for name in names), (ALL, ALL, key.value)):
            if scope in self.settings:
                return self.settings[scope]
        return None

    def quorum(self, tool_name: str) -> int:
        """Distinct approvals a call of this tool needs (default 1)."""
        value = self._tool_setting(tool_name, SettingKey.QUORUM)
        return int(value) if value else 1

    def self_approval(self, tool_name: str) -> bool:
        """Whether a requester may approve their own call (default yes)."""
        value = self._tool_setting(tool_name, SettingKey.SELF_APPROVAL)
        return True if value is None else bool(value)

    def expiry_s(self, tool_name: str) -> int | None:
        """Seconds a card waits before it expires; None (or 0) means never."""
        value = self._tool_setting(tool_name, SettingKey.EXPIRY_S)
        return int(value) if value else None

    def escalation(self, tool_name: str) -> EscalationRule | None:
        """The tool's escalation (`/countersign escalate`), else its MCP server's (`<server>__*`), or None."""
        for name in (tool_name, *server_patterns(tool_name)):
            rule = self.escalations.get(name)
            if rule is not None:
                return rule
        return None

    def read_only_auto(self, tool_name: str) -> bool:
        """Whether an admin let the read-only hint of this tool's MCP server mean `auto` (default no)."""
        for pattern in server_patterns(tool_name):
            value = self.settings.get((ALL, pattern, SettingKey.READ_ONLY_AUTO.value))
            if value is not None:
                return bool(value)
        return False

    def cards(self) -> CardsSetting:
        """Where cards go (workspace-wide)."""
        value = self.settings.get((ALL, ALL, SettingKey.CARDS.value))
        if not isinstance(value, dict):
            return CardsSetting()
        return CardsSetting(routing=CardRouting(value.get("routing", "here")), channel_id=value.get("channel_id"))

    def scope(self, channel_id: str) -> ConversationScope | None:
        """The channel's conversation scope, else the workspace's, else None (platform default)."""
        for key in ((channel_id, ALL, SettingKey.SCOPE.value), (ALL, ALL, SettingKey.SCOPE.value)):
            value = self.settings.get(key)
            if value:
                return ConversationScope(value)
        return None

    def agent(self, channel_id: str) -> AgentKind | None:
        """The channel's agent, else the workspace's, else None (`COUNTERSIGN_AGENT` decides)."""
        for key in ((channel_id, ALL, SettingKey.AGENT.value), (ALL, ALL, SettingKey.AGENT.value)):
            value = self.settings.get(key)
            if value:
                return AgentKind(value)
        return None

"""What admin commands answer: structured results that each adapter words and formats."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from bot.audit.entries import AuditEntry
from bot.base.agent_kind import AgentKind
from bot.base.mode import Mode
from bot.policy.config import ApproverRule, CardsSetting, ConversationScope, ToolRule, TrustSetting
from bot.policy.outlook import ToolOutlook
from bot.reviews.escalation.rules import EscalationRule
from bot.reviews.trust.grants import TrustGrant
from bot.tools.mcp.pins import DefinitionChange


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolLine:
    """One tool in `show`: its effective mode, condition, and where the rule comes from.

    Attributes:
        source: `built-in`, `workspace` or `channel` (the tool's own rule), `server` or
            `server-channel` (its MCP server's `<server>__*` rule, workspace-wide or the
            channel's), or `hint` (its server's read-only hint, which an admin let count).
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
    trust: TrustSetting | None = None
    """The trust setting in force for the tool there (docs/decisions/0022); None: cards offer no trust."""
    escalation: EscalationRule | None = None
    """Where the tool's undecided cards escalate, and after how long (`/countersign escalate`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerLine:
    """One configured MCP server in `show`: the settings made for all its tools at once (`<server>__*`).

    Each applies to a tool of the server that has no setting of its own
    (docs/decisions/0045-server-wide-mcp-rules.md). None: not set for the server.

    Attributes:
        pattern: `<server>__*`.
        connected: whether its session is live now (its tools are offered only then).
        rule: its policy rule in force in the channel shown (the channel's, else the workspace's).
        expiry_s: 0 for `off`.
        trust: its trust setting in force there, `off` (max_s 0) included.
        read_only_auto: whether its read-only hint makes a call `auto` (`read-only-hint`).
    """

    pattern: str
    connected: bool
    rule: ToolRule | None = None
    approvers: tuple[ApproverRule, ...] = ()
    quorum: int | None = None
    self_approval: bool | None = None
    expiry_s: int | None = None
    trust: TrustSetting | None = None
    escalation: EscalationRule | None = None
    read_only_auto: bool = False

    @property
    def configured(self) -> bool:
        """Whether anything is set for the server."""
        settings = (self.rule, self.quorum, self.self_approval, self.expiry_s, self.trust, self.escalation)
        return self.read_only_auto or bool(self.approvers) or any(value is not None for value in settings)


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
    servers: tuple[ServerLine, ...] = ()
    """Every configured MCP server, connected or not, with its server-wide settings."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Changed:
    """A configuration change, as recorded in the audit log.

    Attributes:
        setting: e.g. `policy`, `approvers`, `quorum`.
        tool: the tool it concerns, if any.
        channel_id: the channel it concerns, if any.
        before / after: the values (None: not set / removed).
        changed: False when the command changed nothing (e.g. adding an existing approver).
        offline: the MCP server (its name in tool names) of the tool or `<server>__*` the
            setting names, when it is not connected now: saved all the same, it applies once
            the server is back.
    """

    setting: str
    tool: str | None
    channel_id: str | None
    before: Any
    after: Any
    changed: bool = True
    offline: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditPage:
    """`audit`: the newest matching rows, newest first."""

    entries: tuple[AuditEntry, ...]
    tool: str | None
    user_id: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextView:
    """`context`: what the model sees of one conversation.

    Attributes:
        thread_id: the conversation (its LangGraph thread id).
        exists: whether the conversation has state at all (False: the bot never ran there;
            every other field is then empty or zero).
        agent: the agent whose graph holds the state (None before the first turn).
        summary: the running summary of the turns folded out of the history ("" for none).
        messages: the stored messages, sent to the model verbatim while they fit.
        tokens: the estimate of what the next model call gets of them (history and summary,
            scaled by the model's own count; `bot.turns.context.window.view_tokens`).
        budget_tokens: the window (`COUNTERSIGN_CONTEXT_TOKENS`); above it, the next call folds
            the oldest turns into the summary.
    """

    thread_id: str
    exists: bool
    agent: AgentKind | None = None
    summary: str = ""
    messages: int = 0
    tokens: int = 0
    budget_tokens: int = 0

    @property
    def is_empty(self) -> bool:
        """Whether the model's view holds nothing: no message and no summary."""
        return self.messages == 0 and not self.summary


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextReset:
    """`context reset`: the conversation's view before it was cleared.

    Attributes:
        before: what the model saw until now.
        changed: False when there was nothing to clear (no state, or an empty one); nothing
            was written and nothing audited.
    """

    before: ContextView
    changed: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class StopRequested:
    """`stop`, or a Stop button: the turn was stopped (docs/decisions/0021); it ends at its next step.

    Attributes:
        thread_id: the conversation.
        requester_id: who started the turn (None: unknown).
        paused: the turn was waiting for cards (some of its calls, at least), which are now closed
            as stopped.
        cards_closed: how many waiting cards were closed.
    """

    thread_id: str
    requester_id: str | None
    paused: bool
    cards_closed: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class HelpPage:
    """`help`: the subcommands, the tools the bot ships or the operator added, and the MCP servers.

    Attributes:
        tools: the fixed tools' names (built-in and operator tools), in registration order.
        servers: the configured MCP servers' names as tool names start with them (`<server>__`),
            in file order; their tools are listed by `show` and `mcp`, not here, so that help
            stays one message however many tools the servers offer.
    """

    tools: tuple[str, ...]
    servers: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class TrustLine:
    """One live trust grant in `trust list`.

    Attributes:
        grant: the grant.
        applies: whether the setting in force now still lets it cover calls (False after an
            admin narrowed or removed the setting: it stays live but covers nothing).
        free: the tool's arguments the grant does not bind, in the tool's order: any value of
            them is trusted (empty when it binds every argument).
    """

    grant: TrustGrant
    applies: bool = True
    free: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class TrustList:
    """`trust list`: live trust grants, soonest to end first.

    Attributes:
        grants: the grants shown.
        channel_id: the channel asked about, or None for the whole workspace.
        everyone: True for an admin (every grant); False: only the asker's own (granted by
            them, or covering their calls).
    """

    grants: tuple[TrustLine, ...]
    channel_id: str | None
    everyone: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class TrustRevoked:
    """`trust revoke`: the grant as it was ended (recorded in the audit log)."""

    grant: TrustGrant


@dataclass(frozen=True, slots=True, kw_only=True)
class McpToolLine:
    """One offered tool of an MCP server in `mcp`.

    Attributes:
        name: its `<server>__<tool>` name.
        hints: the server's hints ("read-only", "destructive", ...), as the card shows them.
    """

    name: str
    hints: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class McpHeldLine:
    """One held tool in `mcp`: its calls are refused until an admin accepts it.

    Attributes:
        name: its `<server>__<tool>` name.
        change: what differs from its pin (new tools included), bounded.
        held_at: when it was held with this definition.
        told: whether the admins' message about it was sent (claimed).
    """

    name: str
    change: DefinitionChange
    held_at: datetime
    told: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class McpLeftOutLine:
    """One tool of an MCP server in `mcp` that is left out: it cannot be offered, the server's others are.

    Attributes:
        name: its `<server>__<tool>` name, or `#<position> of <server key>` when it has no usable name
            (the server's text, not escaped).
        reason: why, in words (e.g. "it has no inputSchema", "its name has 70 characters, over
            Gemini's 64"); may quote the server's values.
    """

    name: str
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class McpServerLine:
    """One configured MCP server in `mcp`.

    Attributes:
        server: its name in its tools' names (`safe_server_name`), as every command takes it.
        key: its key in the file (differs from `server` when the key holds other characters).
        state: `connecting`, `connected`, `retrying` or `stopped`.
        reason: why it is not connected (its last failure), else "".
        protocol_version: the negotiated MCP version while connected, else "".
        tools: the tools offered now.
        held: the held tools, as stored (shared by every worker and replica).
        pins_unreadable: the pin store could not be read (`held` is then empty).
        left_out: the tools it lists that cannot be offered, as this process last listed them.
        left_out_by_file: how many tools it lists that its entry's `includeTools` /
            `excludeTools` leave out.
        over_limit: its tools left out because the model is offered at most `max_tools` tools,
            in its order (not in `tools`).
        max_tools: that limit (`COUNTERSIGN_MAX_TOOLS`).
    """

    server: str
    key: str
    state: str
    reason: str
    protocol_version: str
    tools: tuple[McpToolLine, ...]
    held: tuple[McpHeldLine, ...]
    pins_unreadable: bool = False
    left_out: tuple[McpLeftOutLine, ...] = ()
    left_out_by_file: int = 0
    over_limit: tuple[str, ...] = ()
    max_tools: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class McpOverview:
    """`mcp`: every configured server (empty: `COUNTERSIGN_MCP_CONFIG` is not set)."""

    servers: tuple[McpServerLine, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class McpAccepted:
    """`mcp accept`: the held definitions now pinned (audited, with this diff), in tool name order.

    Attributes:
        server: the server, named as in its tools' names (`safe_server_name`).
        changes: what each accepted definition changed.
        after: how each accepted tool's calls will be decided from now on in the admin's
            workspace (`bot.admin.outlook`), in the order of `changes`.
    """

    server: str
    changes: tuple[DefinitionChange, ...]
    after: tuple[ToolOutlook, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class McpAcceptRefused:
    """`mcp accept` that pinned nothing.

    Attributes:
        server: the server, named as in its tools' names (`safe_server_name`).
        reason: `nothing_held`, `changed_again` (the server lists a definition the admins were
            not shown: it is held, and they are told) or `stale` (the holds changed meanwhile).
        tools: the tools concerned, sorted.
    """

    server: str
    reason: str
    tools: tuple[str, ...] = ()


Reply = (
    PolicyView
    | Changed
    | AuditPage
    | HelpPage
    | ContextView
    | ContextReset
    | StopRequested
    | TrustList
    | TrustRevoked
    | McpOverview
    | McpAccepted
    | McpAcceptRefused
)

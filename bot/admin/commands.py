"""The `/countersign` subcommands as typed values, whatever platform they came from.

Slack sends words (`bot.admin.parse`), Discord sends typed options; both become one of these.
Ids are platform ids as strings; `channel_id=None` means "the whole workspace".
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.base.agent_kind import AgentKind
from bot.base.mode import Mode
from bot.policy.config import ApproverKind, CardRouting, ConversationScope
from bot.reviews.escalation.rules import EscalationTarget


@dataclass(frozen=True, slots=True, kw_only=True)
class Help:
    """`help`."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Show:
    """`show [in #channel]`: the effective policy (for the given channel, else this one)."""

    channel_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SetPolicy:
    """`policy <tool> auto|review|deny|default [in #channel] [when <condition>]`.

    Attributes:
        mode: None for `default` (remove the rule; the built-in default applies again).
    """

    tool: str
    mode: Mode | None
    channel_id: str | None = None
    condition: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ChangeApprovers:
    """`approvers add|remove <user|role|group> [for <tool>]`."""

    add: bool
    kind: ApproverKind
    subject_id: str
    tool: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ChangeAdmins:
    """`admins add|remove <user>`."""

    add: bool
    user_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SetQuorum:
    """`quorum <tool> <n>`."""

    tool: str
    count: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SetSelfApproval:
    """`self-approval on|off [for <tool>]`."""

    allowed: bool
    tool: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SetExpiry:
    """`expiry <duration>|off [for <tool>]`; `seconds=None` is `off`."""

    seconds: int | None
    tool: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SetCards:
    """`cards here|dm|channel <#channel>`."""

    routing: CardRouting
    channel_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SetEscalation:
    """`escalate <tool> after <duration> to <target>`, or `escalate <tool> off`.

    Attributes:
        tool: the tool whose undecided cards escalate.
        after_s: seconds from the moment a review opens; None for `off` (remove it).
        target: where the card goes; None exactly when `after_s` is None.
    """

    tool: str
    after_s: int | None
    target: EscalationTarget | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SetReadOnlyHint:
    """`read-only-hint <server> auto|review`: whether an MCP server's read-only hint makes a call `auto`.

    Off (`review`) by default: a server's hints are only as trustworthy as the server
    (docs/decisions/0045-server-wide-mcp-rules.md).

    Attributes:
        server: the server's name as in its tools' names (`<server>__<tool>`).
        auto: True: a call of a tool the server says is read-only (and not destructive) runs
            without review unless the tool has its own rule or the server's rule denies it.
    """

    server: str
    auto: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class SetScope:
    """`scope channel|thread [in #channel]`."""

    scope: ConversationScope
    channel_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SetAgent:
    """`agent react|subagents|default [in #channel]`: which agent answers there (workspace-wide without `in`).

    Attributes:
        agent: None for `default`: remove the setting, so the channel follows the workspace's
            and the workspace follows `COUNTERSIGN_AGENT`.
    """

    agent: AgentKind | None
    channel_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ShowContext:
    """`context`: this conversation's running summary and window size.

    The conversation is where the command was typed (the adapter says which; on Slack a link
    may name the thread), never a value typed by the user.
    """


@dataclass(frozen=True, slots=True, kw_only=True)
class ResetContext:
    """`context reset`: start the model's view of this conversation afresh (admins)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StopTurn:
    """`stop`: stop the running turn of this conversation (its requester or an admin; docs/decisions/0021).

    The conversation is where the command was typed (on Slack a link may name the thread), as
    for `context`.
    """


@dataclass(frozen=True, slots=True, kw_only=True)
class SetTrust:
    """`trust <tool> up-to <duration> [matching <arg>,...] [in #channel]`, `trust <tool> off|default [in #channel]`.

    Attributes:
        up_to_s: the longest a trust grant may last, in seconds; 0 for `off` (no trust here,
            also where the workspace allows it); None for `default` (remove this level's
            setting: a channel follows the workspace again).
        matching: the arguments whose values a grant binds; empty: every argument.
    """

    tool: str
    up_to_s: int | None
    matching: tuple[str, ...] = ()
    channel_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ListTrust:
    """`trust list [in #channel]`: live trust grants (admins see all; others those they granted or asked for)."""

    channel_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RevokeTrust:
    """`trust revoke <id>`: end a live trust grant now (admins, its approver, its requester)."""

    grant_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ShowAudit:
    """`audit [tool] [user] [limit n]`."""

    tool: str | None = None
    user_id: str | None = None
    limit: int = 20


@dataclass(frozen=True, slots=True, kw_only=True)
class ShowMcp:
    """`mcp`: the MCP servers with their state, tools, hints and held tools (admins)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AcceptMcp:
    """`mcp accept <server>`: pin a server's held tool definitions, as the admins were shown them (admins).

    Attributes:
        server: the server's key as typed (checked against the configured servers when executed).
    """

    server: str


Command = (
    Help
    | Show
    | SetPolicy
    | ChangeApprovers
    | ChangeAdmins
    | SetQuorum
    | SetSelfApproval
    | SetExpiry
    | SetCards
    | SetEscalation
    | SetReadOnlyHint
    | SetScope
    | SetAgent
    | ShowContext
    | ResetContext
    | StopTurn
    | ShowAudit
    | SetTrust
    | ListTrust
    | RevokeTrust
    | ShowMcp
    | AcceptMcp
)

READ_ONLY = (Help, Show, ShowContext)
"""Commands anyone may use; everything else (including `audit`, which shows arguments) is for admins."""

A_PARTY_MAY = (ListTrust, RevokeTrust)
"""Commands a trust grant's parties may use on it (its approver and its requester); admins on every grant."""

IN_A_CONVERSATION = (ShowContext, ResetContext, StopTurn)
"""Commands about the conversation they are typed in (`AdminService.execute` needs it)."""

SUBCOMMANDS: dict[type, str] = {
    Help: "help",
    Show: "show",
    SetPolicy: "policy",
    ChangeApprovers: "approvers",
    ChangeAdmins: "admins",
    SetQuorum: "quorum",
    SetSelfApproval: "self-approval",
    SetExpiry: "expiry",
    SetCards: "cards",
    SetEscalation: "escalate",
    SetReadOnlyHint: "read-only-hint",
    SetScope: "scope",
    SetAgent: "agent",
    ShowContext: "context",
    ResetContext: "context reset",
    StopTurn: "stop",
    ShowAudit: "audit",
    SetTrust: "trust",
    ListTrust: "trust list",
    RevokeTrust: "trust revoke",
    ShowMcp: "mcp",
    AcceptMcp: "mcp accept",
}
"""Each command's subcommand words, as people type them (audit rows name refused commands by them)."""

"""Executing `/countersign` commands: permission, validation, the audited change, the answer.

Only admins may change something or read the audit log (it shows arguments): the platform's
workspace admins (Slack admins and owners, Discord Manage Server) and bot admins. `help`,
`show` and `context` are for everyone; `stop` for the requester of the running turn and
admins; `trust list` and `trust revoke` also for the approver who granted a trust and the person
it trusts, on that trust. A refused or invalid command changes nothing; refusals are audited.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

from langchain_core.utils.json_schema import dereference_refs
from pydantic import BaseModel

from bot.admin.commands import (
    A_PARTY_MAY,
    IN_A_CONVERSATION,
    READ_ONLY,
    SUBCOMMANDS,
    AcceptMcp,
    ChangeAdmins,
    ChangeApprovers,
    Command,
    Help,
    ListTrust,
    ResetContext,
    RevokeTrust,
    SetAgent,
    SetCards,
    SetEscalation,
    SetExpiry,
    SetPolicy,
    SetQuorum,
    SetReadOnlyHint,
    SetScope,
    SetSelfApproval,
    SetTrust,
    Show,
    ShowAudit,
    ShowContext,
    ShowMcp,
    StopTurn,
)
from bot.admin.notices import AdminChannels
from bot.admin.outlook import outlook
from bot.admin.parse import CommandError
from bot.admin.views import (
    AuditPage,
    Changed,
    ContextReset,
    ContextView,
    HelpPage,
    McpAccepted,
    McpAcceptRefused,
    McpHeldLine,
    McpLeftOutLine,
    McpOverview,
    McpServerLine,
    McpToolLine,
    PolicyView,
    Reply,
    ServerLine,
    StopRequested,
    ToolLine,
    TrustLine,
    TrustList,
    TrustRevoked,
)
from bot.audit.entries import AuditEntry, AuditKind
from bot.audit.store import AuditStore
from bot.base.agent_kind import AgentKind
from bot.base.conversation import DM_WORKSPACE, Actor, ConversationRef
from bot.base.errors import ConversationBusyError, NotPermittedError
from bot.base.mode import Mode
from bot.policy.conditions import compile_condition, sample_arguments, strip_quotes
from bot.policy.config import ALL, ApproverRule, SettingKey, TrustSetting, WorkspaceConfig
from bot.policy.review import rule_here
from bot.policy.store import ConfigStore
from bot.reviews.authorization import Directory, is_workspace_admin
from bot.reviews.escalation.rules import EscalationRule
from bot.reviews.shown import arrange, leaves_free
from bot.reviews.trust.grants import TrustGrant, still_fits
from bot.reviews.trust.store import TrustStore
from bot.tools.mcp.config import safe_server_name
from bot.tools.mcp.pins import AcceptRefused, DuplicateToolError
from bot.tools.mcp.pins.diff import describe_change
from bot.tools.mcp.servers import McpServers
from bot.tools.registry import ToolRegistry, ToolSpec
from bot.tools.server_wide import pattern_server, server_pattern, tool_server

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class _Named:
    """What a command's tool name names: a tool (`spec`), or every tool of an MCP server (`<server>__*`).

    Attributes:
        name: as stored: the tool's name or `<server>__*`.
        spec: the tool as offered now, or as last offered while its server is down; None for
            `<server>__*`.
        offline: the MCP server (its name in tool names) when it is not connected now.
    """

    name: str
    spec: ToolSpec | None
    offline: str | None = None


class ContextPort(Protocol):
    """The model's view of conversations, as `context` needs it (`bot.turns.context.keeper.ContextKeeper`)."""

    async def describe(self, conversation: ConversationRef) -> ContextView:
        """What the model sees of `conversation`."""
        ...

    async def reset(self, conversation: ConversationRef) -> ContextReset:
        """Empty the model's view of `conversation`.

        Raises:
            ConversationBusyError: a card waits or a turn runs there; nothing was changed.
        """
        ...


class StopPort(Protocol):
    """Stopping a conversation's running turn, as `stop` needs it (`bot.turns.stop.stopper.TurnStopper`)."""

    async def stop(self, actor: Actor, *, conversation: ConversationRef | None = None) -> StopRequested:
        """Stop the active turn of `conversation` for `actor` (its requester or an admin).

        Raises:
            NothingToStopError, AlreadyStoppedError, NotPermittedError: nothing was changed.
        """
        ...


class AdminService:
    """The admin use case.

    Args:
        config: the configuration tables.
        audit: the audit log.
        grants: the trust grants (`trust list`, `trust revoke`; None: those are refused).
        registry: the tools (names, arguments and built-in defaults).
        directory_for: the platform directory (who is an admin) by platform name.
        default_agent: the agent of channels without a setting (`COUNTERSIGN_AGENT`), for `show`.
        subagents: the configured subagents' names, for `show`.
        contexts: the conversations' graph state, for `context` (None: `context` is refused).
        stops: stops a conversation's running turn, for `stop` (None: `stop` is refused).
        mcp: the MCP servers, for `mcp` and `mcp accept` (None: no `COUNTERSIGN_MCP_CONFIG`).
        admin_channels: who governs the MCP servers (`AdminChannels.governs`; None: every
            workspace's admins).
    """

    def __init__(
        self,
        *,
        config: ConfigStore,
        audit: AuditStore,
        registry: ToolRegistry,
        directory_for: Callable[[str], Directory],
        grants: TrustStore | None = None,
        default_agent: AgentKind = AgentKind.REACT,
        subagents: tuple[str, ...] = (),
        contexts: ContextPort | None = None,
        stops: StopPort | None = None,
        mcp: McpServers | None = None,
        admin_channels: AdminChannels | None = None,
    ) -> None:
        self._config = config
        self._audit = audit
        self._grants = grants
        self._registry = registry
        self._directory_for = directory_for
        self._default_agent = default_agent
        self._subagents = subagents
        self._contexts = contexts
        self._stops = stops
        self._mcp = mcp
        self._admin_channels = admin_channels

    async def execute(
        self,
        actor: Actor,
        command: Command,
        *,
        here: str | None = None,
        conversation: ConversationRef | None = None,
    ) -> Reply:
        """Run one command for `actor`.

        Args:
            actor: the authenticated person who typed it.
            command: the parsed command.
            here: the channel the command was typed in (the default for `show`).
            conversation: the conversation the command is about (`context`), as the adapter
                derives it from the platform's payload, like a message's.

        Raises:
            NotPermittedError: `not_an_admin` (audited), `not_governing` (`mcp accept` by an
                admin of a workspace without an admins' channel when the operator named some;
                audited), `no_workspace` (a setting in a
                Discord DM), `dm_reset` (`context reset` in a Discord DM, where nobody is an
                admin) or `not_a_party` (`trust revoke` of a grant by someone who is neither
                an admin nor its approver or requester; audited); for `stop`,
                `not_requester_or_admin` or `other_workspace` (audited).
            ConversationBusyError: `context reset` while a card waits or a turn runs (audited).
            NothingToStopError, AlreadyStoppedError: `stop` with nothing running, or twice.
            CommandError: an unknown tool, an invalid condition, a setting that cannot work,
                `context` without a conversation, a trust id that names no live grant here.
        """
        config = await self._config.load(actor.platform, actor.workspace_id)
        if isinstance(command, Help):
            servers = tuple(self._registry.servers())
            fixed = (spec.name for spec in self._registry if spec.mcp is None)
            return HelpPage(tools=tuple(fixed), servers=servers)
        if isinstance(command, Show):
            return self._show(config, command.channel_id or here)
        if isinstance(command, ShowContext):
            contexts, about = self._context_of(conversation)
            return await contexts.describe(about)
        if isinstance(command, StopTurn):
            # The requester may stop their own turn; the stopper checks who may (and audits).
            if conversation is None or self._stops is None:
                raise CommandError("`stop` is not available here")
            return await self._stops.stop(actor, conversation=conversation)
        if actor.workspace_id == DM_WORKSPACE:
            raise NotPermittedError("dm_reset" if isinstance(command, ResetContext) else "no_workspace")
        admin = await is_workspace_admin(actor, config, self._directory_for(actor.platform))
        if isinstance(command, A_PARTY_MAY):
            return await self._trust_grants(actor, command, config, admin=admin)
        if not admin:
            thread_id = conversation.thread_id if isinstance(command, IN_A_CONVERSATION) and conversation else None
            await self._refused(actor, command, thread_id=thread_id)
            raise NotPermittedError("not_an_admin")
        if isinstance(command, ResetContext):
            contexts, about = self._context_of(conversation)
            return await self._reset(actor, about, contexts)
        if isinstance(command, ShowMcp):
            return await self._mcp_overview()
        if isinstance(command, AcceptMcp):
            return await self._mcp_accept(actor, command, config)
        if isinstance(command, ShowAudit):
            entries = await self._audit.recent(
                actor.workspace_id, limit=command.limit, tool_name=command.tool, actor_id=command.user_id
            )
            shown = tuple(
                replace(
                    entry,
                    proposed_args=self._in_tool_order(entry.tool_name, entry.proposed_args),
                    final_args=self._in_tool_order(entry.tool_name, entry.final_args),
                )
                for entry in entries
            )
            return AuditPage(entries=shown, tool=command.tool, user_id=command.user_id)
        return await self._change(actor, command)

    async def _mcp_overview(self) -> McpOverview:
        """`mcp`: each server's connection, offered tools with hints, held tools as stored, and tools left out.

        Left out: those it lists unusably (each with why), those its entry's `includeTools` /
        `excludeTools` leave out (counted), and those over the model's limit of tools (named).
        """
        if self._mcp is None:
            return McpOverview(servers=())
        lines = []
        over_limit = self._registry.over_limit()
        for key, status in self._mcp.statuses().items():
            over = over_limit.get(key, ())
            held: tuple[McpHeldLine, ...] = ()
            unreadable = False
            try:
                pins = await self._mcp.pins(key)
                held = tuple(
                    McpHeldLine(
                        name=hold.definition.registry_name,
                        change=describe_change(pins.pins.get(tool), hold.definition),
                        held_at=hold.held_at,
                        told=hold.noticed,
                    )
                    for tool, hold in sorted(pins.holds.items())
                )
            except Exception:
                log.exception("/countersign mcp: the pins of %s could not be read", key)
                unreadable = True
            tools = tuple(
                McpToolLine(name=spec.name, hints=spec.mcp.hints.words() if spec.mcp else ())
                for spec in self._mcp.offered(key)
                if spec.name not in over
            )
            lines.append(
                McpServerLine(
                    server=safe_server_name(key),
                    key=key,
                    state=status.state.value,
                    reason=status.reason,
                    protocol_version=status.protocol_version,
                    tools=tools,
                    held=held,
                    pins_unreadable=unreadable,
                    left_out=tuple(
                        McpLeftOutLine(name=name, reason=reason) for name, reason in self._mcp.left_out(key).items()
                    ),
                    left_out_by_file=self._mcp.left_out_by_file(key),
                    over_limit=over,
                    max_tools=self._registry.max_tools,
                )
            )
        return McpOverview(servers=tuple(lines))

    async def _mcp_accept(
        self, actor: Actor, command: AcceptMcp, config: WorkspaceConfig
    ) -> McpAccepted | McpAcceptRefused:
        """`mcp accept <server>`: pin what the admins were shown (audited by the pin store), or say why not.

        The reply says how each accepted tool's calls will be decided from now on in `config`'s
        workspace (`bot.admin.outlook`).
        """
        if self._mcp is None:
            raise CommandError("no MCP servers are configured (COUNTERSIGN_MCP_CONFIG)")
        key = self._mcp.key_of(command.server)
        if key is None:
            names = ", ".join(self._mcp.servers())
            raise CommandError(f"unknown MCP server `{command.server}`; the servers are: {names}")
        if self._admin_channels is not None and not self._admin_channels.governs(actor):
            await self._refused(actor, command, outcome="not_governing")
            raise NotPermittedError("not_governing")
        command_name = safe_server_name(key)  # replies name it as commands and tool names do
        try:
            outcome = await self._mcp.accept(key, actor)
        except DuplicateToolError as exc:
            raise CommandError(f"{exc}; nothing can be accepted until it lists each tool once") from None
        if isinstance(outcome, AcceptRefused):
            log.info("mcp accept %s by %s refused: %s", key, actor.user_id, outcome.reason.value)
            return McpAcceptRefused(server=command_name, reason=outcome.reason.value, tools=outcome.tools)
        log.info("mcp accept %s by %s: %d definitions pinned", key, actor.user_id, len(outcome.changes))
        after = tuple(outlook(config, definition) for definition in outcome.definitions)
        return McpAccepted(server=command_name, changes=outcome.changes, after=after)

    async def _change(self, actor: Actor, command: Command) -> Changed:
        if isinstance(command, SetPolicy):
            named = self._tool(command.tool)
            condition = None
            if command.condition is not None:
                spec = named.spec
                # A server-wide condition is checked for its syntax only: its tools' arguments
                # differ, and one that a tool lacks fails closed (review) when evaluated.
                condition = compile_condition(
                    command.condition,
                    spec.argument_names if spec else None,
                    _samples(spec) if spec else None,
                    case_rules=spec.canonical_case if spec else (),
                ).text
            before, after = await self._config.set_rule(
                actor,
                channel_id=command.channel_id or ALL,
                tool_name=named.name,
                mode=command.mode,
                condition=condition,
            )
            was = _rule_words(before.mode, before.condition) if before else None
            now = _rule_words(after.mode, after.condition) if after else None
            return Changed(
                setting="policy",
                tool=named.name,
                channel_id=command.channel_id,
                before=was,
                after=now,
                changed=was != now,
                offline=named.offline,
            )
        if isinstance(command, ChangeApprovers):
            named = self._tool(command.tool) if command.tool else _Named(ALL, None)
            rule = ApproverRule(kind=command.kind, subject_id=command.subject_id, tool_name=named.name)
            changed = await self._config.change_approver(actor, rule, add=command.add)
            return Changed(
                setting="approvers",
                tool=named.name or None,
                channel_id=None,
                before=None if command.add else rule,
                after=rule if command.add else None,
                changed=changed,
                offline=named.offline,
            )
        if isinstance(command, ChangeAdmins):
            changed = await self._config.change_admin(actor, command.user_id, add=command.add)
            return Changed(
                setting="admins",
                tool=None,
                channel_id=None,
                before=None if command.add else command.user_id,
                after=command.user_id if command.add else None,
                changed=changed,
            )
        if isinstance(command, SetQuorum):
            return await self._set(actor, SettingKey.QUORUM, command.count, named=self._tool(command.tool))
        if isinstance(command, SetSelfApproval):
            named = self._tool(command.tool) if command.tool else _Named(ALL, None)
            return await self._set(actor, SettingKey.SELF_APPROVAL, command.allowed, named=named)
        if isinstance(command, SetExpiry):
            named = self._tool(command.tool) if command.tool else _Named(ALL, None)
            # "off" for one tool (or server) must beat a wider expiry, so it is stored as 0 (never).
            value = command.seconds if command.seconds is not None else (0 if named.name else None)
            return await self._set(actor, SettingKey.EXPIRY_S, value, named=named)
        if isinstance(command, SetReadOnlyHint):
            servers = self._registry.servers()
            if pattern_server(_named_as_in_tools(server_pattern(command.server), servers)) not in servers:
                # Listed as this command takes them: `notes`, not `notes__*`.
                which = (
                    f"the servers are: {', '.join(servers)}"
                    if servers
                    else "none is configured (COUNTERSIGN_MCP_CONFIG)"
                )
                raise CommandError(f"`{command.server}` names no configured MCP server; {which}")
            named = self._tool(server_pattern(command.server))
            return await self._set(actor, SettingKey.READ_ONLY_AUTO, True if command.auto else None, named=named)
        if isinstance(command, SetEscalation):
            return await self._set_escalation(actor, command)
        if isinstance(command, SetCards):
            routing = {"routing": command.routing.value, "channel_id": command.channel_id}
            return await self._set(actor, SettingKey.CARDS, routing)
        if isinstance(command, SetScope):
            return await self._set(actor, SettingKey.SCOPE, command.scope.value, channel=command.channel_id or ALL)
        if isinstance(command, SetAgent):
            agent = command.agent.value if command.agent is not None else None
            return await self._set(actor, SettingKey.AGENT, agent, channel=command.channel_id or ALL)
        if isinstance(command, SetTrust):
            return await self._set_trust(actor, command)
        raise CommandError(f"unsupported command {type(command).__name__}")  # pragma: no cover

    async def _set_escalation(self, actor: Actor, command: SetEscalation) -> Changed:
        named = self._tool(command.tool)
        wanted = None
        if command.after_s is not None and command.target is not None:
            wanted = EscalationRule(tool_name=named.name, after_s=command.after_s, target=command.target)
        before, after = await self._config.set_escalation(actor, named.name, wanted)
        return Changed(
            setting="escalation",
            tool=named.name,
            channel_id=None,
            before=before,
            after=after,
            changed=before != after,
            offline=named.offline,
        )

    async def _set(
        self, actor: Actor, key: SettingKey, value: object, *, named: _Named | None = None, channel: str = ALL
    ) -> Changed:
        tool = named.name if named is not None else ALL
        before, after = await self._config.set_setting(actor, key, value, channel_id=channel, tool_name=tool)
        return Changed(
            setting=key.value,
            tool=tool or None,
            channel_id=channel or None,
            before=before,
            after=after,
            changed=before != after,
            offline=named.offline if named is not None else None,
        )

    async def _set_trust(self, actor: Actor, command: SetTrust) -> Changed:
        """`trust <tool> up-to|off|default`: the setting checked against the tool, then saved and audited.

        `off` in a channel is stored (it beats a workspace-wide setting); `off` for the
        workspace, and `default` anywhere, remove the setting at that level.
        """
        named = self._tool(command.tool)
        if named.spec is None and command.matching:
            raise CommandError(
                f"`{named.name}` stands for tools with different arguments, so it cannot bind some of them; "
                "leave out `matching` (a grant then binds every argument), or name one tool"
            )
        arguments = named.spec.argument_names if named.spec is not None else ()
        unknown = [name for name in command.matching if name not in arguments]
        if unknown:
            raise CommandError(
                f"`{named.name}` has no argument {', '.join(f'`{n}`' for n in unknown)}; "
                f"its arguments are {', '.join(f'`{n}`' for n in arguments)}"
            )
        channel = command.channel_id or ALL
        setting = None
        if command.up_to_s is not None and (command.up_to_s > 0 or channel):
            setting = TrustSetting(
                tool_name=named.name, max_s=command.up_to_s, matching=command.matching, channel_id=channel
            )
        before, after = await self._config.set_trust(actor, channel_id=channel, tool_name=named.name, setting=setting)
        return Changed(
            setting="trust",
            tool=named.name,
            channel_id=command.channel_id,
            before=before,
            after=after,
            changed=before != after,
            offline=named.offline,
        )

    async def _trust_grants(
        self, actor: Actor, command: ListTrust | RevokeTrust, config: WorkspaceConfig, *, admin: bool
    ) -> TrustList | TrustRevoked:
        """`trust list` and `trust revoke`: admins on every grant, others on their own.

        A grant's own are its approver and its requester: showing or ending it never lets them
        do more than before (a revoke only narrows).
        """
        if self._grants is None:
            raise CommandError("trust is not available here")
        if isinstance(command, ListTrust):
            grants, now = await self._grants.live_in(actor.platform, actor.workspace_id, channel_id=command.channel_id)
            lines = tuple(
                TrustLine(
                    grant=self._grant_shown(g),
                    applies=still_fits(g, config.trust_for(g.tool_name, g.channel_id), now),
                    free=leaves_free(g.matching, self._registry.argument_order(g.tool_name)),
                )
                for g in grants
                if admin or actor.user_id in (g.granted_by_id, g.requester_id)
            )
            return TrustList(grants=lines, channel_id=command.channel_id, everyone=admin)
        grant = await self._grants.get(command.grant_id)
        if grant is None or (grant.platform, grant.workspace_id) != (actor.platform, actor.workspace_id):
            raise CommandError(f"no trust `{command.grant_id}` here; `trust list` shows the live ones")
        if not admin and actor.user_id not in (grant.granted_by_id, grant.requester_id):
            await self._refused(actor, command, outcome="not_a_party", thread_id=grant.thread_id)
            raise NotPermittedError("not_a_party")
        revoked = await self._grants.revoke(grant.id, actor)
        if revoked is None:  # not live: revoked before (perhaps just now, by someone else) or expired
            after = await self._grants.get(grant.id)
            ended = "was revoked already" if after is not None and after.revoked_at is not None else "has expired"
            raise CommandError(f"trust `{grant.id}` {ended}; nothing to revoke")
        log.info("trust %s revoked by %s (thread_id=%s)", revoked.id, actor.user_id, revoked.thread_id)
        return TrustRevoked(grant=self._grant_shown(revoked))

    def _in_tool_order(self, tool_name: str | None, args: dict[str, Any] | None) -> dict[str, Any] | None:
        """`args` with its top-level keys in the tool's order, as cards list them (`arrange`); None stays None.

        Nested objects keep the order they are stored in, which is the order the call runs in
        (docs/decisions/0034-arguments-approvers-can-see.md).
        """
        if args is None:
            return None
        return arrange(args, self._registry.argument_order(tool_name or "")).as_dict()

    def _grant_shown(self, grant: TrustGrant) -> TrustGrant:
        """`grant` with the values it binds in the tool's order (`_in_tool_order`), for `trust list` and `revoke`."""
        return replace(grant, matched=self._in_tool_order(grant.tool_name, grant.matched) or {})

    def _context_of(self, conversation: ConversationRef | None) -> tuple[ContextPort, ConversationRef]:
        if conversation is None or self._contexts is None:
            raise CommandError("`context` is not available here")
        return self._contexts, conversation

    async def _reset(self, actor: Actor, conversation: ConversationRef, contexts: ContextPort) -> ContextReset:
        """`context reset`, audited as a configuration change (a refusal as a refusal)."""
        try:
            reset = await contexts.reset(conversation)
        except ConversationBusyError as exc:
            await self._refused(actor, ResetContext(), outcome=exc.reason.value, thread_id=conversation.thread_id)
            raise
        if reset.changed:
            before = reset.before
            await self._audit.record(
                AuditEntry(
                    kind=AuditKind.CONFIG,
                    workspace_id=actor.workspace_id,
                    thread_id=conversation.thread_id,
                    actor_id=actor.user_id,
                    actor_name=actor.display_name,
                    outcome="context",
                    detail={
                        "platform": actor.platform,
                        "channel_id": conversation.channel_id,
                        # Sizes only: the summary's text is conversation content, not configuration.
                        "before": {"messages": before.messages, "summary_chars": len(before.summary)},
                        "after": {"messages": 0, "summary_chars": 0},
                    },
                )
            )
        return reset

    async def visible_trusts(self, actor: Actor) -> list[TrustGrant]:
        """The live trust grants `actor` may list and revoke (for autocomplete): all for an admin, else their own."""
        if self._grants is None or actor.workspace_id == DM_WORKSPACE:
            return []
        config = await self._config.load(actor.platform, actor.workspace_id)
        admin = await is_workspace_admin(actor, config, self._directory_for(actor.platform))
        grants, _ = await self._grants.live_in(actor.platform, actor.workspace_id)
        return [g for g in grants if admin or actor.user_id in (g.granted_by_id, g.requester_id)]

    def mcp_servers(self) -> list[str]:
        """The configured MCP servers' keys (for autocomplete)."""
        return list(self._mcp.statuses()) if self._mcp is not None else []

    def tool_names(self) -> list[str]:
        """The registered tools' names (for autocomplete)."""
        return self._registry.names()

    def _show(self, config: WorkspaceConfig, channel_id: str | None) -> PolicyView:
        channel = channel_id or ALL
        lines = []
        for spec in self._registry:
            rule = rule_here(config, spec, spec.name, channel)
            if rule is not None:
                mode, condition = rule.mode, rule.condition
                source = "channel" if rule.channel_id else "workspace"
                if rule.from_hint:
                    source = "hint"
                elif rule.server_wide:
                    source = "server-channel" if rule.channel_id else "server"
            else:
                mode, condition, source = Mode(spec.default_mode), spec.review_when_text, "built-in"
            lines.append(
                ToolLine(
                    tool=spec.name,
                    mode=mode,
                    condition=condition,
                    source=source,
                    quorum=config.quorum(spec.name),
                    self_approval=config.self_approval(spec.name),
                    expiry_s=config.expiry_s(spec.name),
                    approvers=config.approvers_for(spec.name),
                    trust=config.trust_for(spec.name, channel),
                    escalation=config.escalation(spec.name),
                )
            )
        return PolicyView(
            channel_id=channel_id,
            tools=tuple(lines),
            workspace_approvers=tuple(a for a in config.approvers if a.tool_name == ALL),
            admins=tuple(sorted(config.admins)),
            quorum=config.quorum(ALL),
            self_approval=config.self_approval(ALL),
            expiry_s=config.expiry_s(ALL),
            cards=config.cards(),
            scope=config.scope(channel),
            agent=config.agent(channel) or self._default_agent,
            agent_source=_agent_source(config, channel),
            subagents=self._subagents,
            servers=tuple(
                _server_line(config, server_pattern(server), channel, connected=up)
                for server, up in self._registry.servers().items()
            ),
        )

    def _tool(self, name: str) -> _Named:
        """What a command's tool name names (see `_Named`).

        A server may be named by its key in `COUNTERSIGN_MCP_CONFIG` too (`my.tickets__*`): the
        name is then stored as in its tools' names (`my_tickets__*`).

        Raises:
            CommandError: a subagent's name; a `<server>__*` of no configured MCP server; a tool
                of a server that is down and whose tools were not listed since the bot started
                (nothing to check the setting against); any other name that is not a tool's.
        """
        servers = self._registry.servers()
        name = _named_as_in_tools(name, servers)
        server = pattern_server(name)
        if server is not None:
            if server not in servers:
                known = ", ".join(f"`{server_pattern(s)}`" for s in servers)
                which = f"the servers are: {known}" if known else "none is configured (COUNTERSIGN_MCP_CONFIG)"
                raise CommandError(f"`{name}` names no configured MCP server; {which}")
            return _Named(name, None, offline=None if servers[server] else server)
        spec = self._registry.get(name)
        if spec is not None:
            return _Named(name, spec)
        owner = max((s for s in servers if name.startswith(f"{s}__")), key=len, default=None)
        spec = self._registry.known(name)
        if spec is not None:  # its server is down, or no longer lists it: the setting waits for it
            return _Named(name, spec, offline=owner)
        absent = self._registry.absent(name)
        if absent is not None:
            whole = f", or set it for the whole server with `{server_pattern(owner)}`" if owner else ""
            raise CommandError(
                f"`{name}` cannot be checked now: {absent.reason}, and it has not listed that tool since the bot "
                f"started; try again once it is connected{whole}"
            )
        if name in self._subagents:
            raise CommandError(
                f"`{name}` is a subagent, not a tool: settings name the tools it calls "
                f"({', '.join(self._registry.names())}), which are governed inside it as anywhere"
            )
        raise CommandError(f"unknown tool `{name}`; the tools are: {', '.join(self._registry.names())}")

    async def _refused(
        self, actor: Actor, command: Command, *, outcome: str = "not_an_admin", thread_id: str | None = None
    ) -> None:
        log.info("refused %s from %s: %s", type(command).__name__, actor.user_id, outcome)
        await self._audit.record(
            AuditEntry(
                kind=AuditKind.REFUSED,
                workspace_id=actor.workspace_id,
                thread_id=thread_id,
                actor_id=actor.user_id,
                actor_name=actor.display_name,
                outcome=outcome,
                detail={"command": SUBCOMMANDS.get(type(command), type(command).__name__), "platform": actor.platform},
            )
        )


def _named_as_in_tools(name: str, servers: Mapping[str, bool]) -> str:
    """`name` with its MCP server part as in its tools' names, when it was written as the server's key.

    `my.tickets__*` is `my_tickets__*` and `my.tickets__list` is `my_tickets__list` when a server
    `my_tickets` is configured (`safe_server_name`); any other name is returned as it is.
    """
    server = pattern_server(name) or tool_server(name)
    if server is None or server in servers or safe_server_name(server) not in servers:
        return name
    return safe_server_name(server) + name[len(server) :]


def is_read_only(command: Command) -> bool:
    """Whether anyone may run `command` (help, show and context)."""
    return isinstance(command, READ_ONLY)


def _samples(spec: ToolSpec) -> dict[str, Any]:
    schema = spec.tool.tool_call_schema
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return sample_arguments(dereference_refs(schema.model_json_schema()))
    return sample_arguments(schema if isinstance(schema, dict) else {})


def _agent_source(config: WorkspaceConfig, channel: str) -> str:
    if channel and config.settings.get((channel, ALL, SettingKey.AGENT.value)):
        return "channel"
    if config.settings.get((ALL, ALL, SettingKey.AGENT.value)):
        return "workspace"
    return "default"


def _server_line(config: WorkspaceConfig, pattern: str, channel: str, *, connected: bool) -> ServerLine:
    """The settings made for `pattern` (`<server>__*`) itself, as `show` lists them."""

    def own(key: SettingKey) -> Any:
        return config.settings.get((ALL, pattern, key.value))

    return ServerLine(
        pattern=pattern,
        connected=connected,
        rule=config.rules.get((channel, pattern)) or config.rules.get((ALL, pattern)),
        approvers=tuple(a for a in config.approvers if a.tool_name == pattern),
        quorum=own(SettingKey.QUORUM),
        self_approval=own(SettingKey.SELF_APPROVAL),
        expiry_s=own(SettingKey.EXPIRY_S),
        trust=config.trust.get((channel, pattern)) or config.trust.get((ALL, pattern)),
        escalation=config.escalations.get(pattern),
        read_only_auto=bool(own(SettingKey.READ_ONLY_AUTO)),
    )


def _rule_words(mode: Mode, condition: str | None) -> str:
    return f"{mode.value} when {strip_quotes(condition)}" if condition else mode.value

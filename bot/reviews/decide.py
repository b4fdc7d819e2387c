"""Recording decisions: validate, authorise, re-run the policy, vote exactly once.

Order matters (docs/DESIGN.md, Approvals; docs/decisions/0006): nothing is written before the decision is validated and
the clicker is authorised; an approval is refused where the platform cannot show the arguments
it approves in full (docs/decisions/0034-arguments-approvers-can-see.md), and Approve all
approves no call whose own card was never posted (docs/decisions/0041-no-card-no-approval.md);
an edit is checked against the tool's schema and evaluated by the policy again (it may now need
more approvals, run without review, or be denied); the vote is then one transaction
(`ApprovalStore.vote`).
Every refusal is audited and changes nothing.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping

from langchain_core.tools import BaseTool

from bot import metrics
from bot.audit.entries import AuditEntry, AuditKind, approval_entry, refused_args
from bot.audit.store import AuditStore
from bot.base.conversation import DM_WORKSPACE, Actor, ConversationRef, storable_text
from bot.base.errors import (
    AlreadyDecidedError,
    AlreadyVotedError,
    ApprovalNotFoundError,
    CardNotPostedError,
    InvalidDecisionError,
    NotPermittedError,
    StaleVoteError,
    TrustRefusedError,
    UnshowableError,
)
from bot.base.mode import Mode
from bot.policy.config import WorkspaceConfig
from bot.policy.review import DmRules, PolicyContext, effective_mode, rule_here
from bot.policy.store import ConfigStore
from bot.ports import ToolOrigin
from bot.reviews.authorization import Directory, Standing, ensure_may_decide
from bot.reviews.decisions import Approve, Edit, Reject, check_decision
from bot.reviews.digest import args_digest
from bot.reviews.records import DENIED_BY_POLICY, NO_LONGER_CONFIGURED, ApprovalRecord, DecideResult
from bot.reviews.shown import Arguments, ArgumentsViewer, Shortfall, arrange
from bot.reviews.store import ApprovalStore, VoteKind
from bot.reviews.trust.grants import NewGrant
from bot.tools.registry import ToolRegistry
from bot.tools.server_wide import covers

log = logging.getLogger(__name__)

_APPROVAL_ID = re.compile(r"[0-9a-f]{32}")
_SHOWN_CHARS = 80


def is_approval_id(value: object) -> bool:
    """Whether `value` has the shape of an approval id (`uuid4().hex`, see `ApprovalStore`)."""
    return isinstance(value, str) and _APPROVAL_ID.fullmatch(value) is not None


def _shown(value: object) -> str:
    """A named id fit for a log line and an audit row: text, storable, at most 80 characters."""
    text = storable_text(value if isinstance(value, str) else repr(value))
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 1] + "…"


class Decider:
    """The decision use case, shared by every adapter.

    Args:
        approvals: the approvals tables.
        audit: the audit log.
        config: the admin configuration.
        registry: the tools and their built-in policy.
        directory_for: the platform directory (admins, group membership) by platform name.
        subagent_tools: each configured subagent's tool names (`<server>__*` for every tool of
            an MCP server); a card of a subagent (or tool) that is no longer configured is
            rejected when approved (see `can_still_run`).
        viewer_for: what each platform can show of a call's arguments, by platform name (the
            `Platform`s will do); None: every platform shows everything.
        dms: what the servers a Discord DM's requester shares with the bot require of a call
            there (`bot.policy.dm_rules`), read again at each decision on a DM's card; None: a DM
            follows the defaults alone.
    """

    def __init__(
        self,
        *,
        approvals: ApprovalStore,
        audit: AuditStore,
        config: ConfigStore,
        registry: ToolRegistry,
        directory_for: Callable[[str], Directory],
        subagent_tools: Mapping[str, frozenset[str]] | None = None,
        viewer_for: Callable[[str], ArgumentsViewer] | None = None,
        dms: DmRules | None = None,
    ) -> None:
        self._viewer_for = viewer_for
        self._approvals = approvals
        self._audit = audit
        self.audit = audit
        self._config = config
        self._registry = registry
        self._tools: Mapping[str, BaseTool] = registry.view()
        self._directory_for = directory_for
        self._subagent_tools = dict(subagent_tools or {})
        self._dms = dms

    def can_still_run(self, approval: ApprovalRecord) -> bool:
        """Whether the call could run if approved (its tool, and its subagent with that tool).

        The tool must be registered and, for a subagent's call, the subagent configured with
        that tool. Cards outlive restarts, and a restart may bring another tools module or subagents file;
        the graph would then answer the approved call with "not a valid tool" or "not a
        subagent", so an approval is recorded as a rejection that says why instead of a
        "Approved" that runs nothing. A tool that is configured but not offered now (its MCP
        server is not connected, `ToolRegistry.absent`) can still run: a decision on its card
        waits until it is back (`decide` refuses it meanwhile).
        """
        if approval.tool_name not in self._tools and self._registry.absent(approval.tool_name) is None:
            return False
        if approval.source is None:
            return True
        return covers(self._subagent_tools.get(approval.source, frozenset()), approval.tool_name)

    def key_order(self, tool_name: str) -> tuple[str, ...]:
        """The tool's argument names in its own order (`ToolRegistry.argument_order`)."""
        return self._registry.argument_order(tool_name)

    def origin(self, tool_name: str) -> ToolOrigin | None:
        """The MCP server behind the tool, with the server's hints (`ToolRegistry.origin`); None for the bot's own."""
        return self._registry.origin(tool_name)

    def arranged(self, tool_name: str, args: Mapping[str, object]) -> Arguments:
        """`args` of a call of `tool_name` in the order cards show them (`bot.reviews.shown.arrange`)."""
        return arrange(args, self.key_order(tool_name))

    async def approval(self, approval_id: str, *, actor: Actor | None = None) -> ApprovalRecord:
        """The approval with this id.

        Args:
            approval_id: as a button or form named it. Button values and modal ids come from
                platform payloads, so anything may arrive (a wrong type, a huge or malformed
                string); what is not an approval id (32 lowercase hex digits, as the store makes
                them) names no approval and is not looked up.
            actor: who named it; when given, an unknown id is audited as a refusal of theirs
                (a forged or stale button is worth a row, like any other refused click).

        Raises:
            ApprovalNotFoundError: no such approval.
        """
        found = await self._approvals.get(approval_id) if is_approval_id(approval_id) else None
        if found is None:
            if actor is not None:
                await self._unknown(approval_id, actor)
            raise ApprovalNotFoundError(_shown(approval_id))
        return found

    async def refuse(self, approval_id: str, actor: Actor, *, outcome: str, reason: str) -> None:
        """Audit an attempt an adapter refused before it became a decision.

        For example a click on a button the clicked message does not show (a forged or stale
        `custom_id`): nothing is decided, but the attempt names an approval and is worth a row,
        like every other refusal.

        Args:
            approval_id: the approval the attempt named (any text).
            actor: who tried.
            outcome: the audit row's outcome, e.g. `forged`.
            reason: why it was refused, in words.
        """
        try:
            approval = await self.approval(approval_id, actor=actor)
        except ApprovalNotFoundError:
            return  # audited as an unknown approval
        await self._refused(approval, actor, outcome, reason)

    async def check(self, approval_id: str, actor: Actor, *, attempted: str) -> ApprovalRecord:
        """Check that `actor` may take an `attempted` decision on this pending approval.

        Raises:
            ApprovalNotFoundError, AlreadyDecidedError, NotPermittedError (audited).
        """
        approval = await self.approval(approval_id, actor=actor)
        config = await self._load(approval)
        await self._ensure_open_and_permitted(approval, actor, attempted, config)
        return approval

    async def permits(self, approval: ApprovalRecord, actor: Actor, *, attempted: str) -> bool:
        """Whether `actor` may take an `attempted` decision on this pending approval; nothing is audited.

        For a batch's form: it opens when at least one call is open to the clicker (the
        decisions themselves are checked, and refusals audited, one by one).
        """
        if not approval.is_pending:
            return False
        config = await self._load(approval)
        try:
            await ensure_may_decide(
                actor,
                requester_id=approval.requester_id,
                workspace_id=approval.workspace_id,
                tool_name=approval.tool_name,
                decision_type=attempted,
                config=config,
                directory=self._directory_for(config.platform),
                escalated_to=approval.escalated_audience,
            )
        except NotPermittedError:
            return False
        return True

    async def unknown_pause(self, named: object, actor: Actor) -> None:
        """Audit a batch click naming a pause that does not exist (a forged or stale button)."""
        shown = _shown(named)
        log.info("refused a batch decision on unknown pause %s for %s", shown, actor.user_id)
        await self._audit.record(
            AuditEntry(
                kind=AuditKind.REFUSED,
                workspace_id=actor.workspace_id,
                outcome="unknown_approval",
                actor_id=actor.user_id,
                actor_name=actor.display_name,
                reason="no such pause",
                detail={"named": shown, "batch": True},
            )
        )

    async def decide(
        self,
        approval_id: str,
        actor: Actor,
        decision: Approve | Edit | Reject,
        *,
        seen_version: str | None = None,
        trust: bool = False,
        batch: bool = False,
    ) -> DecideResult:
        """Validate, authorise and record one decision (see the module docstring).

        Args:
            approval_id: the approval.
            actor: the authenticated clicker.
            decision: the typed decision (`bot.reviews.decisions`).
            seen_version: the arguments' version on the card that was clicked
                (`ApprovalRecord.version`); an approval from a card drawn before an edit is
                refused with `StaleVoteError`.
            trust: "Approve and trust" (docs/decisions/0022; with `Approve` only): the approval and a trust
                grant are recorded together, or nothing is. The grant lasts what the card
                offered, or less if the trust setting in force now allows less.
            batch: the decision is one of an Approve all / Reject all (noted in the audit row);
                an approval in a batch needs the call's own card posted (`CardNotPostedError`).

        Raises:
            ApprovalNotFoundError: unknown id (audited).
            AlreadyDecidedError: decided before; nothing changed.
            AlreadyVotedError: this person already approved these arguments.
            NotPermittedError: the actor may not decide it; nothing changed.
            InvalidDecisionError: the decision does not fit the action, or (an approval or an
                edit) its tool is configured but not offered now, its MCP server being down;
                the card stays usable.
            TrustRefusedError: trust was asked where no single click may grant it now (no
                trust setting covers the tool here, or it needs more than one approval);
                audited, nothing changed, the card stays usable.
            UnshowableError: an approval (with or without trust, alone or in a batch) of a call
                whose arguments under vote the card's platform cannot show in full; audited,
                nothing changed. A reject, or an edit (whose arguments the approver wrote), is
                not refused for this.
            CardNotPostedError: an approval in a batch of a call whose card has not been posted
                (its post failed, and is tried again); audited, nothing changed. A single click
                comes from the call's own card and is not refused for this.
        """
        for attempt in range(2):
            approval = await self.approval(approval_id, actor=actor)
            if (
                seen_version
                and approval.is_pending
                and approval.version != seen_version
                and isinstance(decision, Approve)
            ):
                await self._refused(approval, actor, "stale_card", "the arguments changed after the card was drawn")
                raise StaleVoteError(approval_id)
            try:
                return await self._decide_once(approval, actor, decision, batch, trust=trust)
            except StaleVoteError:
                if attempt:
                    raise
                log.info("arguments of approval %s changed during a vote; checking again", approval_id)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _decide_once(
        self,
        approval: ApprovalRecord,
        actor: Actor,
        parsed: Approve | Edit | Reject,
        batch: bool,
        *,
        trust: bool = False,
    ) -> DecideResult:
        config = await self._load(approval)
        standing = await self._ensure_open_and_permitted(approval, actor, parsed.type, config)
        under_vote = approval.args_under_vote
        if isinstance(parsed, Approve):
            await self._ensure_shown(approval, actor, under_vote)
            if batch:
                await self._ensure_posted(approval, actor)
        try:
            absent = self._registry.absent(approval.tool_name) if not isinstance(parsed, Reject) else None
            if absent is not None:
                # Configured, but not offered now (its MCP server is down): approving would run
                # nothing, so the card waits until it is back; a reject needs no server.
                raise InvalidDecisionError(f"{absent.reason}; decide again when it is back")
            checked = check_decision(
                parsed, {"name": approval.tool_name, "args": under_vote}, self._tools.get(approval.tool_name)
            )
        except InvalidDecisionError as exc:
            # The row keeps what the approver sent, not the card's arguments it left unchanged.
            tried = refused_args(parsed.edited_action.args) if isinstance(parsed, Edit) else None
            await self._refused(approval, actor, "invalid", exc.message, final_args=tried)
            raise

        kind, args, reason, quorum = await self._vote_for(approval, checked, config)
        grant = await self._trust_for(approval, actor, checked, kind, quorum, config, standing) if trust else None
        detail: dict[str, object] = {"quorum": quorum}
        if standing is Standing.ESCALATION:
            detail["via"] = "escalation"  # the escalation's audience, not an approver of the tool
        if batch:
            detail["batch"] = True
        audit = approval_entry(AuditKind.DECISION, approval, kind.value, actor=actor, detail=detail)
        try:
            result = await self._approvals.vote(
                approval.id,
                actor=actor,
                kind=kind,
                quorum=quorum,
                audit=audit,
                args=args if kind is VoteKind.EDIT else None,
                expected_digest=args_digest(under_vote) if kind is VoteKind.APPROVE else None,
                reason=reason,
                trust=grant,
            )
        except TrustRefusedError as exc:
            await self._refused(approval, actor, "trust_refused", exc.reason, attempted="trust")
            raise
        except AlreadyDecidedError as exc:
            await self._refused(approval, actor, "already_decided", f"already {exc.outcome}")
            raise
        except AlreadyVotedError:
            await self._refused(approval, actor, "already_voted", "the same person counts once")
            raise
        log.info(
            "approval %s: %s by %s, now %s (thread_id=%s)",
            approval.id,
            kind.value,
            actor.user_id,
            result.approval.status.value,
            approval.thread_id,
        )
        return result

    async def _vote_for(
        self, approval: ApprovalRecord, decision: Approve | Edit | Reject, config: WorkspaceConfig
    ) -> tuple[VoteKind, dict[str, object] | None, str | None, int]:
        """The vote a decision casts, after the policy looked at the arguments again.

        A Discord DM belongs to no server: as in `ConfiguredPolicy`, the servers its requester
        shares with the bot have their say (`bot.policy.dm_rules`): a call one of them denies, or would
        have someone other than the requester decide, is rejected by policy, also when the card
        was drawn before the rule (docs/decisions/0035-dms-and-escalation-audiences.md).
        """
        if isinstance(decision, Reject):
            # A reason is free text: what PostgreSQL cannot store is replaced, not refused.
            return VoteKind.REJECT, None, storable_text(decision.message or "").strip() or None, 1
        if not self.can_still_run(approval):
            return VoteKind.REJECT, None, NO_LONGER_CONFIGURED, 1
        args = dict(decision.edited_action.args) if isinstance(decision, Edit) else approval.args_under_vote
        conversation = ConversationRef.from_thread_id(approval.thread_id)
        spec = self._registry.get(approval.tool_name)
        rule = rule_here(config, spec, approval.tool_name, conversation.channel_id)
        mode = effective_mode(spec, rule, args, where=approval.thread_id)
        if conversation.workspace_id == DM_WORKSPACE and self._dms is not None:
            context = PolicyContext.from_thread_id(approval.thread_id, requester_id=approval.requester_id)
            mode = (await self._dms.ruling(approval.tool_name, args, context, mode)).mode
        if mode is Mode.DENY:
            return VoteKind.REJECT, None, DENIED_BY_POLICY, 1
        quorum = 1 if mode is Mode.AUTO else config.quorum(approval.tool_name)
        return (VoteKind.EDIT if isinstance(decision, Edit) else VoteKind.APPROVE), args, None, quorum

    async def _ensure_shown(self, approval: ApprovalRecord, actor: Actor, under_vote: Mapping[str, object]) -> None:
        """Refuse an approval of arguments the card's platform cannot show in full (audited).

        Raises:
            UnshowableError: see `decide`.
        """
        if self._viewer_for is None:
            return
        platform = ConversationRef.from_thread_id(approval.thread_id).platform
        shortfall = self._viewer_for(platform).unshowable(self.arranged(approval.tool_name, under_vote))
        if shortfall is None:
            return
        keys = shortfall.shortfall is Shortfall.KEYS
        await self._refused(
            approval,
            actor,
            "unshowable",
            f"{shortfall.size} {shortfall.shortfall.value} do not fit {platform}'s view (at most {shortfall.limit})",
        )
        raise UnshowableError(platform=platform, keys=keys, size=shortfall.size, limit=shortfall.limit)

    async def _ensure_posted(self, approval: ApprovalRecord, actor: Actor) -> None:
        """Refuse a batch approval of a call no card of which was posted (audited).

        Approve all is clicked on the pause's first card; the other calls are approved because
        their own cards showed their arguments. A card whose post failed (a 5xx, a dropped
        connection) shows nothing until it is posted again, so its call is left pending
        (docs/decisions/0041-no-card-no-approval.md). Any posted copy counts: the primary card,
        or an escalated copy. A card posted a moment ago whose reference is not stored yet
        counts as not posted: the call waits for a click on its own card, which is safe.

        Raises:
            CardNotPostedError: see `decide`.
        """
        if approval.card_ref is not None or await self._approvals.card_refs(approval.id):
            return
        await self._refused(approval, actor, "card_not_posted", "its card has not been posted")
        raise CardNotPostedError(approval.id)

    async def _trust_for(
        self,
        approval: ApprovalRecord,
        actor: Actor,
        decision: Approve | Edit | Reject,
        kind: VoteKind,
        quorum: int,
        config: WorkspaceConfig,
        standing: Standing,
    ) -> NewGrant | None:
        """The grant an "Approve and trust" click asks for, checked against the configuration now.

        A click that records a rejection (the tool is now denied, or no longer configured)
        makes no grant; the rejection is recorded as a plain Approve's would be.

        Raises:
            TrustRefusedError: (audited) `not_approve`, `not_offered` (no enabled trust setting
                for the tool in this channel now, nobody known asked for the call, or the card
                offered no trust), `quorum` (more than one approval needed now) or `escalation`
                (the clicker may decide this call only as its escalation's audience: an approver
                of this one call, never of the tool's later calls, which a grant would cover).
        """
        if kind is VoteKind.REJECT:
            return None
        channel = ConversationRef.from_thread_id(approval.thread_id).channel_id
        setting = config.trust_for(approval.tool_name, channel)
        if not isinstance(decision, Approve):
            problem = "not_approve"
        elif setting is None or not approval.requester_id:
            problem = "not_offered"
        elif quorum != 1:
            problem = "quorum"
        elif approval.trust_offer_s is None:
            problem = "not_offered"  # the card never showed the button: a forged or stale click
        elif standing is Standing.ESCALATION:
            problem = "escalation"  # an approver of this call only: a grant would cover nothing
        else:
            return NewGrant(
                matching=_bound(approval.trust_offer_matching, setting.matching),
                duration_s=min(approval.trust_offer_s, setting.max_s),
            )
        await self._refused(approval, actor, "trust_refused", problem, attempted="trust")
        raise TrustRefusedError(problem)

    async def _load(self, approval: ApprovalRecord) -> WorkspaceConfig:
        platform = ConversationRef.from_thread_id(approval.thread_id).platform
        return await self._config.load(platform, approval.workspace_id)

    async def _ensure_open_and_permitted(
        self, approval: ApprovalRecord, actor: Actor, attempted: str, config: WorkspaceConfig
    ) -> Standing:
        if not approval.is_pending:
            await self._refused(approval, actor, "already_decided", f"already {approval.status.value}")
            raise AlreadyDecidedError(
                outcome=approval.status.value,
                decided_by_id=approval.decided_by_id,
                decided_by_name=approval.decided_by_name,
                decided_at=approval.decided_at,
            )
        try:
            return await ensure_may_decide(
                actor,
                requester_id=approval.requester_id,
                workspace_id=approval.workspace_id,
                tool_name=approval.tool_name,
                decision_type=attempted,
                config=config,
                directory=self._directory_for(config.platform),
                escalated_to=approval.escalated_audience,
            )
        except NotPermittedError as exc:
            await self._refused(approval, actor, "not_permitted", exc.reason, attempted=attempted)
            raise

    async def _unknown(self, named: object, actor: Actor) -> None:
        shown = _shown(named)
        log.info("refused a decision on unknown approval %s for %s", shown, actor.user_id)
        await self._audit.record(
            AuditEntry(
                kind=AuditKind.REFUSED,
                workspace_id=actor.workspace_id,
                outcome="unknown_approval",
                approval_id=shown if is_approval_id(named) else None,
                actor_id=actor.user_id,
                actor_name=actor.display_name,
                reason="no such approval",
                detail={} if is_approval_id(named) else {"named": shown},
            )
        )

    async def _refused(
        self,
        approval: ApprovalRecord,
        actor: Actor,
        outcome: str,
        reason: str,
        *,
        attempted: str | None = None,
        final_args: dict[str, object] | None = None,
    ) -> None:
        """Log, count and audit a refused decision.

        The row's workspace is the approval's; a clicker of another workspace (a Slack app
        installed in several signs every workspace's payloads alike) has theirs in
        `detail["actor_workspace_id"]`, so the row names who was refused, not a namesake. A
        refused edit's arguments are its `final_args` (`bot.audit.entries.refused_args`), beside the
        card's `proposed_args`.
        """
        log.info(
            "refused %s on approval %s for %s: %s (thread_id=%s)",
            attempted or "decision",
            approval.id,
            actor.user_id,
            reason,
            approval.thread_id,
        )
        metrics.DECISIONS_REFUSED.labels(tool=approval.tool_name, reason=outcome).inc()
        await self._audit.record(
            approval_entry(
                AuditKind.REFUSED,
                approval,
                outcome,
                actor=actor,
                reason=reason,
                final_args=final_args,
                detail={
                    **({"attempted": attempted} if attempted else {}),
                    **(
                        {"actor_workspace_id": actor.workspace_id}
                        if actor.workspace_id != approval.workspace_id
                        else {}
                    ),
                },
            )
        )


def _bound(offered: tuple[str, ...] | None, wanted: tuple[str, ...]) -> tuple[str, ...]:
    """The arguments a grant binds: what its card said it binds, and whatever the setting now names.

    The card named the arguments a grant would leave free (`ApprovalCard.trust_leaves_free`),
    so a grant never binds fewer than it said, even if the setting was widened since; a setting
    narrowed since adds its names, since a grant binding less would never apply
    (`bot.reviews.trust.grants.still_fits`). Empty means every argument. A card from before cards said
    so (`offered` None) binds what the setting names now.
    """
    if offered is None:
        return wanted
    if not offered or not wanted:
        return ()
    return tuple(sorted(set(offered) | set(wanted)))

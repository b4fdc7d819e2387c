"""Escalating undecided cards on time, with or without traffic, across restarts (docs/decisions/0023).

Each approval of a tool with `/countersign escalate` stores when it escalates and to whom when
its review opens. The sweeper (`bot.upkeep.due_sweeper`) claims each due escalation with one conditional
update (`ApprovalStore.claim_due_escalations`: only on an approval still pending, so a card
decided or expired first never escalates), posts copies of the card to the target, records the
escalation with its audit row, and redraws every copy (the original now says it escalated, to
whom and when). From the claim on, the target may decide that call (`bot.approvals.
authorization`). A sweeper that dies between its claim and its record leaves the claim's lease
to run out; the next sweep, on any replica, posts the copies again (at least once, like cards).

Where the copies go (docs/decisions/0023): a user's DMs; each member of a Slack user group in
their DMs (at most `MAX_DM_CARDS`, without the requester when self-approval is off); a Discord
role: one copy in the conversation that mentions the role; a channel: one copy there. When no
copy can be posted (DMs closed, a channel the bot cannot write in, an empty group), one copy
goes to the conversation, mentioning the target.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from datetime import datetime

from bot.base.conversation import ConversationRef
from bot.policy.config import WorkspaceConfig
from bot.policy.store import ConfigStore
from bot.ports import CardTarget, Platform
from bot.reviews.cards import MAX_DM_CARDS, CardDesk
from bot.reviews.escalation.rules import EscalationTarget, TargetKind
from bot.reviews.records import ApprovalRecord
from bot.reviews.store import ApprovalStore
from bot.upkeep.due_sweeper import DueSweeper

log = logging.getLogger(__name__)

LEASE_S = 120.0
"""Seconds a sweeper has to post an escalation's copies before another may take it over."""
PER_SWEEP = 100
"""At most this many escalations per sweep (the next sweep follows at once when more are due)."""


class EscalationSweeper(DueSweeper):
    """The escalation loop.

    Args:
        approvals: the approvals tables.
        config: the admin configuration (self-approval, for a group's members).
        cards: posts and redraws the cards.
        platforms: the platforms this process serves (`ConversationRef.platform` names; read
            at each sweep): only their approvals are escalated here.
    """

    def __init__(
        self, approvals: ApprovalStore, config: ConfigStore, cards: CardDesk, *, platforms: Collection[str]
    ) -> None:
        super().__init__("escalation sweeper")
        self._approvals = approvals
        self._config = config
        self._cards = cards
        self._platforms = platforms

    async def sweep(self) -> int:
        """Escalate every card due now, one claim at a time; return how many were claimed."""
        done = 0
        while done < PER_SWEEP:
            claimed = await self._approvals.claim_due_escalations(lease_s=LEASE_S, platforms=self._platforms, limit=1)
            if not claimed:
                break
            done += 1
            approval = claimed[0]
            try:
                await self.escalate(approval)
            except Exception:
                # Left claimed: once its lease runs out, a later sweep (here or on another
                # replica) posts it again.
                log.exception("escalating approval %s failed (thread_id=%s)", approval.id, approval.thread_id)
        if done >= PER_SWEEP:
            self.wake()
        return done

    async def next_due(self) -> datetime | None:
        """When the next escalation falls due (or a claim's lease runs out), or None."""
        return await self._approvals.next_escalation(platforms=self._platforms)

    async def escalate(self, approval: ApprovalRecord) -> bool:
        """Post a claimed escalation's copies, record it, redraw every copy; return whether it was recorded.

        Nothing is posted when the approval was decided, stopped or past its expiry time after
        the claim (its card already says so, or will): the approval is read again right before
        the copies go out (`ApprovalStore.still_escalating`), since the claim does not hold it
        and finding the target's members can take a platform call. When nothing could be
        posted at all, the claim stays; its lease runs out and the escalation is tried again.
        """
        target = approval.escalate_to
        if target is None:
            return False
        conversation = ConversationRef.from_thread_id(approval.thread_id)
        platform = self._cards.platform(conversation)
        config = await self._config.load(conversation.platform, conversation.workspace_id)
        targets = await _targets(platform, conversation, config, approval, target)
        current = await self._approvals.still_escalating(approval.id)
        if current is None:
            log.info(
                "approval %s was decided or expired after its escalation was claimed; no copies (thread_id=%s)",
                approval.id,
                approval.thread_id,
            )
            return False
        approval = current
        copies = await self._cards.post_copies(approval, targets)
        if copies == 0:
            # Nobody reachable where the target is: the conversation gets the copy, naming them.
            log.warning(
                "no copy of escalated approval %s reached %s; posting it in the conversation", approval.id, target
            )
            copies = await self._cards.post_copies(
                approval, [CardTarget(conversation=conversation, escalated_to=target)]
            )
        if copies == 0:
            log.error("could not post escalated approval %s anywhere; trying again later", approval.id)
            return False
        finished = await self._approvals.finish_escalation(approval.id, copies=copies)
        if finished is None:
            return False
        log.info(
            "approval %s escalated to %s %s (%d copies, thread_id=%s)",
            approval.id,
            target.kind.value,
            target.subject_id,
            copies,
            approval.thread_id,
        )
        await self._cards.redraw(finished)
        return True


async def _targets(
    platform: Platform,
    conversation: ConversationRef,
    config: WorkspaceConfig,
    approval: ApprovalRecord,
    target: EscalationTarget,
) -> list[CardTarget]:
    """Where an escalation's copies go (see the module docstring)."""
    if target.kind is TargetKind.USER:
        return [CardTarget(conversation=conversation, user_id=target.subject_id, escalated_to=target)]
    if target.kind is TargetKind.CHANNEL:
        return [CardTarget(conversation=conversation, channel_id=target.subject_id, escalated_to=target)]
    if target.kind is TargetKind.ROLE:
        return [CardTarget(conversation=conversation, escalated_to=target)]
    try:
        members = sorted(await platform.group_members(conversation.workspace_id, target.subject_id))
    except Exception:
        log.exception("could not list the members of group %s", target.subject_id)
        return []
    if not config.self_approval(approval.tool_name):
        members = [user for user in members if user != approval.requester_id]
    if len(members) > MAX_DM_CARDS:
        log.warning("%d members in %s; escalated copies go to the first %d", len(members), target, MAX_DM_CARDS)
    return [CardTarget(conversation=conversation, user_id=user, escalated_to=target) for user in members[:MAX_DM_CARDS]]

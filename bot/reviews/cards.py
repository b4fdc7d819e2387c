"""Posting approval cards where the workspace routes them, and redrawing them after decisions.

Routing (`/countersign cards`): in the conversation (default), in one approvals channel, or in
each approver's DMs; the conversation always learns where the cards went. A card that cannot be
posted where it is routed falls back to the conversation (docs/decisions/0007); one that could
not be posted anywhere is tried again at once, twice (`POST_RETRY_S`), then by the upkeep. An
escalated card gets more copies (`post_copies`, `bot.reviews.escalation.sweep`); every copy is redrawn on each
change.
The first card of a pause with two or more pending calls carries the pause's Approve all /
Reject all (`BatchOffer`), and is redrawn when a sibling is decided.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace

from bot.base.conversation import Actor, ConversationRef
from bot.base.tasks import TaskTracker
from bot.policy.config import ApproverKind, CardRouting, WorkspaceConfig
from bot.policy.store import ConfigStore
from bot.ports import ApprovalCard, BatchOffer, CardsElsewhere, CardTarget, Notice, Platform, ToolOrigin
from bot.reviews.lifecycle import batch_open
from bot.reviews.records import ApprovalRecord, ReviewRecord, pause_version
from bot.reviews.store import ApprovalStore

log = logging.getLogger(__name__)

MAX_DM_CARDS = 20
"""At most this many approvers get a card in their DMs per call (a big user group is not spammed)."""

KeyOrder = Callable[[str], Sequence[str]]
OriginOf = Callable[[str], ToolOrigin | None]
"""A tool's MCP server and name there, with the server's hints (`ToolRegistry.origin`); None for the bot's own."""
"""A tool's argument names in its own order, by tool name (`ToolRegistry.argument_order`)."""

POST_RETRY_S = (1.0, 4.0)
"""Seconds before the second and third attempt at a card of which no copy could be posted (a
5xx, a dropped connection): a missing card is posted again at once, by the work that posted it
(a run, `TurnRunner.settle`), while it still holds the conversation. A card still missing after
them keeps the run undelivered, and the upkeep posts it again later (`bot.upkeep.unfinished_work`); until it is
posted, Approve all does not approve its call (docs/decisions/0041-no-card-no-approval.md)."""

REDRAW_WAIT_S = 5.0
"""Seconds the work that follows a redraw (a run, a resume, a sweep) waits for it (`CardDesk.redraw`)."""


class CardDesk:
    """Posts, re-posts and redraws cards, and sends notices, through the platform adapters.

    Args:
        approvals: the approvals tables (where each posted copy is recorded).
        config: the admin configuration (card routing).
        platforms: adapters by `ConversationRef.platform`.
        tasks: the service's background work; a redraw not done within `REDRAW_WAIT_S` goes on
            there (shutdown waits for it within its grace).
        key_order: each tool's argument order, in which every card lists the arguments
            (default: none known, so keys come by the length of their values).
        origin_of: the MCP server behind each tool, shown on its cards (default: none).
        retry_s: seconds before each further attempt at a card of which no copy could be
            posted (default `POST_RETRY_S`).
    """

    def __init__(
        self,
        approvals: ApprovalStore,
        config: ConfigStore,
        platforms: Mapping[str, Platform],
        tasks: TaskTracker,
        key_order: KeyOrder | None = None,
        retry_s: Sequence[float] = POST_RETRY_S,
        origin_of: OriginOf | None = None,
    ) -> None:
        self._key_order: KeyOrder = key_order or (lambda _tool: ())
        self._origin_of = origin_of
        self._retry_s = tuple(retry_s)
        self._approvals = approvals
        self._config = config
        self._platforms = platforms
        self._tasks = tasks
        self._drawing: dict[str, tuple[asyncio.Lock, int]] = {}

    def platform(self, conversation: ConversationRef) -> Platform:
        """The adapter serving `conversation`.

        Raises:
            KeyError: when no adapter for that platform is running.
        """
        return self._platforms[conversation.platform]

    async def post(
        self, conversation: ConversationRef, config: WorkspaceConfig, rows: Sequence[ApprovalRecord]
    ) -> list[ApprovalRecord]:
        """Post the card of every pending approval in `rows` that has none yet.

        A card of which no copy could be posted (the platform failed every target) is tried
        again after each delay of `retry_s`, unless its call was decided or its card posted
        meanwhile; a card still missing then is left to `post_missing` (`TurnRunner.settle`,
        also from the upkeep).

        Args:
            conversation: where the calls were made.
            config: the workspace's configuration (card routing, approvers).
            rows: the approvals of one review, in order.

        Returns:
            The review's approvals as stored afterwards (with their card references).
        """
        platform = self.platform(conversation)
        posted_elsewhere = False
        for row in rows:
            if row.card_ref is not None or not row.is_pending:
                continue
            card = card_of(row, rows, self._key_order, self._origin_of)
            targets = await _card_targets(platform, conversation, config, row)
            if targets[0].channel_id or targets[0].user_id:
                # When no routed copy can be posted (a channel the bot cannot write in, DMs
                # closed), the card falls back to the conversation: a card nobody can see
                # would leave the thread waiting for nothing.
                targets.append(CardTarget(conversation=conversation))
            for attempt, delay_s in enumerate((0.0, *self._retry_s)):
                if delay_s:
                    log.warning(
                        "posting the card for approval %s again in %g s (thread_id=%s)", row.id, delay_s, row.thread_id
                    )
                    await asyncio.sleep(delay_s)
                    again = await self._approvals.get(row.id)
                    if again is None or not again.is_pending or again.card_ref is not None:
                        break  # decided meanwhile (an expiry, a stop), or posted by another path
                posted, elsewhere = await self._post_copies(platform, row, card, targets, first_attempt=attempt == 0)
                posted_elsewhere |= elsewhere
                if posted:
                    break
            now = await self._approvals.get(row.id)
            if now is not None and replace(now, card_ref=row.card_ref) != row:
                # A click (a decision, a vote, an edit) beat the stored card reference: its
                # own redraw found no card to update.
                await self.redraw(now)
        stored = await self._approvals.approvals_of(rows[0].review_id) if rows else []
        if posted_elsewhere:
            await self.notify(
                conversation,
                CardsElsewhere(approvals=tuple(stored), channel_id=config.cards().channel_id),
                recipient=None,
            )
        return stored

    async def _post_copies(
        self,
        platform: Platform,
        row: ApprovalRecord,
        card: ApprovalCard,
        targets: Sequence[CardTarget],
        *,
        first_attempt: bool,
    ) -> tuple[int, bool]:
        """Post `card` to `targets` (the conversation last, as the fallback); each failure is logged.

        Returns:
            How many copies went out, and whether one of them went elsewhere than the
            conversation (an approvals channel, DMs).
        """
        posted = 0
        elsewhere = False
        for target in targets:
            fallback = target.channel_id is None and target.user_id is None
            if fallback and posted and len(targets) > 1:
                break
            try:
                card_ref = await platform.post_card(target, card)
            except Exception:
                log.exception(
                    "could not post the card for approval %s%s (thread_id=%s)",
                    row.id,
                    "" if first_attempt else " again",
                    row.thread_id,
                )
                continue
            await self._approvals.add_card(row.id, card_ref, primary=posted == 0)
            posted += 1
            elsewhere |= not fallback
        return posted, elsewhere

    async def post_missing(self, conversation: ConversationRef, review: ReviewRecord) -> None:
        """Post the cards of a pending review that could not be posted before (a platform error)."""
        rows = await self._approvals.approvals_of(review.id)
        if any(row.is_pending and row.card_ref is None for row in rows):
            config = await self._config.load(conversation.platform, conversation.workspace_id)
            await self.post(conversation, config, rows)

    async def redraw(self, *approvals: ApprovalRecord, wait_s: float = REDRAW_WAIT_S) -> None:
        """Redraw every copy of these approvals' cards from what is stored, waiting at most `wait_s`.

        A card is decoration next to the work that follows its redraw (a run, a resume, a
        sweep), which goes on once the card shows the change, so the conversation reads in
        order, or after `wait_s` seconds (0: at once). A rate-limited edit waits out its
        `Retry-After` inside the platform's client (slack_sdk and discord.py both do), and
        discord.py queues the edits of one channel's messages in one rate-limit bucket: a redraw
        made during a run can wait behind the run's own status line, which waits for the run to
        end (docs/decisions/0030). The redraw then finishes in the service's background tasks;
        each approval's failure is logged. The redraws of one pause take turns in this process,
        and each draws what is stored when its turn comes, so an older redraw that the platform
        held cannot land after a newer one.

        Args:
            approvals: the approvals, as stored after the change (none: nothing to do).
            wait_s: the longest wait, in seconds.
        """
        if not approvals:
            return
        task = self._tasks.spawn(self._refresh_all(approvals), name=f"redraw {approvals[0].thread_id}")
        if wait_s > 0:
            await asyncio.wait({task}, timeout=wait_s)

    async def _refresh_all(self, approvals: Sequence[ApprovalRecord]) -> None:
        for approval in approvals:
            try:
                await self._refresh(approval)
            except Exception:
                log.exception("could not redraw approval %s's card (thread_id=%s)", approval.id, approval.thread_id)

    @asynccontextmanager
    async def _one_at_a_time(self, review_id: str) -> AsyncIterator[None]:
        """Hold the pause's redraw turn (a lock per pause, forgotten once nobody waits for it)."""
        lock, users = self._drawing.get(review_id, (asyncio.Lock(), 0))
        self._drawing[review_id] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._drawing[review_id]
            if users == 1:
                del self._drawing[review_id]
            else:
                self._drawing[review_id] = (lock, users - 1)

    async def _refresh(self, approval: ApprovalRecord) -> None:
        """Redraw every copy of an approval's card from what is stored (after a decision).

        The pause's first card is redrawn too while its Approve all / Reject all show (or
        showed until this decision): they say how many calls wait, go once fewer than two do,
        and carry the version of every call's arguments, which an edit of this one changed.
        """
        async with self._one_at_a_time(approval.review_id):
            siblings = await self._approvals.approvals_of(approval.review_id)
            approval = next((row for row in siblings if row.id == approval.id), approval)  # as stored now
            await self._redraw_copies(approval, siblings)
            batch_shown = batch_open(row.status for row in siblings) or (
                not approval.is_pending and any(row.is_pending for row in siblings)
            )
            if approval.position != 0 and batch_shown:
                first = next((row for row in siblings if row.position == 0), None)
                if first is not None:
                    await self._redraw_copies(first, siblings)

    async def _redraw_copies(self, approval: ApprovalRecord, siblings: Sequence[ApprovalRecord]) -> None:
        conversation = ConversationRef.from_thread_id(approval.thread_id)
        refs = await self._approvals.card_refs(approval.id) or ([approval.card_ref] if approval.card_ref else [])
        if not refs:
            return
        card = card_of(approval, siblings, self._key_order, self._origin_of)
        for card_ref in refs:
            try:
                await self.platform(conversation).update_card(conversation, card_ref, card)
            except Exception:
                log.exception("could not update a card of approval %s (thread_id=%s)", approval.id, approval.thread_id)

    async def post_copies(self, approval: ApprovalRecord, targets: Sequence[CardTarget]) -> int:
        """Post more copies of a pending approval's card (an escalation); return how many went out.

        Each copy is recorded (not as the primary one, which stays the card links point at), so
        every later redraw reaches it and its buttons decide the same approval. A copy that
        cannot be posted is logged and skipped.

        Args:
            approval: the approval, as stored now.
            targets: where the copies go.
        """
        if not targets:
            return 0
        siblings = await self._approvals.approvals_of(approval.review_id)
        card = card_of(approval, siblings, self._key_order, self._origin_of)
        platform = self.platform(targets[0].conversation)
        posted = 0
        for target in targets:
            try:
                card_ref = await platform.post_card(target, card)
            except Exception:
                log.exception("could not post a copy of approval %s (thread_id=%s)", approval.id, approval.thread_id)
                continue
            await self._approvals.add_card(approval.id, card_ref, primary=False)
            posted += 1
        return posted

    async def notify(self, conversation: ConversationRef, notice: Notice, *, recipient: Actor | None) -> bool:
        """Send a notice; return whether it went out (a platform failure is logged, not raised)."""
        try:
            await self.platform(conversation).notify(conversation, notice, recipient=recipient)
        except Exception:
            log.exception("could not send %s (thread_id=%s)", type(notice).__name__, conversation.thread_id)
            return False
        return True


def card_of(
    approval: ApprovalRecord,
    siblings: Sequence[ApprovalRecord],
    key_order: KeyOrder | None = None,
    origin_of: OriginOf | None = None,
) -> ApprovalCard:
    """The card of `approval`, one of the pause whose approvals are `siblings` (in any order).

    The first card of a pause with two or more pending calls offers Approve all / Reject all
    (`lifecycle.batch_open`). The card lists the arguments in the tool's own order, from
    `key_order` (docs/decisions/0034-arguments-approvers-can-see.md); a tool of an MCP server
    carries its server, its name there and the server's hints, from `origin_of`.
    """
    batch = None
    if approval.position == 0 and batch_open(row.status for row in siblings):
        batch = BatchOffer(
            review_id=uuid.UUID(approval.review_id).hex,
            pending=sum(row.is_pending for row in siblings),
            version=pause_version(siblings),
        )
    order = tuple(key_order(approval.tool_name)) if key_order is not None else ()
    return ApprovalCard(
        approval=approval,
        position=approval.position + 1,
        total=len(siblings),
        batch=batch,
        key_order=order,
        origin=origin_of(approval.tool_name) if origin_of is not None else None,
    )


async def _card_targets(
    platform: Platform, conversation: ConversationRef, config: WorkspaceConfig, row: ApprovalRecord
) -> list[CardTarget]:
    """Where a card goes: the conversation, the approvals channel, or each approver's DMs.

    DM routing reaches the approvers listed as users plus the members of listed groups that
    the platform can list (`Platform.group_members`), without the requester when they may not
    approve their own call, at most `MAX_DM_CARDS` of them. When nobody is left (no list, or
    only Discord roles), the card stays in the conversation.
    """
    cards = config.cards()
    if cards.routing is CardRouting.CHANNEL and cards.channel_id:
        return [CardTarget(conversation=conversation, channel_id=cards.channel_id)]
    if cards.routing is CardRouting.DM:
        users: list[str] = []
        for approver in config.approvers_for(row.tool_name):
            if approver.kind is ApproverKind.USER:
                users.append(approver.subject_id)
                continue
            try:
                members = await platform.group_members(conversation.workspace_id, approver.subject_id)
            except Exception:
                log.exception("could not list the members of group %s", approver.subject_id)
                continue
            users.extend(sorted(members))
        if not config.self_approval(row.tool_name):
            users = [user for user in users if user != row.requester_id]
        unique = list(dict.fromkeys(users))
        if len(unique) > MAX_DM_CARDS:
            log.warning("%d approvers for %s; DM cards go to the first %d", len(unique), row.id, MAX_DM_CARDS)
        if unique:
            return [CardTarget(conversation=conversation, user_id=user) for user in unique[:MAX_DM_CARDS]]
    return [CardTarget(conversation=conversation)]

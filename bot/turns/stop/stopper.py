"""Stop (docs/decisions/0021): the requester or an admin stops the running turn of a conversation.

Who may: the author of the message that started the turn, and the workspace's admins (the
platform's admins and the bot admins, as for the admin commands). Anyone else is refused,
audited like a refused click, and nothing changes. A stop is recorded once
(`bot.turns.stop.store`): a second one is told who stopped the turn first.

What follows (docs/decisions/0021): the running turn's signal is set here at once when it
runs in this process, and within `bot.turns.stop.watch.POLL_S` on any other; it ends at its next
step. Cards of the turn still waiting are closed as stopped in the stop's own transaction;
the service then redraws them and resumes their pauses, and the resumed run answers every
call of the turn as stopped and closes with "Stopped by <name>."
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable

from bot import metrics
from bot.admin.views import StopRequested
from bot.audit.entries import AuditEntry, AuditKind
from bot.audit.store import AuditStore
from bot.base.conversation import Actor, ConversationRef
from bot.base.errors import AlreadyStoppedError, NothingToStopError, StopNotPermittedError, TurnEndedError
from bot.policy.store import ConfigStore
from bot.reviews.authorization import Directory, is_workspace_admin
from bot.turns.conversations import Stopper
from bot.turns.stop.store import StopRecorded, StopStore, TurnState
from bot.turns.stop.watch import StopWatch

log = logging.getLogger(__name__)

_TURN_ID = re.compile(r"[0-9a-f]{32}")
"""A turn id as `TurnRunner.ask` makes it (`uuid4().hex`); anything else names no turn."""

OnStopped = Callable[[StopRecorded], None]


def is_turn_id(value: object) -> bool:
    """Whether `value` has the shape of a turn id (a Stop button's payload may hold anything)."""
    return isinstance(value, str) and _TURN_ID.fullmatch(value) is not None


class TurnStopper:
    """The stop use case, shared by the Stop buttons and `/countersign stop` on every platform.

    Args:
        store: reads turns and records stops.
        watch: the stop signals of the turns this process runs.
        config: the admin configuration (bot admins).
        audit: the audit log (refusals; the stop itself is audited by the store).
        directory_for: the platform directory (who is an admin) by platform name.
        on_stopped: called with each recorded stop, at once (it must not block: what follows a
            stop, `bot.turns.resumes.Resumes.after_stop`, redraws and resumes in the background).
    """

    def __init__(
        self,
        *,
        store: StopStore,
        watch: StopWatch,
        config: ConfigStore,
        audit: AuditStore,
        directory_for: Callable[[str], Directory],
        on_stopped: OnStopped | None = None,
    ) -> None:
        self._on_stopped = on_stopped
        self._store = store
        self._watch = watch
        self._config = config
        self._audit = audit
        self._directory_for = directory_for

    async def stop(
        self, actor: Actor, *, conversation: ConversationRef | None = None, turn_id: str | None = None
    ) -> StopRequested:
        """Stop the turn a Stop button names (`turn_id`), or the active turn of `conversation`.

        Args:
            actor: the authenticated person who pressed Stop or typed `stop`.
            conversation: where `stop` was typed (derived from the platform's payload, as
                for a message); ignored when `turn_id` is given.
            turn_id: the turn a Stop button names (any payload value).

        Returns:
            What was stopped.

        Raises:
            NothingToStopError: no turn runs or waits in `conversation`; nothing changed.
            TurnEndedError: the named turn has ended; nothing changed.
            AlreadyStoppedError: someone stopped it before (audited); nothing changed.
            StopNotPermittedError: `other_workspace` or `not_requester_or_admin` (audited);
                nothing changed.
            ValueError: neither `conversation` nor `turn_id` was given.
        """
        turn = await self._find(conversation, turn_id)
        refusal = turn.refusal(turn_id)
        if isinstance(refusal, AlreadyStoppedError):
            await self._refused(turn, actor, "already_stopped", "the turn was already stopped")
        if refusal is not None:
            raise refusal
        await self._authorise(actor, turn)
        stopper = Stopper(user_id=actor.user_id, display_name=actor.display_name)
        try:
            recorded = await self._store.request_stop(turn.thread_id, stopper=actor, expected_turn_id=turn.turn_id)
        except AlreadyStoppedError:
            await self._refused(turn, actor, "already_stopped", "the turn was already stopped")
            raise
        if turn.turn_id is not None:
            self._watch.stopped(turn.turn_id, stopper)
        log.info(
            "turn %s stopped by %s while %s; %d card(s) closed (thread_id=%s)",
            turn.turn_id,
            actor.user_id,
            "running" if turn.running else "paused",
            len(recorded.closed),
            turn.thread_id,
        )
        if self._on_stopped is not None:
            self._on_stopped(recorded)
        return StopRequested(
            thread_id=turn.thread_id,
            requester_id=turn.requester_id,
            paused=bool(recorded.closed),
            cards_closed=len(recorded.closed),
        )

    async def aclose(self) -> None:
        """Stop looking for stops recorded elsewhere (at shutdown)."""
        await self._watch.close()

    async def _find(self, conversation: ConversationRef | None, turn_id: str | None) -> TurnState:
        if turn_id is not None:
            found = await self._store.turn(turn_id) if is_turn_id(turn_id) else None
            if found is None:
                raise TurnEndedError()
            return found
        if conversation is None:
            raise ValueError("stop needs a conversation or a turn id")
        found = await self._store.turn_of(conversation.thread_id)
        if found is None:
            raise NothingToStopError()
        return found

    async def _authorise(self, actor: Actor, turn: TurnState) -> None:
        """The requester or an admin of the turn's workspace; anyone else is refused (audited)."""
        if actor.workspace_id != turn.workspace_id:
            reason = "other_workspace"
        elif actor.user_id == turn.requester_id:
            return
        else:
            platform = ConversationRef.from_thread_id(turn.thread_id).platform
            config = await self._config.load(platform, turn.workspace_id)
            if await is_workspace_admin(actor, config, self._directory_for(platform)):
                return
            reason = "not_requester_or_admin"
        await self._refused(turn, actor, "not_permitted", reason)
        raise StopNotPermittedError(reason, requester_id=turn.requester_id)

    async def _refused(self, turn: TurnState, actor: Actor, outcome: str, reason: str) -> None:
        """Log, count and audit a refused stop (as refused clicks are: `bot.reviews.decide`)."""
        log.info(
            "refused a stop of turn %s for %s: %s (thread_id=%s)", turn.turn_id, actor.user_id, reason, turn.thread_id
        )
        metrics.STOPS_REFUSED.labels(reason=outcome).inc()
        await self._audit.record(
            AuditEntry(
                kind=AuditKind.REFUSED,
                workspace_id=turn.workspace_id,
                thread_id=turn.thread_id,
                actor_id=actor.user_id,
                actor_name=actor.display_name,
                outcome=outcome,
                reason=reason,
                detail={
                    "attempted": "stop",
                    "turn_id": turn.turn_id,
                    **({"actor_workspace_id": actor.workspace_id} if actor.workspace_id != turn.workspace_id else {}),
                },
            )
        )

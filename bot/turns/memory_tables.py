"""`TurnTables`: the rows the in-memory twins of the turns and upkeep stores share.

In PostgreSQL the conversation store, the inbox, the stop store, the upkeep's store and
retention read and write the same tables (`conversations`, `inbox`); their in-memory twins
(`InMemoryConversationStore`, `InMemoryInbox`, `InMemoryStopStore`, `InMemoryUpkeepStore`,
`InMemoryRetentionStore`) share one `TurnTables` the same way. Twins over one `TurnTables` behave
like stores over one database, and a new twin over the same tables like a restarted process.

Not modelled (other features' tables, or LangGraph's): reviews and approvals (no review is ever
open or resuming, no card pending), MCP questions, and checkpoints (a run starts from no
checkpoint, nothing is pruned). Each twin's docstring says what that changes for it. Nor is
more than one process: `TurnTables.lock` serialises the tasks of one event loop, where
PostgreSQL's row locks serialise every worker and replica.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from bot.audit.entries import AuditEntry
from bot.turns.conversations import Stopper, UnfinishedRun


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass(slots=True, kw_only=True)
class ConversationRecord:
    """One conversation, as the `conversations` table holds it (the columns the stores use).

    Attributes:
        thread_id / platform / workspace_id / channel_id / thread: the conversation.
        last_active_at: the last message or decision there.
        agent: the agent owning its checkpoint (None before its first turn).
        running_since: when the run whose outcome is due started (None: no run due).
        run_from: the newest top-level checkpoint when that run started (always None here).
        run_given_up: the run failed and is never run again.
        attempts / retry_at: the upkeep's attempts at the run, and when it may try next.
        settled: its graph state is at rest.
        prune_due / runs_since_prune: pruning bookkeeping (docs/decisions/0012).
        turn_id / turn_requester_id / turn_requester_name / turn_message: the current turn.
        stop_requested_at / stopped_by: the stop requested for the current turn, if any.
    """

    thread_id: str
    platform: str
    workspace_id: str
    channel_id: str
    thread: str | None
    last_active_at: datetime
    agent: str | None = None
    running_since: datetime | None = None
    run_from: str | None = None
    run_given_up: bool = False
    attempts: int = 0
    retry_at: datetime | None = None
    settled: bool = False
    prune_due: bool = False
    runs_since_prune: int = 0
    turn_id: str | None = None
    turn_requester_id: str | None = None
    turn_requester_name: str | None = None
    turn_message: str | None = None
    stop_requested_at: datetime | None = None
    stopped_by: Stopper | None = None

    @property
    def running(self) -> bool:
        """A run's outcome is due."""
        return self.running_since is not None

    def unfinished(self) -> UnfinishedRun | None:
        """The run whose outcome is due, if any."""
        if self.running_since is None:
            return None
        return UnfinishedRun(from_checkpoint=self.run_from, given_up=self.run_given_up)


@dataclass(slots=True, kw_only=True)
class InboxRecord:
    """One accepted message, as the `inbox` table holds it.

    Attributes:
        key: `<thread_id>:<message_id>`.
        thread_id: its conversation.
        message: the message in its stored (JSON) form (`bot.turns.inbox.message_to_json`).
        status: `accepted`, `handled` or `abandoned`.
        received_at: when it was accepted.
        attempts / retry_at: handling attempts, and when the upkeep may take it over.
    """

    key: str
    thread_id: str
    message: dict[str, Any]
    status: str
    received_at: datetime
    attempts: int = 0
    retry_at: datetime | None = None


@dataclass(slots=True)
class TurnTables:
    """The twins' shared data (see the module docstring).

    Attributes:
        conversations: `thread_id -> row`.
        inbox: `key -> entry`.
        audit: audit rows written by the twins (a stop's), oldest first, each with its `at`.
        started_at: when "the server" started (`UpkeepStore.server_started_at`).
        clock: the current time (UTC); a test may replace it to age rows.
        lock: held by a change PostgreSQL serialises with row locks (a stop, a give-up,
            retention's delete), so that such changes apply one at a time.
    """

    conversations: dict[str, ConversationRecord] = field(default_factory=dict)
    inbox: dict[str, InboxRecord] = field(default_factory=dict)
    audit: list[AuditEntry] = field(default_factory=list)
    clock: Callable[[], datetime] = _now
    started_at: datetime = field(default_factory=_now)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

"""`InMemoryConversationStore`: the `ConversationStore` in a process's memory, for tests.

Its rows live in a `TurnTables` (`bot.turns.memory_tables`) that the other turns and upkeep twins
may share, as the PostgreSQL stores share one database. Each method yields to the event loop
once, as a database round trip would, and then runs without awaiting, so it is atomic.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from bot.base.agent_kind import AgentKind
from bot.base.conversation import ConversationRef
from bot.turns.conversations import PRUNE_EVERY_RUNS, ConversationRow, RunningTurn, TurnStart, UnfinishedRun
from bot.turns.memory_tables import ConversationRecord, TurnTables


class InMemoryConversationStore:
    """A `ConversationStore` over `TurnTables` (see the module docstring).

    Not modelled: reviews (`ConversationRow.reviews_open` is always False) and LangGraph's
    checkpoints (a run starts from none: `UnfinishedRun.from_checkpoint` is always None).

    Args:
        tables: the rows to share with other twins; fresh ones when omitted.
        prune_every_runs: as for `PostgresConversationStore`.

    Raises:
        ValueError: when `prune_every_runs` is below 1.
    """

    def __init__(self, tables: TurnTables | None = None, *, prune_every_runs: int = PRUNE_EVERY_RUNS) -> None:
        if prune_every_runs < 1:
            raise ValueError(f"prune_every_runs must be at least 1, not {prune_every_runs}")
        self.tables = tables if tables is not None else TurnTables()
        self._prune_every_runs = prune_every_runs

    async def touch(self, conversation: ConversationRef) -> ConversationRow:
        """See `ConversationStore.touch`."""
        await asyncio.sleep(0)
        t = self.tables
        now = t.clock()
        row = t.conversations.get(conversation.thread_id)
        created = row is None
        if row is None:
            row = t.conversations[conversation.thread_id] = ConversationRecord(
                thread_id=conversation.thread_id,
                platform=conversation.platform,
                workspace_id=conversation.workspace_id,
                channel_id=conversation.channel_id,
                thread=conversation.thread,
                last_active_at=now,
            )
        else:
            row.last_active_at = now
        return ConversationRow(
            agent=AgentKind(row.agent) if row.agent else None,
            unfinished=row.unfinished(),
            created=created,
            reviews_open=False,
            settled=row.settled,
        )

    async def prune_soon(self, thread_id: str) -> None:
        """See `ConversationStore.prune_soon`."""
        await asyncio.sleep(0)
        if (row := self.tables.conversations.get(thread_id)) is not None:
            row.prune_due = True

    async def exists(self, thread_id: str) -> bool:
        """See `ConversationStore.exists`."""
        await asyncio.sleep(0)
        return thread_id in self.tables.conversations

    async def agent_of(self, thread_id: str) -> AgentKind | None:
        """See `ConversationStore.agent_of`."""
        await asyncio.sleep(0)
        row = self.tables.conversations.get(thread_id)
        return AgentKind(row.agent) if row is not None and row.agent else None

    async def mark_running(
        self,
        thread_id: str,
        *,
        retry_in_s: float,
        agent: AgentKind | None = None,
        turn: TurnStart | None = None,
    ) -> RunningTurn:
        """See `ConversationStore.mark_running`."""
        await asyncio.sleep(0)
        t = self.tables
        row = t.conversations.get(thread_id)
        if row is None:
            return RunningTurn(turn_id=None)
        now = t.clock()
        if row.running_since is None:
            row.run_from = None  # checkpoints are not modelled
            row.running_since = now
        row.settled = False
        row.prune_due = row.prune_due or row.runs_since_prune + 1 >= self._prune_every_runs
        row.runs_since_prune += 1
        retry_at = now + timedelta(seconds=retry_in_s)
        row.retry_at = retry_at if row.retry_at is None else max(row.retry_at, retry_at)
        if agent is not None:
            row.agent = agent.value
        if turn is not None:
            row.turn_id = turn.turn_id
            row.turn_requester_id = turn.requester_id
            row.turn_requester_name = turn.requester_name
            row.turn_message = turn.message_key
            row.stop_requested_at = None
            row.stopped_by = None
        row.run_given_up = False
        return RunningTurn(turn_id=row.turn_id, stopped_by=row.stopped_by if row.stop_requested_at else None)

    async def mark_delivered(self, thread_id: str, *, settled: bool = False) -> None:
        """See `ConversationStore.mark_delivered`."""
        await asyncio.sleep(0)
        row = self.tables.conversations.get(thread_id)
        if row is None or row.running_since is None:
            return
        row.running_since = None
        row.run_from = None
        row.attempts = 0
        row.retry_at = None
        row.run_given_up = False
        row.settled = settled

    async def give_up_run(self, thread_id: str) -> None:
        """See `ConversationStore.give_up_run`."""
        await asyncio.sleep(0)
        row = self.tables.conversations.get(thread_id)
        if row is not None and row.running_since is not None:
            row.run_given_up = True

    async def take_back_run(self, thread_id: str) -> None:
        """See `ConversationStore.take_back_run`."""
        await asyncio.sleep(0)
        if (row := self.tables.conversations.get(thread_id)) is not None:
            row.run_given_up = False

    async def run_message(self, thread_id: str) -> str | None:
        """See `ConversationStore.run_message`."""
        await asyncio.sleep(0)
        row = self.tables.conversations.get(thread_id)
        if row is None or row.running_since is None or row.run_given_up:
            return None
        return row.turn_message

    async def mark_settled(self, thread_id: str) -> None:
        """See `ConversationStore.mark_settled`."""
        await asyncio.sleep(0)
        row = self.tables.conversations.get(thread_id)
        if row is not None and row.running_since is None:
            row.settled = True

    async def unfinished_run(self, thread_id: str) -> UnfinishedRun | None:
        """See `ConversationStore.unfinished_run`."""
        await asyncio.sleep(0)
        row = self.tables.conversations.get(thread_id)
        return row.unfinished() if row is not None else None

"""`InMemoryInbox`: the `Inbox` in a process's memory, for tests.

Its entries live in a `TurnTables` (`bot.turns.memory_tables`), shared with the conversation
twin: giving a message up gives up its turn's run in the same tables, as PostgreSQL does in
one transaction. Each method yields to the event loop once, as a database round trip would,
and then runs without awaiting, so it is atomic.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from bot.base.conversation import IncomingMessage
from bot.turns.inbox import FIRST_RETRY_S, Begun, GivenUp, InboxEntry, message_from_json, message_to_json
from bot.turns.memory_tables import InboxRecord, TurnTables


class InMemoryInbox:
    """An `Inbox` over `TurnTables` (see the module docstring).

    Not modelled: a claim another transaction has not committed yet (PostgreSQL's `accept`
    then answers `accepted`; here every change is visible at once).

    Args:
        tables: the rows to share with other twins; fresh ones when omitted.
    """

    def __init__(self, tables: TurnTables | None = None) -> None:
        self.tables = tables if tables is not None else TurnTables()

    async def accept(self, key: str, message: IncomingMessage) -> str | None:
        """See `Inbox.accept`."""
        await asyncio.sleep(0)
        t = self.tables
        if (entry := t.inbox.get(key)) is not None:
            return entry.status
        now = t.clock()
        t.inbox[key] = InboxRecord(
            key=key,
            thread_id=message.conversation.thread_id,
            message=message_to_json(message),
            status="accepted",
            received_at=now,
            retry_at=now + timedelta(seconds=FIRST_RETRY_S),
        )
        return None

    async def begin(self, key: str, *, first_retry_s: float, max_retry_s: float) -> Begun | None:
        """See `Inbox.begin`."""
        await asyncio.sleep(0)
        t = self.tables
        entry = t.inbox.get(key)
        if entry is None or entry.status != "accepted":
            return None
        now = t.clock()
        entry.retry_at = now + timedelta(seconds=min(first_retry_s * 2**entry.attempts, max_retry_s))
        entry.attempts += 1
        behind = any(
            other.thread_id == entry.thread_id
            and other.status == "accepted"
            and (other.received_at, other.key) < (entry.received_at, entry.key)
            for other in t.inbox.values()
        )
        return Begun(attempts=entry.attempts, behind=behind, waited_s=(now - entry.received_at).total_seconds())

    async def uncount(self, key: str) -> None:
        """See `Inbox.uncount`."""
        await asyncio.sleep(0)
        entry = self.tables.inbox.get(key)
        if entry is not None and entry.status == "accepted":
            entry.attempts = max(entry.attempts - 1, 1)
            entry.retry_at = self.tables.clock()

    async def handled(self, key: str) -> None:
        """See `Inbox.handled`."""
        await asyncio.sleep(0)
        entry = self.tables.inbox.get(key)
        if entry is not None and entry.status == "accepted":
            entry.status = "handled"

    async def give_up(self, key: str) -> GivenUp | None:
        """See `Inbox.give_up`."""
        await asyncio.sleep(0)
        t = self.tables
        async with t.lock:
            entry = t.inbox.get(key)
            if entry is None or entry.status != "accepted":
                return None
            entry.status = "abandoned"
            row = t.conversations.get(entry.thread_id)
            run = row is not None and row.turn_message == key and row.running and not row.run_given_up
            if row is not None and run:
                row.run_given_up = True
        return GivenUp(key=key, run=run)

    async def take_back(self, given_up: GivenUp) -> None:
        """See `Inbox.take_back`."""
        await asyncio.sleep(0)
        t = self.tables
        async with t.lock:
            entry = t.inbox.get(given_up.key)
            if entry is None or entry.status != "abandoned":
                return
            entry.status = "accepted"
            entry.retry_at = t.clock()
            row = t.conversations.get(entry.thread_id)
            if given_up.run and row is not None and row.turn_message == given_up.key:
                row.run_given_up = False

    async def unhandled(self, thread_id: str) -> list[InboxEntry]:
        """See `Inbox.unhandled`."""
        await asyncio.sleep(0)
        now = self.tables.clock()
        entries = sorted(
            (e for e in self.tables.inbox.values() if e.thread_id == thread_id and e.status == "accepted"),
            key=lambda e: (e.received_at, e.key),
        )
        return [
            InboxEntry(key=e.key, message=message_from_json(e.message), waited_s=(now - e.received_at).total_seconds())
            for e in entries
        ]

    async def forget_older_than(self, hours: float) -> int:
        """See `Inbox.forget_older_than`."""
        await asyncio.sleep(0)
        t = self.tables
        before = t.clock() - timedelta(hours=hours)
        gone = [k for k, e in t.inbox.items() if e.received_at < before and e.status != "accepted"]
        for k in gone:
            del t.inbox[k]
        return len(gone)

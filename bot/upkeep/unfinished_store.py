"""Finding work a fault left unfinished, in every conversation, for the upkeep (`bot.upkeep.unfinished_work`).

Three kinds, each with `attempts` and `retry_at` (migration 0004): an accepted message not
handled (`inbox`), a run whose outcome was not delivered (`conversations.running_since`), and
a review claimed for resuming but not resumed (`reviews`). An item is due once `retry_at` has
passed; the upkeep counts an attempt, under the conversation's lock, before it works on it,
so that a crash while it works counts too.

`UpkeepStore` is the port: `PostgresUpkeepStore` (`bot.upkeep.unfinished_postgres`) in
production, `InMemoryUpkeepStore` (`bot.upkeep.unfinished_memory`) in tests. Both pass one
contract suite (tests/integration/upkeep/test_unfinished_store_contract.py).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection
from typing import Protocol


class UpkeepStore(Protocol):
    """Unfinished work across the inbox, conversations and reviews (see the module docstring)."""

    async def server_started_at(self) -> dt.datetime:
        """When the database server last started (PostgreSQL: `pg_postmaster_start_time()`).

        A change between two looks means the server restarted or failed over: every connection
        was dropped, and work under way then failed with it.
        """
        ...

    async def due_threads(
        self, *, platforms: Collection[str], max_attempts: int, everything: bool = False, limit: int = 200
    ) -> list[str]:
        """Conversations on `platforms` with unfinished work that is due, at most `limit`.

        Args:
            platforms: `ConversationRef.platform` names: those this process serves. Another
                platform's work is left to the processes that serve it; trying it here would
                fail and count attempts against it (docs/decisions/0031).
            max_attempts: messages and runs attempted this often are given up and not listed.
                A review still resuming is listed whatever its attempts: the attempt after the
                last gives it up (`TurnRunner.give_up_reviews`), and one an older version left
                resuming after its last attempt is given up so, instead of keeping its
                conversation busy for good.
            everything: list unfinished work whether or not it is due (at start, when every
                handler of before is gone; the conversation's lock still guards live ones).
            limit: at most this many conversations.
        """
        ...

    async def uncount_attempt(self, thread_id: str) -> None:
        """Take back the attempt `count_attempt` counted: shutdown cut the work, it did not fail.

        Attempts exist to give up work that fails or crashes the process every time; a turn cut
        by one graceful stop after another (deploys during a long turn) must not be given up
        for it. The work is due at once, for the next process or a live replica.

        Call under the conversation's lock.
        """
        ...

    async def count_attempt(self, thread_id: str, *, first_retry_s: float, max_retry_s: float) -> int:
        """Count an attempt at the conversation's unfinished run and resuming reviews.

        Call under the conversation's lock, right before working on it.

        Args:
            thread_id: the conversation.
            first_retry_s: seconds until the next attempt after a first one, doubled for
                every attempt after that, should this one fail too.
            max_retry_s: the longest such delay.

        Returns:
            The highest attempt count among them now (0 when there was nothing to count).
        """
        ...

"""Conversations the bot takes part in, which agent owns each, and whether a run is unfinished."""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg

from bot.base.agent_kind import AgentKind
from bot.base.conversation import ConversationRef

PRUNE_EVERY_RUNS = 4
"""Runs after which a conversation is due for pruning (docs/decisions/0012, "Every few runs"):
a conversation keeps at most this many runs' checkpoints beyond its newest one."""


class ConversationStore:
    """The `conversations` table.

    Args:
        pool: the asyncpg pool.
        prune_every_runs: a conversation is due for pruning once this many runs started since
            it was last pruned (`PRUNE_EVERY_RUNS`; 1: after every run).

    Raises:
        ValueError: when `prune_every_runs` is below 1.
    """

    def __init__(self, pool: asyncpg.Pool, *, prune_every_runs: int = PRUNE_EVERY_RUNS) -> None:
        if prune_every_runs < 1:
            raise ValueError(f"prune_every_runs must be at least 1, not {prune_every_runs}")
        self._pool = pool
        self._prune_every_runs = prune_every_runs

    async def touch(self, conversation: ConversationRef) -> ConversationRow:
        """Record that the conversation is active now (created on first use); return its row.

        The row spares the reads that `TurnRunner.settle` and `choose_agent` would make next:
        whether this call created the row (a conversation that has no checkpoint yet), and
        whether its last run's outcome is out with no review left open (a conversation at rest,
        whose checkpoint holds no pause).

        A message and a decision (`ApprovalStore.vote`) make a conversation active; runs the
        bot starts by itself do not, so that retention (`bot.upkeep.retention`) counts idle days
        from the last thing a person did there.
        """
        row = await self._pool.fetchrow(
            """
            INSERT INTO conversations (thread_id, platform, workspace_id, channel_id, thread)
            VALUES ($1, $2, $3, $4, $5)
            ON CONFLICT (thread_id) DO UPDATE SET last_active_at = now()
            RETURNING agent, running_since IS NOT NULL AS running, run_from, run_given_up, xmax = 0 AS created, settled,
                EXISTS (SELECT 1 FROM reviews r WHERE r.thread_id = $1 AND r.status <> 'done') AS reviews_open
            """,
            conversation.thread_id,
            conversation.platform,
            conversation.workspace_id,
            conversation.channel_id,
            conversation.thread,
        )
        if row is None:  # INSERT ... ON CONFLICT DO UPDATE always returns the row
            raise RuntimeError("the conversation row was not returned")
        return ConversationRow(
            agent=AgentKind(row["agent"]) if row["agent"] else None,
            unfinished=UnfinishedRun(from_checkpoint=row["run_from"], given_up=row["run_given_up"])
            if row["running"]
            else None,
            created=bool(row["created"]),
            reviews_open=bool(row["reviews_open"]),
            settled=bool(row["settled"]),
        )

    async def prune_soon(self, thread_id: str) -> None:
        """Have the upkeep's next pass prune the conversation's old checkpoints (`bot.upkeep.retention`)."""
        await self._pool.execute("UPDATE conversations SET prune_due = true WHERE thread_id = $1", thread_id)

    async def exists(self, thread_id: str) -> bool:
        """Whether the bot has taken part in this conversation (e.g. a Slack thread)."""
        return bool(await self._pool.fetchval("SELECT true FROM conversations WHERE thread_id = $1", thread_id))

    async def agent_of(self, thread_id: str) -> AgentKind | None:
        """The agent whose graph owns the conversation's checkpoint; None before its first turn."""
        value = await self._pool.fetchval("SELECT agent FROM conversations WHERE thread_id = $1", thread_id)
        return AgentKind(value) if value else None

    async def mark_running(
        self,
        thread_id: str,
        *,
        retry_in_s: float,
        agent: AgentKind | None = None,
        turn: TurnStart | None = None,
    ) -> RunningTurn:
        """A run of the conversation's graph starts: its outcome is due (see `mark_delivered`).

        Records the newest top-level checkpoint (LangGraph's `checkpoints` table, namespace
        `''`) as where the run started, unless an earlier run's outcome is still due, and counts
        the run: every `prune_every_runs` runs the conversation is due for pruning once the run
        is over (`bot.upkeep.retention`).
        A new human message's run starts a new turn here too (its id, requester and inbox key,
        no stop), in the same statement, so a turn costs no round trip of its own. A run starts
        not given up (`give_up_run`).

        Args:
            thread_id: the conversation.
            retry_in_s: seconds after which the upkeep may finish the run if its outcome is
                still not delivered and nobody holds the conversation's lock (a later
                `retry_at` set by the upkeep's backoff is kept).
            agent: the agent whose graph the run runs on, recorded as the owner of the
                conversation's checkpoint (`agent_of`); None: unchanged. Only a conversation
                at rest changes hands (`TurnRunner.choose_agent`).
            turn: the turn a new human message starts; None: the run goes on with the current
                turn (a resume, unfinished work).

        Returns:
            The turn the run belongs to, with the stop requested for it, if any (a resume of
            a stopped turn starts stopped).
        """
        row = await self._pool.fetchrow(
            """
            UPDATE conversations SET
                run_from = CASE WHEN running_since IS NULL THEN (
                    SELECT checkpoint_id FROM checkpoints WHERE thread_id = $1 AND checkpoint_ns = ''
                    ORDER BY checkpoint_id DESC LIMIT 1
                ) ELSE run_from END,
                running_since = coalesce(running_since, now()),
                settled = false,
                prune_due = prune_due OR runs_since_prune + 1 >= $7,
                runs_since_prune = runs_since_prune + 1,
                retry_at = greatest(retry_at, now() + make_interval(secs => $2)),
                agent = coalesce($3, agent),
                turn_id = coalesce($4::text, turn_id),
                turn_requester_id = CASE WHEN $4::text IS NULL THEN turn_requester_id ELSE $5 END,
                turn_requester_name = CASE WHEN $4::text IS NULL THEN turn_requester_name ELSE $6 END,
                stop_requested_at = CASE WHEN $4::text IS NULL THEN stop_requested_at END,
                stopped_by_id = CASE WHEN $4::text IS NULL THEN stopped_by_id END,
                stopped_by_name = CASE WHEN $4::text IS NULL THEN stopped_by_name END,
                turn_message = CASE WHEN $4::text IS NULL THEN turn_message ELSE $8 END,
                run_given_up = false
            WHERE thread_id = $1
            RETURNING turn_id, stop_requested_at IS NOT NULL AS stopped, stopped_by_id, stopped_by_name
            """,
            thread_id,
            retry_in_s,
            agent.value if agent is not None else None,
            turn.turn_id if turn is not None else None,
            turn.requester_id if turn is not None else None,
            turn.requester_name if turn is not None else None,
            self._prune_every_runs,
            turn.message_key if turn is not None else None,
        )
        if row is None:
            return RunningTurn(turn_id=None)
        stopper = (
            Stopper(user_id=row["stopped_by_id"] or "", display_name=row["stopped_by_name"] or "")
            if row["stopped"]
            else None
        )
        return RunningTurn(turn_id=row["turn_id"], stopped_by=stopper)

    async def mark_delivered(self, thread_id: str, *, settled: bool = False) -> None:
        """The last run's outcome is out (answer, cards, or a failure the conversation was told of).

        Args:
            thread_id: the conversation.
            settled: the run reached its end or its pauses (not a failure told instead), so its
                graph state is at rest (see `ConversationRow.at_rest`).
        """
        await self._pool.execute(
            "UPDATE conversations SET running_since = NULL, run_from = NULL, attempts = 0, retry_at = NULL, "
            "run_given_up = false, settled = $2 WHERE thread_id = $1 AND running_since IS NOT NULL",
            thread_id,
            settled,
        )

    async def give_up_run(self, thread_id: str) -> None:
        """The run failed and the conversation is about to be told: it is never run again.

        Written before the notice goes out (docs/decisions/0038-one-outcome-per-message.md):
        if the mark cannot be cleared after the notice (the database dropped), `TurnRunner.settle`
        clears it later without running or telling anything. A conversation with no run
        marked is left alone.

        Raises:
            Exception: the database's (then nobody may be told: the run is tried again instead).
        """
        await self._pool.execute(
            "UPDATE conversations SET run_given_up = true WHERE thread_id = $1 AND running_since IS NOT NULL",
            thread_id,
        )

    async def take_back_run(self, thread_id: str) -> None:
        """Undo `give_up_run` when the notice could not be sent: nobody heard, so the run may go on later."""
        await self._pool.execute("UPDATE conversations SET run_given_up = false WHERE thread_id = $1", thread_id)

    async def run_message(self, thread_id: str) -> str | None:
        """The inbox key of the message whose turn the conversation's marked run is, if any (not given up)."""
        value: str | None = await self._pool.fetchval(
            "SELECT turn_message FROM conversations "
            "WHERE thread_id = $1 AND running_since IS NOT NULL AND NOT run_given_up",
            thread_id,
        )
        return value

    async def mark_settled(self, thread_id: str) -> None:
        """`TurnRunner.settle` found the conversation at rest (no run due, no pause): it is settled."""
        await self._pool.execute(
            "UPDATE conversations SET settled = true WHERE thread_id = $1 AND running_since IS NULL", thread_id
        )

    async def unfinished_run(self, thread_id: str) -> UnfinishedRun | None:
        """The run whose outcome was never delivered (a crash, a failed post), if any."""
        row = await self._pool.fetchrow(
            "SELECT run_from, run_given_up FROM conversations WHERE thread_id = $1 AND running_since IS NOT NULL",
            thread_id,
        )
        return UnfinishedRun(from_checkpoint=row["run_from"], given_up=row["run_given_up"]) if row is not None else None


@dataclass(frozen=True, slots=True)
class ConversationRow:
    """A conversation as `ConversationStore.touch` found it.

    Attributes:
        agent: the agent that owns its checkpoint (None before its first turn).
        unfinished: the run whose outcome is still due, if any.
        created: `touch` created the row, so the conversation has no checkpoint yet: rows
            are created by a conversation's first message, before any run of its graph, and
            retention deletes a conversation's checkpoints and its row in one transaction.
        reviews_open: a review of the conversation is not done (pending, or claimed for
            resuming).
        settled: its last run reached its end or its pauses and its outcome went out, or
            `settle` found it at rest since (`mark_delivered(settled=True)`, `mark_settled`).
    """

    agent: AgentKind | None
    unfinished: UnfinishedRun | None
    created: bool = False
    reviews_open: bool = False
    settled: bool = False

    @property
    def at_rest(self) -> bool:
        """Nothing is left to settle: no checkpoint yet, or a settled state with no run due and no review open.

        A run unmarks `settled` before its first step and sets it only when it reached its end
        or its pauses and the answer or the cards are out; a failed run (told, not finished)
        leaves it unset, as does a crash. A pause's review is done only once its interrupt is
        no longer pending. So a settled conversation with no unfinished run and no open review
        holds no pause, no unposted card, no claimed review and no run cut short, and its
        checkpoint need not be read to know it (docs/decisions/0014). Read under the
        conversation's lock, which every run holds; a click can only claim a review that is
        open.
        """
        return self.created or (self.settled and self.unfinished is None and not self.reviews_open)


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnStart:
    """A turn a new human message starts (`TurnRunner.ask`).

    Attributes:
        turn_id: a new random id (a Stop button names it).
        requester_id: the message's author, who may stop the turn.
        requester_name: their display name.
        message_key: the message's inbox key (`bot.turns.inbox.inbox_key`), when it has one:
            giving the message up gives the turn's run up too (`Inbox.give_up`).
    """

    turn_id: str
    requester_id: str
    requester_name: str
    message_key: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Stopper:
    """Who stopped a turn, as recorded with the stop."""

    user_id: str
    display_name: str


@dataclass(frozen=True, slots=True, kw_only=True)
class RunningTurn:
    """The turn a run belongs to, as `ConversationStore.mark_running` found it.

    Attributes:
        turn_id: the turn's id; None for a conversation whose last message came before turns
            were recorded (such a run cannot be stopped).
        stopped_by: who stopped the turn, when a stop was requested for it.
    """

    turn_id: str | None
    stopped_by: Stopper | None = None


@dataclass(frozen=True, slots=True)
class UnfinishedRun:
    """A run whose outcome is still due.

    Attributes:
        from_checkpoint: the newest top-level checkpoint when it started (None: there was
            none); if the thread's newest checkpoint is still this one, the run made no progress.
        given_up: the run failed and its failure was told, or was about to be (`give_up_run`):
            it is never run again, its mark only cleared.
    """

    from_checkpoint: str | None
    given_up: bool = False

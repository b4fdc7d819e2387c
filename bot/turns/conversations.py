"""Conversations the bot takes part in, which agent owns each, and whether a run is unfinished.

`ConversationStore` is the port: `PostgresConversationStore` (`bot.turns.conversations_postgres`)
in production, `InMemoryConversationStore` (`bot.turns.conversations_memory`) in tests. Both pass
one contract suite (tests/integration/turns/test_conversation_store_contract.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from bot.base.agent_kind import AgentKind
from bot.base.conversation import ConversationRef

PRUNE_EVERY_RUNS = 4
"""Runs after which a conversation is due for pruning (docs/decisions/0012, "Every few runs"):
a conversation keeps at most this many runs' checkpoints beyond its newest one."""


class ConversationStore(Protocol):
    """The `conversations` table: which agent owns each conversation, its run marks and its turn.

    A conversation's row is created by its first message (`touch`); a run of its graph marks it
    (`mark_running`) until the run's outcome is out (`mark_delivered`).
    """

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
        ...

    async def prune_soon(self, thread_id: str) -> None:
        """Have the upkeep's next pass prune the conversation's old checkpoints (`bot.upkeep.retention`)."""
        ...

    async def exists(self, thread_id: str) -> bool:
        """Whether the bot has taken part in this conversation (e.g. a Slack thread)."""
        ...

    async def agent_of(self, thread_id: str) -> AgentKind | None:
        """The agent whose graph owns the conversation's checkpoint; None before its first turn."""
        ...

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
        ...

    async def mark_delivered(self, thread_id: str, *, settled: bool = False) -> None:
        """The last run's outcome is out (answer, cards, or a failure the conversation was told of).

        Args:
            thread_id: the conversation.
            settled: the run reached its end or its pauses (not a failure told instead), so its
                graph state is at rest (see `ConversationRow.at_rest`).
        """
        ...

    async def give_up_run(self, thread_id: str) -> None:
        """The run failed and the conversation is about to be told: it is never run again.

        Written before the notice goes out (docs/decisions/0038-one-outcome-per-message.md):
        if the mark cannot be cleared after the notice (the database dropped), `TurnRunner.settle`
        clears it later without running or telling anything. A conversation with no run
        marked is left alone.

        Raises:
            Exception: the database's (then nobody may be told: the run is tried again instead).
        """
        ...

    async def take_back_run(self, thread_id: str) -> None:
        """Undo `give_up_run` when the notice could not be sent: nobody heard, so the run may go on later."""
        ...

    async def run_message(self, thread_id: str) -> str | None:
        """The inbox key of the message whose turn the conversation's marked run is, if any (not given up)."""
        ...

    async def mark_settled(self, thread_id: str) -> None:
        """`TurnRunner.settle` found the conversation at rest (no run due, no pause): it is settled."""
        ...

    async def unfinished_run(self, thread_id: str) -> UnfinishedRun | None:
        """The run whose outcome was never delivered (a crash, a failed post), if any."""
        ...


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

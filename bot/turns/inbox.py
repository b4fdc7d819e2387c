"""The inbox: every platform message the bot accepted, until it is handled.

A message is claimed by its platform id when it arrives (`accept`), atomically in PostgreSQL,
so a platform's retry, the same message seen twice, or another replica never starts a second
turn. The claim stands only for a message that gets handled: `handled` is written once the
sender was answered or refused, and `abandoned` once it was given up (its sender is then told it
could not be answered). A message still `accepted` at its `retry_at` (its handler crashed, or
nobody could be told of its failure) is handled again by the upkeep of whichever replica is
alive (`bot.upkeep.unfinished_work`), under the conversation's lock; `begin` under that lock makes sure only one
handler runs it (docs/decisions/0009). So is one whose outcome was out when the database
dropped before `handled` was written: its turn is found in the checkpoint and it is recorded
handled then, never given up. Giving a message up is recorded before its sender is told,
together with its run, so that nothing answers it afterwards
(docs/decisions/0038-one-outcome-per-message.md). Only finished entries are deleted with age.

`Inbox` is the port: `PostgresInbox` (`bot.turns.inbox_postgres`) in production, `InMemoryInbox`
(`bot.turns.inbox_memory`) in tests. Both pass one contract suite
(tests/integration/turns/test_inbox_contract.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from bot.base.conversation import Actor, ConversationRef, IncomingMessage

FIRST_RETRY_S = 30.0
"""How long a handler has before the upkeep may take an accepted message over."""


@dataclass(frozen=True, slots=True)
class InboxEntry:
    """An accepted message.

    Attributes:
        key: `<thread_id>:<message_id>`.
        message: the message as accepted.
        waited_s: seconds since it arrived (the database's clock).
    """

    key: str
    message: IncomingMessage
    waited_s: float = 0.0


def inbox_key(message: IncomingMessage) -> str | None:
    """The claim key of a message: `<thread_id>:<platform message id>`; None without an id."""
    if message.message_id is None:
        return None
    return f"{message.conversation.thread_id}:{message.message_id}"


class Inbox(Protocol):
    """Every accepted platform message until it is handled (see the module docstring)."""

    async def accept(self, key: str, message: IncomingMessage) -> str | None:
        """Claim a message; None when it is new, else the status of the earlier claim.

        Returns:
            None for a new message (now `accepted`); `accepted`, `handled` or `abandoned` for
            a message claimed before (a platform retry, a replica, a second copy).
        """
        ...

    async def begin(self, key: str, *, first_retry_s: float, max_retry_s: float) -> Begun | None:
        """Begin handling an accepted message (under the conversation's lock).

        Args:
            key: the message's key.
            first_retry_s: seconds after the first attempt before the upkeep may take the
                message over if it is still not handled; doubled for every attempt after that.
            max_retry_s: the longest such delay.

        Returns:
            How many times its handling has begun, this time included, whether an older
            message of the same conversation is still unhandled, and how long ago it arrived;
            None when it is no longer `accepted` (another handler finished it).
        """
        ...

    async def uncount(self, key: str) -> None:
        """Take back the attempt `begin` counted: shutdown cut the handling, it did not fail.

        One attempt stays counted, so the next handling knows the message's turn may have begun
        (`Begun.attempts` above 1) and does not ask it twice. The message is due at once.
        """
        ...

    async def handled(self, key: str) -> None:
        """The message was answered or refused (one given up meanwhile stays given up)."""
        ...

    async def give_up(self, key: str) -> GivenUp | None:
        """Give a message up, with the run of its turn, before its sender is told; None if it was finished already.

        One transaction: the message becomes `abandoned`, and a run of the conversation that
        belongs to its turn (`conversations.turn_message`) and is still marked is given up
        (`run_given_up`): `TurnRunner.settle` then clears it and never runs it again, so no
        answer can follow the notice (docs/decisions/0038-one-outcome-per-message.md). Of two
        handlers giving up one message, one gets it; only that one tells the sender. A message
        whose turn already had its outcome is not to be given up but recorded `handled`: the
        caller looks first, under the conversation's lock (`Messages._give_up`).

        Args:
            key: the message's key.

        Returns:
            What was given up; None when the message was no longer `accepted`.

        Raises:
            Exception: the database's (nothing was given up).
        """
        ...

    async def take_back(self, given_up: GivenUp) -> None:
        """Undo `give_up` when its sender could not be told: the message is handled again later.

        Nobody heard of the failure, so the message may still be answered: it is `accepted`
        again (due at once), and its run, if `give_up` gave it up, may be finished again.
        """
        ...

    async def unhandled(self, thread_id: str) -> list[InboxEntry]:
        """The thread's accepted messages, oldest first."""
        ...

    async def forget_older_than(self, hours: float) -> int:
        """Delete finished entries received more than `hours` ago (platforms retry within minutes); return how many.

        Only `handled` and `abandoned` entries go. An entry still `accepted` is a message
        nobody answered yet (an outage kept the upkeep from it): it stays until the upkeep
        answers it, or gives it up and tells its sender (`bot.upkeep.unfinished_work.ANSWER_WITHIN_S`), and
        goes with age after that.
        """
        ...


def message_to_json(message: IncomingMessage) -> dict[str, Any]:
    """The form the inbox keeps a message in (JSON: PostgreSQL's `inbox.message` column)."""
    actor = message.actor
    return {
        "thread_id": message.conversation.thread_id,
        "text": message.text,
        "message_id": message.message_id,
        "actor": {
            "platform": actor.platform,
            "workspace_id": actor.workspace_id,
            "user_id": actor.user_id,
            "display_name": actor.display_name,
            "is_admin": actor.is_admin,
            "groups": sorted(actor.groups),
        },
    }


def message_from_json(data: dict[str, Any]) -> IncomingMessage:
    """The message `message_to_json` kept."""
    conversation = ConversationRef.from_thread_id(str(data["thread_id"]))
    actor = data["actor"]
    return IncomingMessage(
        actor=Actor(
            platform=str(actor["platform"]),
            workspace_id=str(actor["workspace_id"]),
            user_id=str(actor["user_id"]),
            display_name=str(actor["display_name"]),
            is_admin=actor.get("is_admin"),
            groups=frozenset(str(g) for g in actor.get("groups") or ()),
        ),
        conversation=conversation,
        text=str(data["text"]),
        message_id=data.get("message_id"),
    )


@dataclass(frozen=True, slots=True)
class Begun:
    """A message whose handling `Inbox.begin` began.

    Attributes:
        attempts: how many times its handling has begun, this time included.
        behind: an older message of the same conversation is still unhandled (its handler
            died, or its answer could not be posted): it is to be handled first, while its
            turn is still in the checkpoint to be recognised (a later turn may fold it away).
        waited_s: seconds since the message arrived (the database's clock).
    """

    attempts: int
    behind: bool
    waited_s: float = 0.0


@dataclass(frozen=True, slots=True)
class GivenUp:
    """A message `Inbox.give_up` gave up.

    Attributes:
        key: the message's key.
        run: the run of its turn was given up with it (`Inbox.take_back` undoes that too).
    """

    key: str
    run: bool

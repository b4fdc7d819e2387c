"""The core's errors: one root, structured subclasses.

Adapters turn these into user text in exactly one place each (docs/development.md, convention 6); the core
never writes user-facing sentences about them, it only carries the facts.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum


class CountersignError(Exception):
    """Root of every error the core raises on purpose."""


class ConfigurationError(CountersignError):
    """The settings cannot work (a missing key, an unloadable tools module, ...)."""


class UnreachableError(CountersignError):
    """A service the bot needs could not be reached now, or answered that it cannot serve now.

    An outage, not a setting to fix: a refused, reset or timed-out connection, a name that does
    not resolve, PostgreSQL starting or shutting down, Slack or Discord answering 5xx or 429.
    `countersign run` tries its start again with backoff (`START_RETRY_S`) and then exits with
    status 75; a worker that does is restarted by its supervisor, which never stops the other
    workers for it (docs/decisions/0037-outages-probes-and-tokens-at-rest.md). A refusal (a bad
    token, a wrong password, a missing database) is a `ConfigurationError` or a
    `DatabaseUnavailableError` instead.
    """


class DatabaseUnavailableError(CountersignError):
    """PostgreSQL refused us, the URL is wrong, or (as `DatabaseUnreachableError`) it cannot be reached.

    Args:
        target: where we tried to connect, with any password removed.
        detail: the driver's own one-line reason.
    """

    def __init__(self, target: str, detail: str) -> None:
        super().__init__(f"cannot reach PostgreSQL at {target}: {detail}")
        self.target = target
        self.detail = detail


class DatabaseUnreachableError(DatabaseUnavailableError, UnreachableError):
    """PostgreSQL cannot be reached now (an outage: see `UnreachableError`); same arguments."""


class MigrationLockedError(UnreachableError):
    """Another process holds the database's migration lock (a row in yoyo's `yoyo_lock` table).

    An outage: the lock is released once that process's migrations end (another replica
    starting during a rolling deploy), so a start tries again. A row left by a process killed
    while it migrated stays until someone deletes it, which the message says.

    Args:
        target: the database, with any password removed.
        since: when the lock was taken, as shown (UTC).
    """

    def __init__(self, target: str, since: str) -> None:
        super().__init__(
            f"another process holds the migration lock of PostgreSQL at {target} (since {since}): its migrations "
            "are running, or it was killed while they ran (then delete the row of table yoyo_lock)"
        )
        self.target = target
        self.since = since


class ModelErrorKind(StrEnum):
    """Why a model call failed, as far as the user needs to know."""

    BUSY = "busy"
    """429 after every retry: the quota or rate limit is exhausted."""
    UNAVAILABLE = "unavailable"
    """5xx, a timeout or a connection failure after every retry."""
    REJECTED = "rejected"
    """A 4xx other than those below: the request itself was refused (its content, its size)."""
    AUTH = "auth"
    """The API key was refused (missing, invalid, or without permission)."""
    NOT_FOUND = "not_found"
    """The model name does not exist (`GEMINI_MODEL`)."""
    TOOLS_REFUSED = "tools_refused"
    """A 400 about the request's function declarations: a tool's name or schema was refused."""
    NO_ANSWER = "no_answer"
    """The model answered with neither text nor a tool call, also when asked once more
    (`NoAnswerError` says why)."""


class NoAnswerReason(StrEnum):
    """Why the model gave no answer, as far as Gemini says (`bot.agents.no_answer`)."""

    BLOCKED = "blocked"
    """The prompt was blocked (`promptFeedback.blockReason`): no candidate at all."""
    SAFETY = "safety"
    """The reply was withheld by safety filters (`SAFETY`, `PROHIBITED_CONTENT`, `BLOCKLIST`, `SPII`)."""
    RECITATION = "recitation"
    """The reply was withheld because it resembled published text (`RECITATION`)."""
    MAX_TOKENS = "max_tokens"
    """The output limit was reached before any text (`MAX_TOKENS`; thinking can use it up)."""
    MALFORMED_CALL = "malformed_call"
    """A function call Gemini or the client could not parse (`MALFORMED_FUNCTION_CALL`, ...)."""
    EMPTY = "empty"
    """A normal stop with nothing in it (an empty text part, or no parts)."""
    OTHER = "other"
    """Any other finish reason (`OTHER`, `LANGUAGE`, ...)."""


class ModelError(CountersignError):
    """The model call failed after its bounded retries; the thread stays usable.

    Args:
        kind: the class of failure.
        detail: the client's message (no secrets: Google's errors do not echo the key).
        retry_after_s: for `BUSY`, how long Google asked to wait (`google.rpc.RetryInfo`), when
            that was longer than the bot's retries could wait.
    """

    def __init__(self, kind: ModelErrorKind, detail: str, *, retry_after_s: float | None = None) -> None:
        super().__init__(f"model call failed ({kind}): {detail}")
        self.kind = kind
        self.detail = detail
        self.retry_after_s = retry_after_s


class NoAnswerError(ModelError):
    """The model answered with neither text nor a tool call (kind `NO_ANSWER`).

    Nothing of that answer is stored: an AI message without content would be sent back to
    Gemini as an empty text part, which the API refuses on every later call.

    Args:
        reason: why, as far as Gemini says.
        detail: Gemini's own words (finish reason, block reason, finish message), for the log.
    """

    def __init__(self, reason: NoAnswerReason, detail: str) -> None:
        super().__init__(ModelErrorKind.NO_ANSWER, detail)
        self.reason = reason


class ApprovalNotFoundError(CountersignError):
    """No approval has this id (a forged or foreign button value)."""

    def __init__(self, approval_id: str) -> None:
        super().__init__(f"no approval {approval_id!r}")
        self.approval_id = approval_id


class AlreadyDecidedError(CountersignError):
    """The approval was decided before this attempt; nothing was changed.

    Args:
        outcome: the stored status (`approved`, `edited`, `rejected`, `expired`).
        decided_by_id: platform user id of the decider (None for an expiry).
        decided_by_name: display name of the decider, for the reply.
        decided_at: when it was decided.
    """

    def __init__(
        self,
        *,
        outcome: str,
        decided_by_id: str | None,
        decided_by_name: str | None,
        decided_at: datetime | None,
    ) -> None:
        super().__init__(f"already {outcome} by {decided_by_name or decided_by_id or 'nobody'}")
        self.outcome = outcome
        self.decided_by_id = decided_by_id
        self.decided_by_name = decided_by_name
        self.decided_at = decided_at


class AlreadyVotedError(CountersignError):
    """This person already approved these arguments; a quorum counts each person once."""

    def __init__(self, approval_id: str) -> None:
        super().__init__(f"already voted on {approval_id!r}")
        self.approval_id = approval_id


class StaleVoteError(CountersignError):
    """The arguments under vote changed while the vote was being checked; nothing changed."""

    def __init__(self, approval_id: str) -> None:
        super().__init__(f"the arguments of {approval_id!r} changed; try again")
        self.approval_id = approval_id


class NotPermittedError(CountersignError):
    """The clicker may not decide this approval; nothing was changed.

    Args:
        reason: a short machine-readable reason, e.g. `not_requester_or_admin`.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(f"not permitted: {reason}")
        self.reason = reason


class StopNotPermittedError(NotPermittedError):
    """The person may not stop this turn (not its requester, not an admin); nothing was changed.

    Args:
        reason: `other_workspace` or `not_requester_or_admin`.
        requester_id: the turn's requester (who may stop it), when known.
    """

    def __init__(self, reason: str, *, requester_id: str | None = None) -> None:
        super().__init__(reason)
        self.requester_id = requester_id


class TrustRefusedError(CountersignError):
    """An "Approve and trust" click that cannot make a trust grant; nothing was changed (docs/decisions/0022).

    Args:
        reason: `not_offered` (no trust setting covers the tool here now, the call has no
            known requester, or its card offered no trust), `quorum` (the call needs more than
            one approval now, so no single click approves it), `not_approve` (trust goes only
            with an approval) or `escalation` (the clicker may decide the call only because its
            card escalated to them, which never covers the tool's later calls).
    """

    def __init__(self, reason: str) -> None:
        super().__init__(f"trust refused: {reason}")
        self.reason = reason


class UnshowableError(CountersignError):
    """An approval refused where the platform cannot show the call's arguments in full; nothing changed.

    An approver sees every key and value that will run before deciding
    (docs/decisions/0034-arguments-approvers-can-see.md): where the platform cannot show them,
    the call may be rejected (or edited, when the edit fits) but not approved.

    Args:
        platform: the platform the card is on.
        keys: True when the card cannot list every key; False when the whole arguments do not
            fit the platform's full view.
        size: the arguments' characters as the platform shows them, or their number of keys.
        limit: the most the platform shows, in the same unit.
    """

    def __init__(self, *, platform: str, keys: bool, size: int, limit: int) -> None:
        unit = "keys" if keys else "characters"
        super().__init__(f"too long to review on {platform}: {size} {unit}, at most {limit}")
        self.platform = platform
        self.keys = keys
        self.size = size
        self.limit = limit


class CardNotPostedError(CountersignError):
    """Approve all reached a call whose card has not been posted; that call stays pending, unchanged.

    Approve all is one click on the pause's first card; it approves only calls whose own card
    is posted, so nobody approves arguments that were never shown
    (docs/decisions/0041-no-card-no-approval.md). The bot posts a card that failed again
    (`bot.reviews.cards.CardDesk.post`, then the upkeep); it is decided on that card.

    Args:
        approval_id: the call left pending.
    """

    def __init__(self, approval_id: str) -> None:
        super().__init__(f"the card of {approval_id!r} has not been posted")
        self.approval_id = approval_id


class InvalidDecisionError(CountersignError):
    """A decision does not fit the pending action; nothing was changed and the card stays usable.

    Args:
        message: what is wrong, in words fit for the person who sent it.
        field: for an edit, the argument path that failed (e.g. `args.url`), when known.
    """

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


class ToolOutcomeUnknownError(CountersignError):
    """A tool's call was sent and may or may not have taken effect.

    Raised by a tool when it lost sight of a call it had sent: the connection closed, or the
    call timed out, while the far side was working on it (an MCP server's tool, say). The
    tool node answers the model with `message` and records the call's outcome as unknown, so
    its card says it may or may not have taken effect, as for a call a stop cut short
    (docs/decisions/0009-unfinished-work-and-the-upkeep.md: tool calls are at most once).

    Args:
        message: what the model reads: what happened and that the outcome is unknown.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidArgumentsError(CountersignError):
    """A tool call's arguments have no canonical form: the tool would refuse them as written.

    Raised by a tool's canonical form (`bot.tools.canonical`), e.g. an `http_request` URL with a
    user name in it. The call then cannot run: the model's call is answered at once with this
    message, with no card (`bot.tools.refusals`), a policy condition never judges such arguments
    (it fails closed), and an edit with them is refused before anything is recorded.

    Args:
        message: what is wrong and how to write it instead, for the model or the editor.
        field: the argument path that failed (e.g. `args.url`), when known.
    """

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


class BusyReason(StrEnum):
    """Why a conversation's state cannot be changed right now."""

    REVIEW_PENDING = "review_pending"
    """A card waits for a decision: its calls must stay in the history the graph resumes."""
    TURN_RUNNING = "turn_running"
    """A turn runs, a message waits to be answered, or work a fault cut short is unfinished."""


class ConversationBusyError(CountersignError):
    """The conversation is in use; its state was not changed (e.g. `/countersign context reset`).

    Args:
        reason: what it is busy with.
    """

    def __init__(self, reason: BusyReason) -> None:
        super().__init__(f"conversation busy: {reason}")
        self.reason = reason


class NothingToStopError(CountersignError):
    """`stop` in a conversation where no turn runs or waits for a card; nothing was changed."""

    def __init__(self) -> None:
        super().__init__("nothing to stop")


class TurnEndedError(CountersignError):
    """A Stop button of a turn that has ended (or was never started); nothing was changed."""

    def __init__(self) -> None:
        super().__init__("that turn has ended")


class AlreadyStoppedError(CountersignError):
    """The turn was stopped before this request (a second click, a second person); nothing changed.

    Args:
        stopped_by_id: platform user id of whoever stopped it.
        stopped_by_name: their display name.
        stopped_at: when the stop was requested.
    """

    def __init__(self, *, stopped_by_id: str | None, stopped_by_name: str | None, stopped_at: datetime | None) -> None:
        super().__init__(f"already stopped by {stopped_by_name or stopped_by_id or 'somebody'}")
        self.stopped_by_id = stopped_by_id
        self.stopped_by_name = stopped_by_name
        self.stopped_at = stopped_at

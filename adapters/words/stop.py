"""Words for Stop, shared by the Slack and Discord adapters and the terminal.

A Stop button and `/countersign stop` answer with the same sentences on every platform, only
the markup differs (`adapters.words.markup.Markup`); both answers are private (ephemeral). The
conversation itself is told by each adapter's `TurnStopped` notice (its messages module).
"""

from __future__ import annotations

from adapters.words.markup import Markup
from bot.admin.views import StopRequested
from bot.base.errors import AlreadyStoppedError, NothingToStopError, StopNotPermittedError, TurnEndedError

STOPPING = (
    "Stopping: the bot ends this turn at its next step. It starts no new model or tool call; a tool "
    "already running finishes, or is cancelled when it can be."
)
STOPPED_PAUSED = "Stopped. {cards} waiting for a decision {verb} closed as stopped, and nothing of this turn will run."
NOTHING_TO_STOP = "Nothing to stop: the bot is not working on anything in this conversation."
TURN_ENDED = "That turn has already ended, so there is nothing to stop. Nothing was changed."
ALREADY_STOPPED = "This turn was already stopped by {user}{when}. Nothing was changed."
REFUSED = "You can't stop this turn: only the person who asked{requester} and {admins}, and bot admins, can."
REFUSED_OTHER_WORKSPACE = "You can't stop this turn: it belongs to another workspace."
STOP_HELP = "stop the bot's running turn here (the person who asked, or an admin)"
"""The `help` example's meaning."""


def stopped_text(reply: StopRequested) -> str:
    """The private answer to a Stop that was recorded."""
    if reply.paused and reply.cards_closed:
        cards = "1 card" if reply.cards_closed == 1 else f"{reply.cards_closed} cards"
        return STOPPED_PAUSED.format(cards=cards, verb="was" if reply.cards_closed == 1 else "were")
    return STOPPING


def stop_error_text(error: Exception, markup: Markup) -> str | None:
    """The private answer to a refused Stop, or None when `error` is not about a stop."""
    if isinstance(error, NothingToStopError):
        return NOTHING_TO_STOP
    if isinstance(error, TurnEndedError):
        return TURN_ENDED
    if isinstance(error, AlreadyStoppedError):
        user = markup.user(error.stopped_by_id) if error.stopped_by_id else markup.escape(error.stopped_by_name or "")
        when = f" ({markup.when(error.stopped_at)})" if error.stopped_at else ""
        return ALREADY_STOPPED.format(user=user or "someone", when=when)
    if isinstance(error, StopNotPermittedError):
        if error.reason == "other_workspace":
            return REFUSED_OTHER_WORKSPACE
        requester = f" ({markup.user(error.requester_id)})" if error.requester_id else ""
        return REFUSED.format(requester=requester, admins=markup.admins_are)
    return None

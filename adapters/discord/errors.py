"""Core errors to Discord text: the one place this adapter words them (docs/development.md, convention 6)."""

from __future__ import annotations

from datetime import datetime

from adapters.discord import messages as msg
from adapters.words.decisions import as_sentence, decision_error_text, edit_error_text
from bot.base.errors import InvalidDecisionError, NotPermittedError
from bot.tools.mcp.elicitation.desk import AlreadyAnsweredError, QuestionNotFoundError
from bot.tools.mcp.elicitation.forms import AnswerError


def when(moment: datetime) -> str:
    """A moment as Discord shows it to each reader (relative), after a space."""
    return f" <t:{int(moment.timestamp())}:R>"


def error_text(error: Exception) -> str:
    """What the clicker reads about `error` (ephemeral); never a traceback."""
    return decision_error_text(error, msg, when)


def edit_refusal_text(error: InvalidDecisionError) -> str:
    """What the editor reads (ephemeral, with **Edit again**) when an edit's arguments are refused."""
    return edit_error_text(error, msg, when)


def question_error_text(error: Exception, *, requester_id: str | None) -> str:
    """What the clicker of a question's button or form reads about `error` (ephemeral); never a traceback.

    Args:
        error: what `Countersign.question` or `Countersign.answer_question` raised.
        requester_id: the Discord user id of the person asked, named to anyone else; None when
            the question is unknown.
    """
    if isinstance(error, NotPermittedError) and requester_id is not None:
        return msg.QUESTION_ONLY_REQUESTER_CLICK.format(user=requester_id)
    if isinstance(error, QuestionNotFoundError):
        return msg.QUESTION_UNKNOWN
    if isinstance(error, AlreadyAnsweredError):
        return msg.QUESTION_CLOSED.get(error.status.value, msg.QUESTION_CLOSED["answered"])
    if isinstance(error, AnswerError):
        return msg.QUESTION_PROBLEM.format(problem=as_sentence(error.message))
    return error_text(error)

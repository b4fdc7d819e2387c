"""Core errors to Slack text: the one place the Slack adapter words them (docs/development.md, convention 6)."""

from __future__ import annotations

from adapters.slack import messages as msg
from adapters.slack.blocks import when_token
from adapters.words.conversation import SHUTTING_DOWN
from adapters.words.decisions import decision_error_text, edit_error_text
from bot.base.errors import NotPermittedError
from bot.service import ShuttingDownError
from bot.tools.mcp.elicitation.desk import AlreadyAnsweredError, QuestionNotFoundError
from bot.tools.mcp.elicitation.forms import AnswerError


def error_text(error: Exception) -> str:
    """What the person who clicked or typed reads about `error`; never a traceback."""
    return decision_error_text(error, msg, lambda moment: f" at {when_token(moment)}")


def edit_refusal_text(error: Exception) -> str:
    """What the editor reads in the edit form about `error`: a refused edit in words about the edit."""
    return edit_error_text(error, msg, lambda moment: f" at {when_token(moment)}")


def question_error_text(error: Exception, *, requester_id: str | None = None) -> str:
    """What the person who pressed a question's button or sent its form reads about `error`.

    Args:
        error: what `Countersign.question` or `Countersign.answer_question` raised.
        requester_id: the Slack user id of the person asked, named in a refusal to anyone else.
    """
    if isinstance(error, AnswerError):
        return error.message
    if isinstance(error, NotPermittedError):
        return msg.QUESTION_NOT_YOURS.format(user=requester_id) if requester_id else msg.REFUSED_NOT_PERMITTED
    if isinstance(error, AlreadyAnsweredError):
        return msg.QUESTION_CLOSED.get(error.status.value, msg.QUESTION_CLOSED["answered"])
    if isinstance(error, QuestionNotFoundError):
        return msg.QUESTION_UNKNOWN
    if isinstance(error, ShuttingDownError):
        return SHUTTING_DOWN
    return msg.QUESTION_FAILED

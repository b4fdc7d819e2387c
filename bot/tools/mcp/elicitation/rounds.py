"""A call's rounds: a server's questions out of an `InputRequiredResult`, the requester's answers back in.

On the 2026-07-28 protocol a server may answer `tools/call` with an `InputRequiredResult` and
expects the call again carrying `input_responses` and the echoed `request_state`. When a round
asks only elicitation questions (form or URL mode), the tool node pauses the graph with a
question payload (`question_payload`) addressed to the requester, and sends the next round with
their answers (`responses_of`) under a claim of its own; the tool reads what to send from
`ROUND_INPUT`. Anything else (sampling, roots, a state-only round) stays an outcome unknown
(docs/decisions/0048-mcp-input-required.md, docs/decisions/0054-mcp-elicitation.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import mcp_types

from bot.tools.mcp.elicitation.forms import (
    Action,
    Answer,
    AnswerError,
    UnusableQuestionError,
    check_answer,
    question_of,
)
from bot.tools.mcp.elicitation.store import answer_json, answer_of

QUESTION_KIND = "mcp_question"
"""The `type` of an interrupt payload that asks a requester a server's questions."""
MAX_QUESTION_ROUNDS = 5
"""Rounds of questions one call may ask; a server asking again after that ends the call as outcome unknown."""


@dataclass(frozen=True, slots=True)
class RoundInput:
    """What the next `tools/call` of a call carries: the answers by request key, and the server's state."""

    input_responses: dict[str, mcp_types.ElicitResult]
    request_state: str | None


ROUND_INPUT: ContextVar[RoundInput | None] = ContextVar("countersign_mcp_round_input", default=None)
"""Set by the tool node around a round after the first; an MCP tool sends it with its call."""


class InputAskedError(Exception):
    """The server answered the call with questions for a person only: the tool node asks the requester.

    Raised by an MCP tool out of `ainvoke` (it is not a `ToolException`, so LangChain passes it on).

    Args:
        asked: the server's answer.
        server: the server's key in the MCP servers file.
    """

    def __init__(self, asked: mcp_types.InputRequiredResult, *, server: str) -> None:
        super().__init__(f"MCP server {server!r} asked for input")
        self.asked = asked
        self.server = server


def only_questions(asked: mcp_types.InputRequiredResult) -> bool:
    """Whether a round asks only elicitation questions (at least one; no sampling, roots or state-only)."""
    requests = asked.input_requests or {}
    return bool(requests) and all(isinstance(request, mcp_types.ElicitRequest) for request in requests.values())


def asked_json(asked: mcp_types.InputRequiredResult) -> dict[str, Any]:
    """A round's `InputRequiredResult` as MCP's JSON (what the ledger records), with the server's key."""
    return asked.model_dump(mode="json", by_alias=True, exclude_none=True)


def asked_of(value: Mapping[str, Any]) -> mcp_types.InputRequiredResult:
    """The `InputRequiredResult` the ledger recorded (`asked_json`).

    Raises:
        pydantic.ValidationError: it is not one.
    """
    return mcp_types.InputRequiredResult.model_validate(dict(value))


def unusable(asked: mcp_types.InputRequiredResult) -> str | None:
    """Why a question of this round cannot be shown (`forms.UnusableQuestionError`), else None."""
    for request in (asked.input_requests or {}).values():
        if isinstance(request, mcp_types.ElicitRequest):
            try:
                question_of(request)
            except UnusableQuestionError as exc:
                return exc.reason
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class QuestionPause:
    """What a question pause asks (its interrupt's payload, `question_payload`).

    Attributes:
        tool_call_id: the call whose server asks.
        tool_name: the registry name of its tool.
        server: the server's key.
        round: the round that asked (0: the call itself).
        requests: the server's `ElicitRequest`s by key, as MCP's JSON.
    """

    tool_call_id: str
    tool_name: str
    server: str
    round: int
    requests: Mapping[str, Mapping[str, Any]] = field(repr=False)

    def payload(self) -> dict[str, Any]:
        """The interrupt's value (JSON)."""
        return {
            "type": QUESTION_KIND,
            "tool_call_id": self.tool_call_id,
            "tool_name": self.tool_name,
            "server": self.server,
            "round": self.round,
            "requests": {key: dict(request) for key, request in self.requests.items()},
        }

    @classmethod
    def of(cls, value: object) -> QuestionPause | None:
        """The pause an interrupt's value describes; None when it is not a question pause (a review)."""
        if not isinstance(value, Mapping) or value.get("type") != QUESTION_KIND:
            return None
        requests = value.get("requests")
        if not isinstance(requests, Mapping):
            return None
        return cls(
            tool_call_id=str(value.get("tool_call_id", "")),
            tool_name=str(value.get("tool_name", "")),
            server=str(value.get("server", "")),
            round=int(value.get("round", 0)),
            requests={str(key): dict(request) for key, request in requests.items() if isinstance(request, Mapping)},
        )


def question_payload(
    *, tool_call_id: str, tool_name: str, server: str, number: int, asked: mcp_types.InputRequiredResult
) -> dict[str, Any]:
    """The interrupt payload that asks round `number`'s questions of the requester."""
    requests = {
        key: request.model_dump(mode="json", by_alias=True, exclude_none=True)
        for key, request in (asked.input_requests or {}).items()
    }
    return QuestionPause(
        tool_call_id=tool_call_id, tool_name=tool_name, server=server, round=number, requests=requests
    ).payload()


def is_question(value: object) -> bool:
    """Whether an interrupt's value is a question pause (else it is a review's)."""
    return QuestionPause.of(value) is not None


def resume_value(answers: Mapping[str, Answer]) -> dict[str, Any]:
    """The resume value of a question pause: each request key's answer."""
    return {"answers": {key: answer_json(answer) for key, answer in answers.items()}}


def responses_of(resume: object, pause: QuestionPause) -> dict[str, mcp_types.ElicitResult]:
    """The `input_responses` of the next round, from a question pause's resume value; never raises.

    The service checked each answer before the resume; this is the second line, and it fails
    closed: a missing answer, one that is not an answer, or one that does not fit its question
    is sent as `cancel`.
    """
    raw = resume.get("answers") if isinstance(resume, Mapping) else None
    given: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    responses: dict[str, mcp_types.ElicitResult] = {}
    for key, request in pause.requests.items():
        answer = answer_of(given.get(key)) or Answer(action=Action.CANCEL)
        try:
            question = question_of(mcp_types.ElicitRequest.model_validate(dict(request)))
            answer = check_answer(question, answer)
        except (AnswerError, UnusableQuestionError, ValueError):
            answer = Answer(action=Action.CANCEL)
        responses[key] = answer.as_result()
    return responses

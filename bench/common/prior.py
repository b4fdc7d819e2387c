"""Synthetic prior history: a long conversation written straight into a graph's state.

A history is a list of exchanges, each at rest (it ends with the model's text answer):

    text      human -> AI text                                   2 messages
    tool      human -> AI call -> tool result -> AI text         4 messages
    parallel  human -> AI 2 calls -> 2 tool results -> AI text   5 messages

in the repeating order text, text, tool, text, parallel, so about a third of the exchanges
carry a tool round, as in an ops channel. Texts are a few hundred characters of chat-like words
(human 150-400, AI answer 250-700, tool result 300-600), so 300 messages are about 110,000
characters, some 27,000 tokens at four characters a token.

Every message is a copy of one the same graph stored in a real turn (`Templates`), with new
text and ids, so the metadata a real message carries (usage, finish reason, model name, the
author Countersign stores with a human message) is stored with each seeded one too. Seeded
calls carry no Gemini thought signature: the API checks signatures only in the current turn.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolCall, ToolMessage

from bot.agents.signatures import SIGNATURES_KEY

TEXT, TOOL, PARALLEL = 2, 4, 5
"""Messages per exchange kind."""
PATTERN = (TEXT, TEXT, TOOL, TEXT, PARALLEL)

_TEXT = (
    "the deploy of the billing service to eu-west finished at ten but the health checks on two "
    "pods kept failing so we rolled back and opened a ticket with the platform team about the "
    "readiness probe timeout which is still set to one second while the cache warms for about "
    "forty seconds after start could you look at the dashboards for error rates latency and "
    "queue depth since yesterday evening and tell me whether the nightly batch job overlapped "
    "with the traffic spike from the marketing campaign also check if the database replica lag "
    "went above thirty seconds again because support saw stale invoices for a few customers in "
    "france germany and spain please summarise what changed in the config repository this week "
    "who approved the firewall rule for the new partner api and whether the certificate on the "
    "staging gateway expires before the release freeze on friday thanks I will share it with "
    "the on-call channel and update the incident notes tomorrow morning after the standup"
)
_WORDS = tuple(_TEXT.split())


def exchange_sizes(count: int) -> list[int]:
    """Exchange sizes (2, 4 or 5 messages) adding up to `count`, following `PATTERN`.

    Args:
        count: messages wanted (0, 2, or at least 4).

    Raises:
        ValueError: for 1 or 3, which no sequence of whole exchanges adds up to.
    """
    if count in (1, 3) or count < 0:
        raise ValueError(f"{count} messages cannot be whole exchanges (use 0, 2, or at least 4)")
    sizes: list[int] = []
    left = count
    while left:
        wanted = PATTERN[len(sizes) % len(PATTERN)]
        # Prefer the pattern's kind, else the first that leaves a count still made of exchanges.
        for size in (wanted, TEXT, TOOL, PARALLEL):
            rest = left - size
            if rest == 0 or (rest >= 2 and rest != 3):
                break
        else:  # pragma: no cover - every count >= 4 leaves such a rest
            raise AssertionError(f"no exchange fits {left} messages")
        sizes.append(size)
        left -= size
    return sizes


@dataclass(frozen=True, slots=True)
class Templates:
    """Messages a graph stored in one real tool turn; seeded messages are copies of them.

    Attributes:
        human: the user's message (with whatever the graph stores beside the text).
        call: the model's answer calling a tool.
        result: the tool's result.
        answer: the model's text answer.
    """

    human: HumanMessage
    call: AIMessage
    result: ToolMessage
    answer: AIMessage

    @classmethod
    def from_turn(cls, messages: Sequence[AnyMessage]) -> Templates:
        """The four messages of a `get` turn: human, AI call, tool result, AI text.

        Raises:
            ValueError: when `messages` does not end with such a turn.
        """
        human, call, result, answer = messages[-4:]
        if not (
            isinstance(human, HumanMessage)
            and isinstance(call, AIMessage)
            and call.tool_calls
            and isinstance(result, ToolMessage)
            and isinstance(answer, AIMessage)
            and not answer.tool_calls
        ):
            raise ValueError(f"not a tool turn: {[type(m).__name__ for m in messages[-4:]]}")
        return cls(human=human, call=call, result=result, answer=answer)


class HistoryWriter:
    """Writes prior histories from `Templates`, deterministically for a given seed.

    Args:
        templates: the graph's own messages to copy.
        target_url: the URL the seeded `http_request` calls name.
    """

    def __init__(self, templates: Templates, target_url: str) -> None:
        self._t = templates
        self._url = target_url.rstrip("/")

    def history(self, count: int, *, seed: int = 0) -> list[AnyMessage]:
        """`count` messages of whole exchanges (see `exchange_sizes`); ids are unique within it.

        Args:
            count: messages (0, 2, or at least 4).
            seed: the random seed; the same seed gives the same texts.
        """
        rng = random.Random(seed)
        messages: list[AnyMessage] = []
        for number, size in enumerate(exchange_sizes(count)):
            tag = f"seed{seed}-{number}"
            messages.append(self._human(rng, tag))
            if size != TEXT:
                calls = [self._call(rng, f"{tag}-{i}") for i in range(size - TOOL + 1)]
                messages.append(self._ai_call(calls, tag))
                messages += [self._result(rng, call) for call in calls]
            messages.append(self._answer(rng, tag))
        return messages

    def _human(self, rng: random.Random, tag: str) -> HumanMessage:
        return self._t.human.model_copy(update={"content": _words(rng, 150, 400), "id": f"human:{tag}"})

    def _call(self, rng: random.Random, tag: str) -> ToolCall:
        args = {"method": "GET", "url": f"{self._url}/status/{rng.choice(_WORDS)}/{rng.randrange(10_000)}"}
        return ToolCall(name="http_request", args=args, id=f"call-{tag}", type="tool_call")

    def _ai_call(self, calls: list[ToolCall], tag: str) -> AIMessage:
        kwargs: dict[str, Any] = {k: v for k, v in self._t.call.additional_kwargs.items() if k != SIGNATURES_KEY}
        if "function_call" in kwargs:
            first = calls[0]
            kwargs["function_call"] = {"name": first["name"], "arguments": json.dumps(first["args"])}
        return self._t.call.model_copy(update={"tool_calls": calls, "additional_kwargs": kwargs, "id": f"ai:{tag}-c"})

    def _result(self, rng: random.Random, call: ToolCall) -> ToolMessage:
        body = json.dumps({"status": "ok", "items": _words(rng, 260, 560).split(". ")})
        content = f"HTTP/1.1 200 OK\ncontent-type: application/json\n\n{body}"
        return self._t.result.model_copy(
            update={"content": content, "tool_call_id": call["id"], "name": call["name"], "id": f"tool:{call['id']}"}
        )

    def _answer(self, rng: random.Random, tag: str) -> AIMessage:
        text = _words(rng, 250, 700)
        content: str | list[str | dict[str, Any]] = text
        if isinstance(self._t.answer.content, list):
            content = [{"type": "text", "text": text}]  # langchain-google-genai 4 stores parts
        return self._t.answer.model_copy(update={"content": content, "id": f"ai:{tag}-a"})


def _words(rng: random.Random, low: int, high: int) -> str:
    """Chat-like sentences of `low` to `high` characters."""
    wanted = rng.randint(low, high)
    sentences: list[str] = []
    size = 0
    while size < wanted:
        words = rng.choices(_WORDS, k=rng.randint(6, 18))
        sentence = " ".join(words).capitalize() + "."
        sentences.append(sentence)
        size += len(sentence) + 1
    return " ".join(sentences)[:wanted].rstrip(" .") + "."


def question(number: int) -> str:
    """A new message of about 150-250 characters that starts with `q<number>:` (unique per number)."""
    return f"q{number}: {_words(random.Random(-number), 150, 250)}"

"""What the model sees of a long conversation: a token budget, and a running summary of the rest.

Each model call gets the newest stored messages verbatim, as many as fit `ContextWindow.budget_tokens`.
When they do not fit, the oldest whole turns (everything before a human message, never the turn
in progress, so never a pending review's calls) are folded into a running summary written by the
model, and removed from the graph state: the next calls send the summary instead, and the stored
state stops growing with the conversation. A fold keeps the newest `keep_share` of the budget, so
it happens once per overflow, not on every call (docs/decisions/0013).

Tokens are estimated from UTF-8 bytes (`estimate_tokens`) and scaled by what the model itself
counted on the previous call (`usage_metadata["input_tokens"]` against the estimate of
everything sent: system prompt, tool declarations and view), kept in the state as
`token_scale`. Gemini's own counter is a blocking network round trip per text (`countTokens`),
while its count of what it was just sent comes with every answer at no cost.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from langchain_core.language_models import LanguageModelInput
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool

from bot.agents.history import repaired
from bot.agents.prompts import SUMMARY_INSTRUCTIONS, SUMMARY_REQUEST, SUMMARY_SECTION

AUTHOR_KEY = "countersign_author"
"""`HumanMessage.additional_kwargs` key holding who wrote the message: `{"user_id", "name"}`
(written by `bot.turns.runner`; the model never sees it, the summary names the author)."""

log = logging.getLogger(__name__)

DEFAULT_CONTEXT_TOKENS = 4_000
"""The default budget (`COUNTERSIGN_CONTEXT_TOKENS`): the last few turns verbatim (2000-4000
tokens of them between folds), the rest in the summary. With google-genai's request building
costing about a millisecond and a half per message sent, this keeps a turn in a conversation of
hundreds of messages within 1.3x of a turn in a new one (`bench/context.py`, docs/decisions/0013)."""

BYTES_PER_TOKEN = 4
"""UTF-8 bytes per token of the estimate: about right for English and code with Gemini's
tokenizer; scripts with more bytes per character (CJK: 3) come out higher, which errs on the
side of a smaller window until the model's own count corrects the scale."""

MESSAGE_OVERHEAD_TOKENS = 4
"""Tokens added per message for its role and framing."""

MIN_SCALE, MAX_SCALE = 0.5, 2.0
"""Bounds of `token_scale`: a wild count (a model that counts cached input apart, a proxy that
reports something else) cannot make the window useless."""

QUOTED_RESULT_CHARS = 1500
"""Characters of a tool result, or a call's arguments, quoted in the transcript sent for a summary."""


def estimate_tokens(messages: Sequence[BaseMessage]) -> int:
    """Estimated tokens of `messages`: their text and tool-call arguments, by UTF-8 bytes.

    Args:
        messages: any LangChain messages.

    Returns:
        Tokens (>= 0), before scaling by the model's own count (see `ContextWindow`).
    """
    total = 0
    for message in messages:
        size = len(message.text.encode("utf-8", "surrogatepass"))
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                size += len(call["name"]) + len(json.dumps(call["args"], ensure_ascii=False, default=str).encode())
        total += size // BYTES_PER_TOKEN + MESSAGE_OVERHEAD_TOKENS
    return total


def fold_point(messages: Sequence[AnyMessage], *, keep_tokens: float) -> int:
    """How many leading stored messages to fold into the summary (0: none can be).

    The folded part ends right before a human message, so a tool call is never separated from
    its results and the kept part starts like a conversation does; the turn in progress (from
    the last human message on) is never folded, so neither are the calls a review waits for.
    Among the possible points, the first whose kept part fits `keep_tokens`; else the last one.

    Args:
        messages: the stored history.
        keep_tokens: the estimate (unscaled) the kept part should fit.
    """
    humans = [index for index, message in enumerate(messages) if isinstance(message, HumanMessage) and index > 0]
    if not humans:
        return 0
    sizes = [estimate_tokens([message]) for message in messages]
    kept = sum(sizes)
    start = 0
    for index in humans:
        kept -= sum(sizes[start:index])
        start = index
        if kept <= keep_tokens:
            return index
    return humans[-1]


def within(view: Sequence[AnyMessage], budget_tokens: float) -> list[AnyMessage]:
    """The newest part of a repaired view that fits `budget_tokens`, cut before a human message.

    Used when folding is not possible or failed: older turns are then simply not shown. The
    turn in progress is kept whole even when it alone is over the budget (a call and its
    results cannot be split). A view without any human message (not made by the service)
    never starts with a tool result.

    Args:
        view: a repaired history (`bot.agents.history.repaired`).
        budget_tokens: the estimate (unscaled) the result should fit.
    """
    sizes = [estimate_tokens([message]) for message in view]
    total = sum(sizes)
    if total <= budget_tokens:
        return list(view)
    humans = [index for index, message in enumerate(view) if isinstance(message, HumanMessage)]
    if not humans:
        start = len(view) - 1
        while start > 0 and isinstance(view[start], ToolMessage):
            start -= 1
        return list(view[start:])
    kept, start = total, 0
    for index in humans:
        kept -= sum(sizes[start:index])
        start = index
        if kept <= budget_tokens:
            return list(view[index:])
    return list(view[humans[-1] :])


@dataclass(frozen=True, slots=True)
class Fitted:
    """What one model call sends, and what the state changes by.

    Attributes:
        view: the messages to send after the system prompt.
        system_prompt: the system prompt, with the summary appended when there is one.
        summary: the running summary after this call (changed only by a fold).
        removed: `RemoveMessage`s for the folded messages (empty when nothing was folded).
    """

    view: list[AnyMessage]
    system_prompt: str
    summary: str
    removed: list[RemoveMessage] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ContextWindow:
    """The model's view of a conversation: the budget, and the model that writes summaries.

    Args:
        budget_tokens: tokens of history (summary included, system prompt and tools not) sent
            per model call (`COUNTERSIGN_CONTEXT_TOKENS`).
        summarizer: the chat model without tools, with the same call options; None: older
            turns are cut without a summary (and stay in the state).
        keep_share: the share of the budget a fold keeps verbatim (the rest of the budget
            is room to grow before the next fold).
    """

    budget_tokens: int = DEFAULT_CONTEXT_TOKENS
    summarizer: Runnable[LanguageModelInput, BaseMessage] | None = None
    keep_share: float = 0.5

    async def fit(
        self,
        messages: Sequence[AnyMessage],
        *,
        system_prompt: str,
        summary: str = "",
        scale: float = 1.0,
        config: RunnableConfig | None = None,
    ) -> Fitted:
        """What to send for `messages`, folding the oldest turns first when they overflow.

        Args:
            messages: the stored history.
            system_prompt: the agent's system prompt.
            summary: the running summary so far ("" for none).
            scale: the model's tokens per estimated token (`token_scale`; 1.0 unknown).
            config: the node's config, for the summarizer's call (callbacks and tags).

        A failed summary (the model erred or said nothing) is logged; the call goes on with
        older turns cut instead, and the next call tries to fold again.
        """
        scale = min(max(scale, MIN_SCALE), MAX_SCALE)
        budget = self.budget_tokens / scale
        view = repaired(messages)
        removed: list[RemoveMessage] = []
        if estimate_tokens(view) + _summary_tokens(summary) > budget and self.summarizer is not None:
            count = fold_point(messages, keep_tokens=budget * self.keep_share)
            if count:
                new_summary = await self._summarise(summary, messages[:count], config)
                if new_summary:
                    summary = new_summary
                    removed = [RemoveMessage(id=m.id) for m in messages[:count] if m.id]
                    view = repaired(messages[count:])
        view = within(view, budget - _summary_tokens(summary))
        prompt = system_prompt + SUMMARY_SECTION.format(summary=summary) if summary else system_prompt
        return Fitted(view=view, system_prompt=prompt, summary=summary, removed=removed)

    async def _summarise(self, summary: str, folded: Sequence[AnyMessage], config: RunnableConfig | None) -> str:
        if self.summarizer is None:
            return ""
        # A quarter of the budget at most (about budget_tokens characters), never less than 2000.
        limit_chars = max(self.budget_tokens * BYTES_PER_TOKEN // 4, 2_000)
        request = [
            SystemMessage(content=SUMMARY_INSTRUCTIONS.format(words=max(50, limit_chars // 8))),
            HumanMessage(
                content=SUMMARY_REQUEST.format(summary=summary or "(none yet)", transcript=transcript(folded))
            ),
        ]
        try:
            answer = await self.summarizer.ainvoke(request, _tagged(config))
        except Exception as exc:
            # Expected now and then (the model's own errors): one line, the traceback at DEBUG.
            log.warning("summarising %d older messages failed (%s); %s", len(folded), _one_line(exc), _UNFOLDED)
            log.debug("the summary's failure", exc_info=True)
            return ""
        text = answer.text.strip()
        if not text:
            log.warning("the model wrote an empty summary of %d older messages; %s", len(folded), _UNFOLDED)
            return ""
        log.info("folded %d older messages into the summary (%d characters)", len(folded), len(text))
        return text[:limit_chars]


_UNFOLDED = "this call leaves the oldest out of the model's view (they stay stored) and the next call tries again"


def _one_line(exc: BaseException) -> str:
    """`exc` as one short line for a log record: its type and the start of its message."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:200]}" if text else type(exc).__name__


def transcript(messages: Sequence[AnyMessage]) -> str:
    """The folded messages as plain text for the summarizer: who said what, which tool did what.

    Plain text, not the messages themselves: no tool-call pairing or thought signature can make
    the summary request invalid. Long results and arguments are cut to `QUOTED_RESULT_CHARS`.
    """
    lines = []
    for message in messages:
        if isinstance(message, HumanMessage):
            author = message.additional_kwargs.get(AUTHOR_KEY) or {}
            who = author.get("name") or author.get("user_id") or "user"
            lines.append(f"{who}: {message.text}")
        elif isinstance(message, AIMessage):
            if message.text.strip():
                lines.append(f"assistant: {message.text}")
            for call in message.tool_calls:
                args = _cut(json.dumps(call["args"], ensure_ascii=False, default=str))
                lines.append(f"assistant called {call['name']} with {args}")
        elif isinstance(message, ToolMessage):
            lines.append(f"result of {message.name or 'a tool'}: {_cut(message.text)}")
    return "\n".join(lines)


def _cut(text: str) -> str:
    return text if len(text) <= QUOTED_RESULT_CHARS else text[: QUOTED_RESULT_CHARS - 1] + "…"


def _summary_tokens(summary: str) -> int:
    return len(summary.encode("utf-8", "surrogatepass")) // BYTES_PER_TOKEN if summary else 0


def _tagged(config: RunnableConfig | None) -> RunnableConfig:
    """The node's config for the summary call: same callbacks (tracing), tagged `countersign:summary`."""
    tags = [*(config or {}).get("tags", []), "countersign:summary"]
    return {**(config or {}), "tags": tags}


def view_tokens(messages: Sequence[AnyMessage], *, summary: str = "", scale: float = 1.0) -> int:
    """Estimated tokens of the stored history and the summary as the next model call gets them.

    The same sum `ContextWindow.fit` holds against the budget (the repaired history plus the
    summary, scaled by the model's own count), so above `budget_tokens` the next call folds.

    Args:
        messages: the stored history.
        summary: the running summary ("" for none).
        scale: the state's `token_scale` (clamped as `fit` clamps it; 1.0 unknown).

    Returns:
        Tokens (>= 0), rounded.
    """
    scale = min(max(scale, MIN_SCALE), MAX_SCALE)
    return round((estimate_tokens(repaired(messages)) + _summary_tokens(summary)) * scale)


def measured_scale(
    reported: int | None, sent: Sequence[BaseMessage], fixed_tokens: int, current: float
) -> float | None:
    """The new `token_scale` from the model's count of what it was sent; None to keep `current`.

    Args:
        reported: the model's `usage_metadata["input_tokens"]` for the call (None: not given).
        sent: the messages sent (system prompt and view).
        fixed_tokens: the estimate of what else was sent, the tool declarations
            (`tool_tokens`).
        current: the scale in use.

    Returns:
        The clamped ratio, or None when there is no count or it moved less than 10 %
        (no state write for noise).
    """
    if not reported or reported <= 0:
        return None
    estimate = estimate_tokens(sent) + fixed_tokens
    if estimate <= 0:
        return None
    scale = min(max(reported / estimate, MIN_SCALE), MAX_SCALE)
    return scale if abs(scale - current) > 0.1 * current else None


def tool_tokens(tools: Sequence[BaseTool]) -> int:
    """Estimated tokens of the tools' declarations (their JSON schemas), sent with every call."""
    size = sum(len(json.dumps(convert_to_openai_tool(tool), default=str).encode()) for tool in tools)
    return size // BYTES_PER_TOKEN

"""A scripted chat model: a real LangChain `BaseChatModel` whose answers come from a script.

DESIGN.md allows it as the model stand-in for graph tests; end-to-end tests use the Gemini
HTTP stand-in instead.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field, PrivateAttr

Reply = AIMessage | Exception
Script = Callable[[list[BaseMessage]], Reply]

_ids = itertools.count(1)


def tool_call(name: str, args: dict[str, Any], call_id: str | None = None) -> dict[str, Any]:
    """A tool call dict as a model would produce it."""
    return {"name": name, "args": args, "id": call_id or f"call_{next(_ids)}", "type": "tool_call"}


def calls(*items: dict[str, Any], text: str = "") -> AIMessage:
    """An AI message that asks for the given tool calls."""
    return AIMessage(content=text, tool_calls=list(items))


class ScriptedChatModel(BaseChatModel):
    """Answers from `replies` in order (or from `script(messages)`), recording every prompt."""

    replies: list[Any] = Field(default_factory=list)
    """`AIMessage`s to answer with, or exceptions to raise, in order."""
    script: Script | None = None
    delay_s: float = 0.0
    """Seconds each async call takes (to make overlapping runs observable)."""
    gate: Any = None
    """A `tests.support.gate.Gate`: an armed gate holds the next async call until it is released."""
    active: int = 0
    max_active: int = 0
    prompts: list[list[BaseMessage]] = Field(default_factory=list)
    _position: int = PrivateAttr(default=0)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:  # type: ignore[override]
        return self

    def _next(self, messages: list[BaseMessage]) -> AIMessage:
        self.prompts.append(list(messages))
        if self.script is not None:
            reply = self.script(messages)
        else:
            if self._position >= len(self.replies):
                raise AssertionError(f"the script ran out after {self._position} replies")
            reply = self.replies[self._position]
            self._position += 1
        if isinstance(reply, Exception):
            raise reply
        return reply.model_copy(update={"id": reply.id or f"run-{next(_ids)}"})

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._next(messages))])

    async def _agenerate_delayed(self, messages: list[BaseMessage]) -> AIMessage:
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        try:
            await asyncio.sleep(self.delay_s)
            if self.gate is not None:
                await self.gate.passing()
            return self._next(messages)
        finally:
            self.active -= 1

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=await self._agenerate_delayed(messages))])

"""The model bound to a graph's tools, bound again only when those tools change.

Binding converts every tool's schema into a function declaration, which costs CPU on every
call it is done for; a graph's tools change rarely (an MCP server connects or goes away), so
`llm_call` asks `BoundModel.current()` per model call and gets the binding made for the tools
offered now, cached by the tools' version (`bot.tools.registry.ToolView.version`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import BaseMessage
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool

from bot.tools.registry import ToolView
from bot.turns.context.window import tool_tokens


def bind_model(
    model: BaseChatModel, tools: Sequence[BaseTool], model_kwargs: dict[str, Any] | None
) -> Runnable[LanguageModelInput, BaseMessage]:
    """The model with `tools` and the call options bound (options alone when there are no tools)."""
    if tools:
        return model.bind_tools(list(tools), **(model_kwargs or {}))
    return model.bind(**model_kwargs) if model_kwargs else model


class BoundModel:
    """`model` bound to the tools `tools` offers now, with the call options.

    Args:
        model: the chat model.
        tools: the graph's tools, live (`bot.tools.registry.ToolView`).
        model_kwargs: call options bound with the tools (e.g. HTTP retry options).
    """

    def __init__(self, model: BaseChatModel, tools: ToolView, model_kwargs: dict[str, Any] | None = None) -> None:
        self._model = model
        self._kwargs = model_kwargs
        self.tools = tools
        """The graph's tools, as they are at each look-up."""
        self._version: tuple[int, ...] | None = None
        self._bound: Runnable[LanguageModelInput, BaseMessage] = model
        self._tokens = 0

    def _refresh(self) -> None:
        version = self.tools.version
        if version != self._version:
            offered = self.tools.tools()
            self._bound = bind_model(self._model, offered, self._kwargs)
            self._tokens = tool_tokens(offered)
            self._version = version

    def current(self) -> Runnable[LanguageModelInput, BaseMessage]:
        """The model bound to the tools offered now (bound again only after they changed)."""
        self._refresh()
        return self._bound

    def tool_tokens(self) -> int:
        """Estimated tokens of the declarations of the tools offered now (`context_window.tool_tokens`)."""
        self._refresh()
        return self._tokens

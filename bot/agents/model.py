"""Gemini through langchain-google-genai: the model the agent talks to.

Two choices here (docs/decisions/0003-gemini-tool-schemas-and-retries.md, 0011-model-faults.md):
- Each tool's own JSON Schema is sent as `parametersJsonSchema`, instead of langchain-google-
  genai's conversion to Gemini's older OpenAPI subset, which turns a free-form JSON value into
  STRING and an object of strings into an OBJECT without properties (the API refuses that).
- The client makes one attempt per call; `bot.agents.model_retry` retries 408, 429, 5xx,
  timeouts and connection failures, honouring a 429's `retryDelay`, within bounded time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

from google.genai import types as genai_types
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun
from langchain_core.language_models import LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.json_schema import dereference_refs
from langchain_google_genai import ChatGoogleGenerativeAI
from pydantic import BaseModel, Field

from bot.agents.model_retry import RetryPolicy, with_retries
from bot.base.errors import ConfigurationError
from bot.settings import GeminiSettings


class GeminiChatModel(ChatGoogleGenerativeAI):
    """`ChatGoogleGenerativeAI` that declares tools with their full JSON Schema and retries its own way.

    Attributes:
        retry: how a failed asynchronous call is retried (`bot.agents.model_retry`); the
            synchronous and streaming paths, which the bot does not use, keep the client's.
    """

    retry: RetryPolicy = Field(default_factory=RetryPolicy)

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        """One generateContent call, retried as `retry` allows (each attempt a single HTTP request)."""
        attempt = super()._agenerate
        return await with_retries(lambda: attempt(messages, stop, run_manager, **kwargs), self.retry)

    def bind_tools(  # type: ignore[override]
        self,
        tools: Sequence[BaseTool | dict[str, Any] | type | Callable[..., Any]],
        tool_config: dict[str, Any] | None = None,
        *,
        tool_choice: Any = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Bind `tools`; `BaseTool`s are declared with `parametersJsonSchema`.

        Anything that is not a `BaseTool` goes through the parent's conversion unchanged.
        """
        if not all(isinstance(tool, BaseTool) for tool in tools) or tool_config or tool_choice:
            return super().bind_tools(tools, tool_config, tool_choice=tool_choice, **kwargs)
        declarations = [function_declaration(tool) for tool in tools if isinstance(tool, BaseTool)]
        google_tool = genai_types.Tool(function_declarations=declarations)
        return self.bind(tools=[google_tool], **kwargs)


def function_declaration(tool: BaseTool) -> genai_types.FunctionDeclaration:
    """A Gemini function declaration carrying the tool's JSON Schema as is (refs inlined)."""
    schema: dict[str, Any]
    call_schema = tool.tool_call_schema
    if isinstance(call_schema, type) and issubclass(call_schema, BaseModel):
        schema = call_schema.model_json_schema()
    else:
        schema = dict(cast("dict[str, Any]", call_schema))
    schema = _without_titles(dereference_refs(schema))
    schema.pop("$defs", None)
    schema.pop("description", None)  # the declaration's description says it once
    schema.setdefault("type", "object")
    schema.setdefault("properties", {})
    return genai_types.FunctionDeclaration(name=tool.name, description=tool.description, parameters_json_schema=schema)


def _without_titles(node: Any) -> Any:
    """Drop pydantic's generated `title`s (noise for the model); keep property names intact."""
    if isinstance(node, dict):
        cleaned: dict[str, Any] = {}
        for key, value in node.items():
            if key == "title" and isinstance(value, str):
                continue
            if key == "properties" and isinstance(value, dict):
                cleaned[key] = {name: _without_titles(prop) for name, prop in value.items()}
            else:
                cleaned[key] = _without_titles(value)
        return cleaned
    if isinstance(node, list):
        return [_without_titles(item) for item in node]
    return node


def build_chat_model(settings: GeminiSettings) -> GeminiChatModel:
    """The Gemini chat model for `settings`.

    Raises:
        ConfigurationError: when `GOOGLE_API_KEY` is not set.
    """
    if settings.api_key is None:
        raise ConfigurationError("GOOGLE_API_KEY is not set: the agent needs a Gemini API key")
    # Field names as ChatGoogleGenerativeAI declares them (some are pydantic aliases).
    # `max_retries=1` is one attempt (langchain-google-genai's documented way to switch the
    # SDK's retries off); `retry` does the retrying.
    options: dict[str, Any] = {
        "model": settings.model,
        "google_api_key": settings.api_key,
        "base_url": settings.base_url,
        "max_retries": 1,
        "timeout": settings.timeout_s,
        "retry": RetryPolicy.from_settings(settings),
    }
    return GeminiChatModel(**options)


def call_options(settings: GeminiSettings) -> dict[str, Any]:
    """Per-call options bound with the tools: one attempt of at most `GEMINI_TIMEOUT` per HTTP request.

    The SDK's own retries stay off (one attempt), so that a 429's retry advice is honoured
    and every wait is announced and counted by `GeminiChatModel.retry`.
    """
    return {
        "http_options": genai_types.HttpOptions(
            timeout=int(settings.timeout_s * 1000),
            retry_options=genai_types.HttpRetryOptions(attempts=1),
        )
    }

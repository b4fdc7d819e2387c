"""The core wired to the real Gemini client against the Gemini stand-in, for integration tests."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from langchain_core.messages import AIMessage

from bot.agents.model import build_chat_model, call_options
from bot.agents.subagent_specs import SubagentSpec
from bot.base.agent_kind import AgentKind
from bot.ports import ModelFailed
from bot.settings import GeminiSettings
from bot.tools.mcp.servers import McpServers
from bot.tools.registry import ToolRegistry
from bot.turns.context.window import DEFAULT_CONTEXT_TOKENS
from tests.standins.gemini import GeminiReply, GeminiRequest, GeminiStandIn, ScriptedResponder, text
from tests.support.recording_platform import RecordingPlatform
from tests.support.service import Harness, conversation, open_service

KEY = "faults-key"
RESEARCHER = SubagentSpec(name="researcher", description="Looks things up.", prompt="You research.", tools=("lookup",))


def echo(request: GeminiRequest) -> GeminiReply:
    """After tool results: "Result: <what the model saw>"; else "You said: <text>"."""
    if request.function_responses:
        return text("Result: " + "; ".join(str(response) for _, response in request.function_responses))
    return text(f"You said: {request.last_user_text}")


@asynccontextmanager
async def gemini_core(
    db_url: str,
    registry: ToolRegistry,
    replies: list[GeminiReply | str],
    *,
    agent: AgentKind = AgentKind.REACT,
    rules: tuple[Callable[[GeminiRequest], GeminiReply | None], ...] = (),
    context_tokens: int = DEFAULT_CONTEXT_TOKENS,
    platform: RecordingPlatform | None = None,
    mcp: McpServers | None = None,
    allow_undeclared_calls: bool = False,
    **gemini: Any,
) -> AsyncIterator[tuple[Harness, GeminiStandIn]]:
    """The core with the real Gemini client against a stand-in answering `replies`, then `echo`.

    The stand-in refuses placeholder thought signatures, so every call must come back with the
    signature it was issued with; `gemini` overrides `GeminiSettings` fields (fast retries by default).
    `platform` is where the core posts (a new `RecordingPlatform` when None); `mcp` are MCP
    servers (a source of `registry`) started with the service; `allow_undeclared_calls` lets a
    scripted reply call a tool the request did not declare (a model naming a tool it was not offered).
    """
    responder = ScriptedResponder(replies, rules=rules)
    responder.add_rule(lambda request: echo(request) if responder.remaining == 0 else None)
    async with GeminiStandIn(
        responder, api_key=KEY, allow_signature_placeholders=False, allow_undeclared_calls=allow_undeclared_calls
    ) as server:
        settings = GeminiSettings(
            api_key=KEY,
            base_url=server.base_url,
            **{
                "max_attempts": 3,
                "retry_initial_delay_s": 0.01,
                "retry_max_delay_s": 0.05,
                "retry_announce_after_s": 0.5,
                **gemini,
            },
        )
        model = build_chat_model(settings)
        async with open_service(
            db_url,
            model,
            registry,
            platform or RecordingPlatform(),
            subagents=(RESEARCHER,),
            default_agent=agent,
            model_kwargs=call_options(settings),
            context_tokens=context_tokens,
            mcp=mcp,
        ) as h:
            yield h, server
        await model.aclose()


def model_notices(h: Harness) -> list[ModelFailed]:
    return [notice for _, notice, _ in h.platform.notices if isinstance(notice, ModelFailed)]


async def stored(h: Harness, agent: AgentKind = AgentKind.REACT) -> list[Any]:
    conv = conversation()
    state = await h.graph(conv, agent).aget_state({"configurable": {"thread_id": conv.thread_id}})
    return list(state.values.get("messages", []))


def no_empty_answers(messages: list[Any]) -> bool:
    return not any(isinstance(m, AIMessage) and not m.tool_calls and not m.text for m in messages)

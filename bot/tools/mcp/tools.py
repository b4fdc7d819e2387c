"""An MCP server's tools as registry tools, and their results as what the model reads.

Each tool becomes a `ToolSpec` named `<server>__<tool>` (`bot.tools.mcp.config.registry_name`) whose default is review,
whatever the server's hints say (hints are shown on the card, never obeyed on their own). Its
`INPUT_SCHEMA` is the server's own `inputSchema`, against which the model's arguments and an
approver's edits are checked (`bot.tools.refusals`, `bot.reviews.decisions`); the model is
shown `gemini_parameters` of it, and the notes that rewrite makes about the arguments as a
whole follow the server's description (`declared_description`,
docs/decisions/0047-gemini-schemas-for-mcp-tools.md). A call goes through the tool node like any
other: claimed in the tool-run ledger before it is sent, the approved digest checked, its result recorded; a
call whose answer never came raises `bot.base.errors.ToolOutcomeUnknownError`, so it is recorded
as outcome unknown and never sent again (docs/decisions/0042-mcp-client.md). A server that
answers with questions for a person only raises `InputAskedError`: the tool node asks the
requester and sends the next round, whose answers this tool reads from `ROUND_INPUT`
(docs/decisions/0054-mcp-elicitation.md).
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from typing import Any

import mcp_types
from langchain_core.tools import StructuredTool, ToolException

from bot.base.errors import ToolOutcomeUnknownError
from bot.base.log_context import about
from bot.base.mode import Mode
from bot.tools.mcp.connection import (
    CallRefusedError,
    InputRequiredError,
    McpConnection,
    NotConnectedError,
    OutcomeUnknownError,
)
from bot.tools.mcp.elicitation.rounds import ROUND_INPUT, InputAskedError, only_questions
from bot.tools.mcp.gemini_schema import declared_description, gemini_parameters
from bot.tools.mcp.info import McpToolInfo
from bot.tools.registry import INPUT_SCHEMA, ToolSpec

MAX_NAME_CHARS = 64
"""Gemini's limit on a function name; a longer tool name is left out."""
MAX_RESULT_CHARS = 8_000
"""Characters of one MCP result the model reads; the rest is cut, and the cut said."""
_GEMINI_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.:-]*")


def name_problem(name: str) -> str | None:
    """Why `name` cannot be a function name Gemini accepts, or None when it can."""
    if len(name) > MAX_NAME_CHARS:
        return f"its name has {len(name)} characters, over Gemini's {MAX_NAME_CHARS}"
    if not _GEMINI_NAME.fullmatch(name):
        return "its name has characters Gemini refuses (letters, digits, _ . : - only, not first a digit)"
    return None


RefusalCheck = Callable[[], Awaitable[str | None]]
"""Asked just before a call is sent: the refusal the model reads instead, or None to send it."""


def mcp_tool_spec(
    name: str, info: McpToolInfo, connection: McpConnection, *, timeout_s: float, before_call: RefusalCheck
) -> ToolSpec:
    """The registry tool that calls `info`'s tool on `connection`.

    Args:
        name: its name (`bot.tools.mcp.config.registry_name`, already checked with `name_problem`).
        info: the tool as listed.
        connection: its server's supervised session.
        timeout_s: seconds one call may take.
        before_call: asked before each call is sent (the pins: a held or changed definition is
            refused, docs/decisions/0043-pinned-mcp-definitions.md); its refusal is the tool's
            error and nothing reaches the server.

    Raises:
        bot.tools.mcp.gemini_schema.UnusableSchemaError: its input schema cannot be shown to the model.
    """
    input_schema = dict(info.definition.get("inputSchema") or {"type": "object"})
    parameters = gemini_parameters(input_schema)

    async def call(**arguments: Any) -> str:
        with about(mcp_server=info.server, tool=name):
            return await calling(arguments)

    async def calling(arguments: dict[str, Any]) -> str:
        refusal = await before_call()
        if refusal is not None:
            raise ToolException(f"Error: {refusal}")
        round_input = ROUND_INPUT.get()
        try:
            result = await connection.call(
                info.upstream,
                arguments,
                timeout_s=timeout_s,
                input_responses=dict(round_input.input_responses) if round_input is not None else None,
                request_state=round_input.request_state if round_input is not None else None,
            )
        except InputRequiredError as exc:
            if only_questions(exc.result):
                raise InputAskedError(exc.result, server=info.server) from None
            raise ToolOutcomeUnknownError(
                f"Error: {name}: {exc.what}. Whether it took effect is unknown; do not call it again "
                "without asking the user."
            ) from None
        except NotConnectedError as exc:
            raise ToolException(f"Error: {name} is not available now: {exc.reason}; nothing ran.") from None
        except CallRefusedError as exc:
            raise ToolException(
                f"Error: the MCP server refused the call of {name}: {exc.detail}; nothing ran."
            ) from None
        except OutcomeUnknownError as exc:
            raise ToolOutcomeUnknownError(
                f"Error: {name}: {exc.what}. Whether it took effect is unknown; do not call it again "
                "without asking the user."
            ) from None
        text = result_text(result)
        if result.is_error:
            raise ToolException(f"Error: {name} failed: {text or 'the server gave no reason'}")
        return text

    tool = StructuredTool(
        name=name,
        description=declared_description(info.description, parameters),
        args_schema=parameters,
        coroutine=call,
        handle_tool_error=True,
        metadata={INPUT_SCHEMA: input_schema},
    )
    return ToolSpec(tool=tool, default_mode=Mode.REVIEW, cancellable=True, mcp=info)


def result_text(result: mcp_types.CallToolResult, limit: int = MAX_RESULT_CHARS) -> str:
    """What the model reads of an MCP result, at most `limit` characters and the note of a cut.

    Text blocks are joined with newlines; an image, audio or binary resource is described (its
    type and size), never dropped silently; a resource link names its URI; `structuredContent`
    is added as JSON when the text does not already carry it.
    """
    parts = [_block_text(block) for block in result.content]
    text = "\n".join(part for part in parts if part)
    structured = result.structured_content
    if structured is not None and not _same_json(text, structured):
        dumped = json.dumps(structured, ensure_ascii=False, default=str)
        text = f"{text}\nstructured content: {dumped}" if text else dumped
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[cut: the result had {len(text)} characters; the first {limit} are shown]"


def _block_text(block: Any) -> str:
    """One content block in words (text as it is, anything else described)."""
    if isinstance(block, mcp_types.TextContent):
        return block.text
    if isinstance(block, mcp_types.ImageContent | mcp_types.AudioContent):
        kind = "image" if isinstance(block, mcp_types.ImageContent) else "audio"
        return f"[{kind}: {block.mime_type}, about {len(block.data) * 3 // 4} bytes, not shown]"
    if isinstance(block, mcp_types.ResourceLink):
        return f"[resource link: {block.uri}" + (f" ({block.name})" if block.name else "") + "]"
    if isinstance(block, mcp_types.EmbeddedResource):
        resource = block.resource
        if isinstance(resource, mcp_types.TextResourceContents):
            return f"[resource {resource.uri}]\n{resource.text}"
        size = len(getattr(resource, "blob", "")) * 3 // 4
        return f"[resource {resource.uri}: {resource.mime_type or 'binary'}, about {size} bytes, not shown]"
    return f"[{getattr(block, 'type', type(block).__name__)} content, not shown]"


def _same_json(text: str, value: Any) -> bool:
    """Whether `text` already says `value` (servers often send structured content as text too).

    True when `text` is the JSON of `value`, or `value` is `{"result": text}` (or its JSON):
    FastMCP wraps a tool's plain return value so.
    """
    try:
        parsed: Any = json.loads(text)
    except ValueError:
        parsed = text
    if parsed == value:
        return True
    return isinstance(value, dict) and set(value) == {"result"} and value["result"] in (parsed, text)

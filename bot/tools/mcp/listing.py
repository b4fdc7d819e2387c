"""A server's `tools/list`, each tool read on its own: one malformed entry leaves out that tool only.

The MCP SDK validates a `tools/list` answer as a whole (`ClientSession.list_tools`): one entry it
cannot read (no `inputSchema`, a hint that is not a boolean, a name that is not text) fails the
listing, and with it every tool of the server. Here the answer is read unvalidated, page by page
(`nextCursor`), and each entry is validated on its own with the SDK's models, for the negotiated
protocol version as the SDK would: a valid entry is a tool, an invalid one a `LeftOutTool` with
the reason in words. An answer that is not a listing at all (no list of tools, an unreadable
cursor) is still a failure (`ListingError`): the supervisor counts it as a failed poll.
docs/decisions/0049-one-bad-mcp-tool.md says why and which SDK internals this rests on.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import mcp_types
from mcp.client.session import ClientSession
from mcp.shared.dispatcher import CallOptions
from mcp_types import methods
from pydantic import ValidationError

log = logging.getLogger(__name__)

MAX_PAGES = 250
"""Pages one listing may take (fastmcp's own limit); more fails the listing."""
MAX_PROBLEMS = 3
"""Validation problems named in one left-out tool's reason; the rest are counted."""
_FALLBACK_VERSION = "2025-11-25"
"""The version the SDK validates against before a version is negotiated (`ClientSession.send_request`)."""


class ListingError(Exception):
    """The server's `tools/list` answer is not a listing at all: the poll failed.

    Args:
        reason: what is wrong, in words.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True, kw_only=True)
class LeftOutTool:
    """One entry of a listing that the SDK cannot read as a tool: it is left out, the others are not.

    Attributes:
        position: its place in the whole listing (all pages), from 1.
        name: its name when it has one that is non-empty text, else "".
        reason: what is wrong, in words, e.g. "it has no inputSchema" or
            "annotations.readOnlyHint should be a valid boolean (it is 'sure')".
    """

    position: int
    name: str
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Listing:
    """A server's tools as just listed.

    Attributes:
        tools: the entries the SDK reads as tools, in the server's order.
        left_out: the entries it cannot read, in the server's order.
    """

    tools: tuple[mcp_types.Tool, ...]
    left_out: tuple[LeftOutTool, ...] = ()


async def list_tools(session: ClientSession, timeout_s: float) -> Listing:
    """List every tool of the server on `session`, each entry validated on its own.

    After the listing, the session learns the valid tools as `ClientSession.list_tools` would
    teach it (their output schemas, for checking results; on 2026-07-28 their `x-mcp-header`
    maps, and a tool whose map is invalid is dropped by the SDK and left out here); otherwise a
    call would make the SDK list again by itself, validating the whole answer.

    Args:
        session: the client's live session.
        timeout_s: seconds each page may take.

    Raises:
        ListingError: an answer is not a listing (no list of tools, an envelope the SDK cannot
            read), or the pages do not end within `MAX_PAGES`.
        mcp.shared.exceptions.MCPError: the server answered with an error, the request timed
            out, or the connection closed.
    """
    version = session.protocol_version or _FALLBACK_VERSION
    entries: list[tuple[int, mcp_types.Tool]] = []
    left_out: list[LeftOutTool] = []
    cursor: str | None = None
    seen: set[str] = set()
    position = 0
    for _ in range(MAX_PAGES):
        page = await _page(session, cursor, timeout_s)
        tools = page.get("tools")
        if not isinstance(tools, list):
            raise ListingError("its tools/list answer has no list of tools")
        envelope = {key: value for key, value in page.items() if key != "tools"}
        try:
            methods.validate_server_result("tools/list", version, {**envelope, "tools": []})
        except ValidationError as exc:
            raise ListingError(f"its tools/list answer cannot be read: {plain_problems(exc, skip=0)}") from None
        for entry in tools:
            position += 1
            try:
                # The era's own model first, as the SDK checks a whole answer, then the SDK's `Tool`.
                methods.validate_server_result("tools/list", version, {**envelope, "tools": [entry]})
                entries.append((position, mcp_types.Tool.model_validate(entry, by_name=False)))
            except ValidationError as exc:
                left_out.append(LeftOutTool(position=position, name=_name_of(entry), reason=plain_problems(exc)))
        cursor = page.get("nextCursor")
        if cursor is None:
            break
        if cursor in seen:  # a server repeating a cursor would page forever: what was listed is the listing
            log.warning("MCP tools/list: the server repeated the cursor %r; the listing ends there", cursor[:100])
            break
        seen.add(cursor)
    else:
        raise ListingError(f"its tools/list answer did not end within {MAX_PAGES} pages")
    kept = _absorb(session, [tool for _, tool in entries])
    for place, tool in entries:
        if tool.name not in kept:
            left_out.append(
                LeftOutTool(position=place, name=tool.name, reason="its input schema's x-mcp-header marks are invalid")
            )
    left_out.sort(key=lambda tool: tool.position)
    return Listing(tools=tuple(tool for _, tool in entries if tool.name in kept), left_out=tuple(left_out))


async def _page(session: ClientSession, cursor: str | None, timeout_s: float) -> dict[str, Any]:
    """One `tools/list` page's result as the server sent it, unvalidated.

    `ClientSession.send_request` validates what it receives before returning it, and has no
    way to skip that; so this sends the request as it does (the session's stamp: protocol
    version headers and, on 2026-07-28, the `_meta` the server needs) on its dispatcher. The
    SDK's own `subscriptions/listen` driver sends raw requests the same way.
    """
    params = mcp_types.PaginatedRequestParams(cursor=cursor) if cursor is not None else None
    data = mcp_types.ListToolsRequest(params=params).model_dump(by_alias=True, mode="json", exclude_none=True)
    opts: CallOptions = {"timeout": timeout_s}
    session._stamp(data, opts)
    raw = await session._dispatcher.send_raw_request(data["method"], data.get("params"), opts)
    if not isinstance(raw, dict):
        raise ListingError("its tools/list answer is not an object")
    ttl = raw.get("ttlMs")  # as the SDK does: a negative cache lifetime is read as none, not refused
    if isinstance(ttl, int | float) and not isinstance(ttl, bool) and ttl < 0:
        raw["ttlMs"] = 0
    return raw


def _absorb(session: ClientSession, tools: list[mcp_types.Tool]) -> set[str]:
    """Teach `session` the listed tools as `ClientSession.list_tools` does; the names it kept."""
    result = mcp_types.ListToolsResult(tools=list(tools))
    absorbed = session._absorb_tool_listing(result, complete=True)
    return {tool.name for tool in absorbed.tools}


def _name_of(entry: object) -> str:
    name = entry.get("name") if isinstance(entry, Mapping) else None
    return name if isinstance(name, str) and name else ""


def plain_problems(exc: ValidationError, *, skip: int = 2) -> str:
    """A pydantic error's problems in words, e.g. `it has no inputSchema; name should be a valid string (it is 7)`.

    Args:
        exc: the validation error.
        skip: leading parts of each location to drop (`("tools", 0)` of a one-tool listing).

    Returns:
        At most `MAX_PROBLEMS` problems joined by "; ", then how many more there were.
    """
    problems = []
    for error in exc.errors()[:MAX_PROBLEMS]:
        path = ".".join(str(part) for part in error["loc"][skip:])
        if error["type"] == "missing":
            problems.append(f"it has no {path}" if path else "it lacks a required field")
            continue
        what = error["msg"].removeprefix("Input ").split(",")[0]
        shown = repr(error["input"])
        shown = shown if len(shown) <= 40 else shown[:39] + "…"
        problems.append(f"{path or 'the entry'} {what} (it is {shown})")
    more = exc.error_count() - MAX_PROBLEMS
    return "; ".join(problems) + (f"; and {more} more problems" if more > 0 else "")

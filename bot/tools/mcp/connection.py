"""One MCP server's session, kept by one supervisor task per process.

The supervisor (`McpConnection.run`) owns the `fastmcp.Client`: it connects, lists the tools,
polls `tools/list` as its health check and change detector (`ping` does not exist on the
2026-07-28 protocol), and on any failure leaves the session and connects again after a capped,
jittered exponential backoff. A listing reads each tool on its own (`bot.tools.mcp.listing`): one
malformed tool is left out, not the server. Callers never enter the client: `call` sends one
`tools/call` on the live session, and never sends it again (a server asking for input mid-call
ends that call with `InputRequiredError`, docs/decisions/0048-mcp-input-required.md; the tool
node may answer its questions in a new call of its own, docs/decisions/0054-mcp-elicitation.md),
or refuses at once, before anything is sent, when there is none. A stdio server is started once
per connection, never per call (docs/decisions/0042-mcp-client.md), under a reaper
(`bot.tools.mcp.reaper`) that ends every process it started once it ends; its stderr becomes the
bot's log lines (`bot.tools.mcp.stderr`). The end of its stdout (the process exited or was
killed) ends the session at once, not at the next poll: the status says so, and calls are
refused meanwhile as not connected; a command or working directory that does not exist is said
in words. An answer over the server's size limit is refused as it arrives, before anything
parses it on the event loop (`AnswerTooLargeError`, docs/decisions/0053-bounded-mcp-answers.md).
Each call is counted and timed in `bot.metrics` by server, and the connection's state is the
gauge `countersign_mcp_server_connected` (docs/decisions/0044-mcp-operations.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import random
import shutil
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TextIO

import anyio
import httpx2
import mcp_types
from fastmcp import Client
from fastmcp.client.transports import ClientTransport, StreamableHttpTransport
from fastmcp.client.transports.base import SessionKwargs, TransportOptions
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import FORCE_KILL_TIMEOUT, stdio_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from typing_extensions import Unpack

from bot import metrics
from bot.tools.mcp.config import HttpServer, ServerEntry, StdioServer
from bot.tools.mcp.listing import Listing, ListingError, list_tools
from bot.tools.mcp.reaper import ANSWER_TOO_LARGE, ANSWER_TOO_LARGE_DATA, wrapped
from bot.tools.mcp.stderr import StderrLog

log = logging.getLogger(__name__)

POLL_S = 30.0
"""Seconds between two `tools/list` polls of a connected server."""
FIRST_RETRY_S = 1.0
"""The wait before connecting again after the first failure; doubled up to `MAX_RETRY_S`."""
MAX_RETRY_S = 60.0
CONNECT_TIMEOUT_S = 30.0
"""Seconds a connection's start (a stdio server's start, the handshake, the first `tools/list`) may take."""
LIST_TIMEOUT_S = 30.0
"""Seconds one poll may take before the server counts as lost."""
DEFAULT_MAX_ANSWER_MB = 4.0
"""Megabytes one answer of a server may have unless configured (`COUNTERSIGN_MCP_MAX_ANSWER_MB`)."""
REAPER_GRACE_S = FORCE_KILL_TIMEOUT / 2
"""Seconds a stdio server's processes have after SIGTERM before the reaper kills them: within the
SDK's own wait before it kills the reaper, so the reaper always gets to finish."""

PROCESS_ENDED = (
    "the server process ended: it exited or closed its stdout; its stderr lines are in the bot's log at level INFO"
)
"""Why a stdio server is not connected once its process exited, was killed, or closed its stdout."""

_REFUSED_CODES = frozenset({mcp_types.INVALID_REQUEST, mcp_types.METHOD_NOT_FOUND, mcp_types.INVALID_PARAMS})
"""JSON-RPC errors by which a server says it did not take the request: nothing ran.

Not `PARSE_ERROR`: our requests are always valid JSON, and the SDK itself answers a call with
it when the server's answer could not be read (the server did run the call)."""
_UNREAD_ANSWER = "Unexpected content type"
"""How the SDK's `INVALID_REQUEST` begins when the server answered with neither JSON nor SSE: it may have run."""


class State(StrEnum):
    """Where a server's connection is."""

    CONNECTING = "connecting"
    CONNECTED = "connected"
    RETRYING = "retrying"
    STOPPED = "stopped"


class NotConnectedError(Exception):
    """The call was not sent: the server is not connected now.

    Args:
        reason: why, in one clause ("MCP server 'notes' is not connected: ...").
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class CallRefusedError(Exception):
    """The server answered the call with a JSON-RPC error saying it did not take it: nothing ran.

    Args:
        detail: the server's message.
    """

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class OutcomeUnknownError(Exception):
    """The call was sent and its answer never came: the server may or may not have acted.

    Args:
        what: what happened, in one clause ("the connection was lost", "no answer within 30 s").
        timed_out: no answer came within the call's timeout (else the connection failed or the
            answer could not be read).
    """

    def __init__(self, what: str, *, timed_out: bool = False) -> None:
        super().__init__(what)
        self.what = what
        self.timed_out = timed_out


class AnswerTooLargeError(OutcomeUnknownError):
    """The server's answer was over the bytes one answer may have: refused as it arrived, unread.

    The server ran the call (it answered), so its outcome is unknown, and the call is not sent
    again (docs/decisions/0053-bounded-mcp-answers.md).

    Args:
        limit_bytes: the most bytes one answer of this server may have.
        size_bytes: the answer's size when known (a stdio server's), else None.
    """

    def __init__(self, limit_bytes: int, size_bytes: int | None = None) -> None:
        size = f" ({size_bytes / 1_000_000:.1f} MB)" if size_bytes is not None else ""
        super().__init__(f"the answer was over {limit_bytes / 1_000_000:g} MB{size}, so it was not read")
        self.limit_bytes = limit_bytes
        self.size_bytes = size_bytes


class InputRequiredError(OutcomeUnknownError):
    """The server answered the call by asking for input (an `InputRequiredResult`): it was not sent again.

    On the 2026-07-28 protocol a server may answer `tools/call` with questions (elicitation,
    sampling, roots) or only a `request_state`, expecting the call to be sent again with the
    answers. Each such round is a new call the server may act on, so this call ends here. Only
    questions for a person are answered, by the tool node in a new round of its own
    (docs/decisions/0054-mcp-elicitation.md); anything else is an outcome unknown: the server
    may have acted before asking (docs/decisions/0048-mcp-input-required.md).

    Args:
        result: the server's answer.
    """

    def __init__(self, result: mcp_types.InputRequiredResult) -> None:
        asked = describe_input_requests(result)
        super().__init__(
            f"the server asked for input in the middle of the call ({asked}), which Countersign does not "
            "support; the call was not sent again"
        )
        self.asked = asked
        self.result = result


@dataclass(frozen=True, slots=True)
class Status:
    """A server's connection as it is now.

    Attributes:
        state: connected, connecting, retrying or stopped.
        reason: why it is not connected (the last failure), else "".
        protocol_version: the negotiated MCP protocol version while connected, else "".
    """

    state: State
    reason: str = ""
    protocol_version: str = ""


class McpConnection:
    """The supervised session of one configured server.

    Args:
        key: the server's key in the file.
        entry: its entry.
        on_tools: awaited with the server's listing each time its tools were listed (on
            connecting, before the status says connected, and at each poll): the tools, and the
            entries left out as malformed; with None when the connection is lost (then it must
            not wait on anything). A failure is logged, never raised into the supervisor.
        on_status: called with the new status at each change.
        poll_s: seconds between polls.
        connect_timeout_s: seconds a connection's start may take.
        first_retry_s: the first wait after a failure, doubled up to `MAX_RETRY_S`.
        max_answer_bytes: the most bytes one message of the server may have; a larger answer is
            refused as it arrives, before anything parses it, and its call ends as outcome
            unknown (`AnswerTooLargeError`; docs/decisions/0053-bounded-mcp-answers.md).
    """

    def __init__(
        self,
        key: str,
        entry: ServerEntry,
        *,
        on_tools: Callable[[Listing | None], Awaitable[None]],
        on_status: Callable[[Status], None] = lambda status: None,
        poll_s: float = POLL_S,
        connect_timeout_s: float = CONNECT_TIMEOUT_S,
        first_retry_s: float = FIRST_RETRY_S,
        max_answer_bytes: int = round(DEFAULT_MAX_ANSWER_MB * 1_000_000),
    ) -> None:
        self.key = key
        self._entry = entry
        self._on_tools = on_tools
        self._on_status = on_status
        self._poll_s = poll_s
        self._connect_timeout_s = connect_timeout_s
        self._first_retry_s = first_retry_s
        self._max_answer_bytes = max_answer_bytes
        self._client: Client[Any] | None = None
        self._lost = asyncio.Event()
        self._lost_reason = ""
        self._poll_now = asyncio.Event()
        self._stderr = StderrLog(key) if isinstance(entry, StdioServer) else None
        self._ended: asyncio.Event | None = None
        self.status = Status(State.CONNECTING)
        metrics.MCP_SERVER_CONNECTED.labels(server=key).set(0)

    def _transport(self) -> ClientTransport:
        entry = self._entry
        self._ended = None
        if isinstance(entry, HttpServer):
            return StreamableHttpTransport(
                entry.url,
                headers=dict(entry.headers),
                httpx_client_factory=_bounded_client_factory(self._max_answer_bytes),
                max_sse_event_size=self._max_answer_bytes,
            )
        assert self._stderr is not None  # noqa: S101 - made for every stdio server
        self._ended = asyncio.Event()
        # Only the configured variables: the SDK adds what any process needs (PATH, HOME, ...),
        # never the bot's own environment and its secrets. The reaper ends every process the
        # command started once it ends (`bot.tools.mcp.reaper`).
        command, args = wrapped(entry.command, list(entry.args), REAPER_GRACE_S, self._max_answer_bytes)
        return _StdioTransport(
            StdioServerParameters(command=command, args=args, env=dict(entry.env), cwd=str(entry.cwd or Path.cwd())),
            errlog=self._stderr.open(),
            ended=self._ended,
        )

    def _ended_now(self) -> bool:
        """Whether this connection's stdio server ended its stdout (it exited, or was killed)."""
        return self._ended is not None and self._ended.is_set()

    def _set_status(self, status: Status) -> None:
        self.status = status
        metrics.MCP_SERVER_CONNECTED.labels(server=self.key).set(1 if status.state is State.CONNECTED else 0)
        try:
            self._on_status(status)
        except Exception:
            log.exception("MCP server %s: a status listener failed", self.key)

    async def _publish(self, listing: Listing | None) -> None:
        try:
            await self._on_tools(listing)
        except Exception:
            log.exception("MCP server %s: its tools could not be offered", self.key)

    def lost(self, reason: str) -> None:
        """Say the session is dead (a call saw the connection close): the supervisor connects again."""
        if self._client is not None and not self._lost.is_set():
            self._lost_reason = reason
            self._lost.set()

    def poll_now(self) -> None:
        """Ask for a `tools/list` now rather than at the next poll (a server said its tools changed)."""
        self._poll_now.set()

    async def list_now(self, timeout_s: float) -> Listing | None:
        """The server's tools, listed now on the live session; None when not connected or the listing fails.

        For an admin's accept, which must judge what the server lists at that moment. A failure
        is logged; the supervisor's next poll decides whether the session is lost.
        """
        client = self._client
        if client is None or self.status.state is not State.CONNECTED:
            return None
        try:
            return await asyncio.wait_for(list_tools(client.session, timeout_s), timeout_s)
        except Exception as exc:
            log.warning("MCP server %s could not be listed now: %s", self.key, _describe(exc))
            return None

    async def run(self) -> None:
        """Keep the server connected until cancelled; never raises otherwise."""
        failures = 0
        while True:
            self._lost.clear()
            self._poll_now.clear()
            client: Client[Any] = Client(
                self._transport(),
                name=f"countersign-{self.key}",
                init_timeout=self._connect_timeout_s,
                timeout=max(self._connect_timeout_s, LIST_TIMEOUT_S),
                cache=False,
            )
            was_connected = False
            try:
                reason = await self._session(client)
            except asyncio.CancelledError:
                self._set_status(Status(State.STOPPED, "the bot is stopping"))
                raise
            except Exception as exc:
                # The process's end explains a handshake or listing cut short better than the
                # SDK's "Connection closed".
                reason = PROCESS_ENDED if self._ended_now() else self._describe_failure(exc)
            finally:
                if self._client is not None:
                    was_connected = True
                    self._client = None
                    await self._publish(None)
                if self._stderr is not None:  # the process is gone: its last lines, then the pipe's end
                    await self._stderr.aclose()
            failures = 1 if was_connected else failures + 1
            delay = min(MAX_RETRY_S, self._first_retry_s * 2.0 ** (failures - 1)) * (0.5 + random.random() / 2)  # noqa: S311 - jitter
            self._set_status(Status(State.RETRYING, reason or "the connection ended"))
            log.warning("MCP server %s is not connected: %s; trying again in %.1f s", self.key, reason, delay)
            await asyncio.sleep(delay)

    def _describe_failure(self, exc: BaseException) -> str:
        """Why a connection failed, in one line: a stdio server that could not be started in words, else `_describe`.

        Most are found before the start (`_start_problem`); this reads the `OSError` of a start
        that failed anyway (without the reaper, on Windows; or a file changed in between).

        E.g. "the command 'npxx' was not found (not on PATH, nor a file)", "the working directory
        '/srv/x' does not exist", "the command './srv' cannot be run: permission denied".
        """
        entry = self._entry
        started = _start_failure(exc) if isinstance(entry, StdioServer) else None
        if started is None or not isinstance(entry, StdioServer):
            return _describe(exc)
        cwd = str(entry.cwd or Path.cwd())
        if started.filename == cwd and started.errno in (errno.ENOENT, errno.ENOTDIR):
            return f"the working directory {cwd!r} does not exist"
        if started.errno == errno.ENOENT:
            return f"the command {entry.command!r} was not found (not on PATH, nor a file)"
        if started.errno == errno.EACCES:
            return f"the command {entry.command!r} cannot be run: permission denied"
        return f"the command {entry.command!r} could not be started: {started.strerror or started}"

    async def _session(self, client: Client[Any]) -> str:
        """One connection, from connecting to its loss; returns why it ended."""
        if isinstance(self._entry, StdioServer) and (problem := _start_problem(self._entry)) is not None:
            return problem
        async with client:
            timeout_s = self._connect_timeout_s
            listing = await asyncio.wait_for(list_tools(client.session, timeout_s), timeout_s)
            self._client = client
            protocol = str(client.protocol_version or "")
            await self._publish(listing)  # judged against the pins before anything is offered
            self._set_status(Status(State.CONNECTED, protocol_version=protocol))
            log.info("MCP server %s connected (protocol %s, %d tools)", self.key, protocol or "?", len(listing.tools))
            ended = self._ended
            while True:
                waits = [asyncio.ensure_future(self._lost.wait()), asyncio.ensure_future(self._poll_now.wait())]
                if ended is not None:
                    waits.append(asyncio.ensure_future(ended.wait()))
                try:
                    await asyncio.wait(waits, timeout=self._poll_s, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    for wait in waits:
                        wait.cancel()
                if self._ended_now():
                    return PROCESS_ENDED
                if self._lost.is_set():
                    return self._lost_reason
                self._poll_now.clear()
                listing = await asyncio.wait_for(list_tools(client.session, LIST_TIMEOUT_S), LIST_TIMEOUT_S)
                await self._publish(listing)

    async def call(
        self,
        upstream: str,
        arguments: dict[str, Any],
        *,
        timeout_s: float,
        input_responses: mcp_types.InputResponses | None = None,
        request_state: str | None = None,
    ) -> mcp_types.CallToolResult:
        """Send one `tools/call` on the live session and return the server's result.

        Args:
            upstream: the tool's name on the server.
            arguments: its arguments (already checked against its input schema).
            timeout_s: seconds to wait for the answer; then the server is told to cancel it.
            input_responses: for a round after the first, the answers to what the server asked
                (`bot.tools.mcp.elicitation.rounds`), by its keys; None for a first call.
            request_state: for such a round, the `request_state` the server sent, echoed.

        Raises:
            NotConnectedError: nothing was sent (no live session).
            CallRefusedError: the server refused the request as malformed or unknown; nothing ran.
            OutcomeUnknownError: sent, and no answer came (the connection was lost, the call timed
                out, the answer could not be read), or `InputRequiredError`: the server asked for
                input mid-call; either way the server may have acted, and nothing is sent again.
            asyncio.CancelledError: the caller was cancelled (a Stop): the SDK tells the server
                to cancel (`notifications/cancelled`, or the HTTP request is aborted).
        """
        client = self._client
        metrics.MCP_CALLS.labels(server=self.key).inc()
        if client is None or self.status.state is not State.CONNECTED or self._ended_now():
            metrics.MCP_CALL_ERRORS.labels(server=self.key, kind="not_connected").inc()
            # A process that just ended: the supervisor has not said so yet, but nothing can be sent.
            why = PROCESS_ENDED if self._ended_now() else self.status.reason
            raise NotConnectedError(f"MCP server {self.key!r} is not connected" + (f" ({why})" if why else ""))
        started = time.monotonic()
        kind: str | None = "cancelled"  # unless it ends otherwise: only a cancellation skips the handlers
        try:
            result = await self._send(client, upstream, arguments, timeout_s, input_responses, request_state)
            kind = "is_error" if result.is_error else None
            return result
        except CallRefusedError:
            kind = "refused"
            raise
        except InputRequiredError:
            kind = "input_required"
            raise
        except OutcomeUnknownError as exc:
            kind = "timeout" if exc.timed_out else "outcome_unknown"
            raise
        finally:
            self._counted(upstream, kind, time.monotonic() - started)

    def _counted(self, upstream: str, kind: str | None, seconds: float) -> None:
        """Count and time one sent call (`kind`: None for a result, else its error kind) and log it."""
        metrics.MCP_CALL_SECONDS.labels(server=self.key).observe(seconds)
        if kind is None:
            log.debug("MCP server %s: %s answered in %.0f ms", self.key, upstream, seconds * 1000)
            return
        metrics.MCP_CALL_ERRORS.labels(server=self.key, kind=kind).inc()
        # A question round is routine (the tool node asks the requester); what is unknown is warned of there.
        level = logging.WARNING if kind in ("timeout", "outcome_unknown") else logging.INFO
        log.log(level, "MCP server %s: %s ended after %.0f ms: %s", self.key, upstream, seconds * 1000, kind)

    async def _send(
        self,
        client: Client[Any],
        upstream: str,
        arguments: dict[str, Any],
        timeout_s: float,
        input_responses: mcp_types.InputResponses | None,
        request_state: str | None,
    ) -> mcp_types.CallToolResult:
        """`call`'s one `tools/call` on `client`'s session, its failures as `call` raises them.

        The session, not `Client.call_tool_mcp`: fastmcp's client answers an `InputRequiredResult`
        itself by sending the call again (up to 10 rounds, a state-only one after a short sleep),
        and each round is a call the server may act on. Here it comes back to us, and ends the call.
        """
        try:
            result = await client.session.call_tool(
                upstream,
                arguments,
                read_timeout_seconds=timeout_s,
                input_responses=input_responses,
                request_state=request_state,
                allow_input_required=True,
            )
        except MCPError as exc:
            code = exc.error.code
            too_large = _too_large(exc.error, self._max_answer_bytes)
            if too_large is not None:
                raise too_large from exc
            if code == mcp_types.REQUEST_TIMEOUT:
                raise OutcomeUnknownError(
                    f"no answer within {timeout_s:g} s; the server was told to cancel the call", timed_out=True
                ) from exc
            if code in _REFUSED_CODES and not exc.error.message.startswith(_UNREAD_ANSWER):
                raise CallRefusedError(exc.error.message) from exc
            if code == mcp_types.PARSE_ERROR or exc.error.message.startswith(_UNREAD_ANSWER):
                raise OutcomeUnknownError(f"the server's answer could not be read ({exc.error.message[:300]})") from exc
            if code == mcp_types.CONNECTION_CLOSED:
                self.lost("the connection closed during a call")
                raise OutcomeUnknownError("the connection to the server was lost during the call") from exc
            raise OutcomeUnknownError(f"the server answered with error {code}: {exc.error.message}") from exc
        except (httpx2.HTTPError, OSError) as exc:
            self.lost(_describe(exc))
            raise OutcomeUnknownError(
                f"the connection to the server failed during the call ({_describe(exc)})"
            ) from exc
        except Exception as exc:  # e.g. an answer the SDK cannot read: it was sent, and may have run
            raise OutcomeUnknownError(f"the server's answer could not be read ({_describe(exc)})") from exc
        if isinstance(result, mcp_types.InputRequiredResult):
            raise InputRequiredError(result)
        return result


_JSON_TOO_LARGE = "countersign: the JSON answer is over the limit of {limit} bytes"
"""Said by `_BoundedStream`; the SDK passes it on in a PARSE_ERROR of its own, which `_too_large` reads."""


def _too_large(error: mcp_types.ErrorData, limit: int) -> AnswerTooLargeError | None:
    """The `AnswerTooLargeError` an error for a call stands for, or None when it is another error.

    Three ways an answer over the limit comes back: a stdio server's, from the reaper
    (`bot.tools.mcp.reaper.ANSWER_TOO_LARGE`, with the answer's size); a Streamable HTTP JSON
    answer, cut by `_BoundedStream` (the SDK's PARSE_ERROR carries its words); an SSE event over
    the SDK's `max_sse_event_size` (the SDK's "SSE stream failed" with httpx's words).
    """
    data = error.data
    if error.code == ANSWER_TOO_LARGE and isinstance(data, dict) and data.get("countersign") == ANSWER_TOO_LARGE_DATA:
        size = data.get("bytes")
        return AnswerTooLargeError(limit, size if isinstance(size, int) else None)
    message = error.message or ""
    if error.code == mcp_types.PARSE_ERROR and _JSON_TOO_LARGE.format(limit=limit) in message:
        return AnswerTooLargeError(limit)
    if error.code == mcp_types.CONNECTION_CLOSED and f"exceeded the {limit} byte limit" in message:
        return AnswerTooLargeError(limit)
    return None


class _BoundedStream(httpx2.AsyncByteStream):
    """A response body that fails (`httpx2.StreamError`) once more than `limit` bytes came, before they pile up."""

    def __init__(self, stream: httpx2.AsyncByteStream, limit: int) -> None:
        self._stream = stream
        self._limit = limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        async for chunk in self._stream:
            seen += len(chunk)
            if seen > self._limit:
                raise httpx2.StreamError(_JSON_TOO_LARGE.format(limit=self._limit))
            yield chunk

    async def aclose(self) -> None:
        await self._stream.aclose()


def _bounded_client_factory(limit: int) -> Callable[..., httpx2.AsyncClient]:
    """An httpx client factory for fastmcp's `StreamableHttpTransport`: the SDK's client, JSON bodies bounded.

    The SDK reads a JSON answer whole (`response.aread()`) and parses it on the event loop; a
    body over `limit` bytes fails as it arrives instead (SSE answers are bounded by the SDK's own
    `max_sse_event_size`). Other arguments fastmcp passes (`follow_redirects`) are left to the
    SDK's defaults, as when fastmcp makes the client itself.
    """

    async def bound(response: httpx2.Response) -> None:
        if response.headers.get("content-type", "").lower().startswith("application/json"):
            stream = response.stream
            if isinstance(stream, httpx2.AsyncByteStream):
                response.stream = _BoundedStream(stream, limit)

    def factory(
        headers: dict[str, str] | None = None,
        timeout: httpx2.Timeout | None = None,
        auth: httpx2.Auth | None = None,
        **_: Any,
    ) -> httpx2.AsyncClient:
        client = create_mcp_http_client(headers=headers, timeout=timeout, auth=auth)
        client.event_hooks.setdefault("response", []).append(bound)
        return client

    return factory


class _EndWatched:
    """A session's read stream that sets `ended` when the stream ends: the server's stdout closed.

    The SDK's stdio client closes the stream's sending side when the server's stdout reaches its
    end (the process exited or was killed) or its stdin cannot be written. Our own teardown
    closes the receiving side instead, which is not an end of the server's.
    """

    def __init__(self, inner: Any, ended: asyncio.Event) -> None:
        self._inner = inner
        self._ended = ended

    async def receive(self) -> Any:
        """The next message or exception from the server.

        Raises:
            anyio.EndOfStream: the server's stdout ended (and `ended` is set).
            anyio.ClosedResourceError: our own teardown closed the stream.
        """
        try:
            return await self._inner.receive()
        except anyio.EndOfStream:
            self._ended.set()
            raise

    async def aclose(self) -> None:
        """Close the receiving side."""
        await self._inner.aclose()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        await self.aclose()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)  # e.g. `last_context`, which the SDK reads when a stream has it


class _StdioTransport(ClientTransport):
    """A stdio server started for one session (the SDK's `stdio_client`), whose stdout's end is seen at once.

    In place of fastmcp's `StdioTransport`, whose machinery keeps a process alive across
    sessions (unused: one process per connection, docs/decisions/0042-mcp-client.md) and hides
    the session's read stream: here it is wrapped (`_EndWatched`), so the supervisor learns of
    the process's end when it happens rather than at its next poll.

    Args:
        server: the command, arguments, environment and working directory.
        errlog: the write end the server's stderr goes to (`bot.tools.mcp.stderr.StderrLog.open`).
        ended: set once the server's stdout has ended.
    """

    def __init__(self, server: StdioServerParameters, *, errlog: TextIO, ended: asyncio.Event) -> None:
        self._server = server
        self._errlog = errlog
        self._ended = ended

    @contextlib.asynccontextmanager
    async def connect_session(
        self, *, transport_options: TransportOptions | None = None, **session_kwargs: Unpack[SessionKwargs]
    ) -> AsyncIterator[ClientSession]:
        """Start the server and yield a session on its stdin and stdout; stop it on exit (the SDK's shutdown).

        Raises:
            OSError: the process could not be started (no such command or working directory, ...).
        """
        options = transport_options or TransportOptions()
        async with stdio_client(self._server, errlog=self._errlog) as (read_stream, write_stream):
            watched = _EndWatched(read_stream, self._ended)
            async with options.session_class(watched, write_stream, **session_kwargs) as session:
                yield session

    def __repr__(self) -> str:
        return f"<stdio server {self._server.command!r}>"


def describe_input_requests(result: mcp_types.InputRequiredResult) -> str:
    """What an `InputRequiredResult` asks for, in one clause, for the model and the log.

    Args:
        result: the server's answer; its `input_requests` map keys to elicitation, sampling or
            roots requests, or is empty when the server only asks to be called again.

    Returns:
        e.g. `it asked a question: "Pay 3?"; it asked for the client's roots`, or `it asked to be
        called again`; a question's text is the server's, cut at 200 characters.
    """
    asked: list[str] = []
    for request in (result.input_requests or {}).values():
        if isinstance(request, mcp_types.ElicitRequest):
            text = " ".join(request.params.message.split())
            asked.append(f"it asked a question: {text[:200]!r}")
        elif isinstance(request, mcp_types.CreateMessageRequest):
            asked.append("it asked the client's model for a completion (sampling)")
        else:
            asked.append("it asked for the client's roots")
    return "; ".join(asked) or "it asked to be called again"


def _start_problem(entry: StdioServer) -> str | None:
    """Why a stdio server's command cannot be started, in words, checked before it is; None when it can be.

    The reaper starts the command (`bot.tools.mcp.reaper`), so a command that cannot be started
    shows only as the reaper's exit and a line in its stderr; checked here first, the status says
    which: "the command 'npxx' was not found (not on PATH, nor a file)", "the working directory
    '/srv/x' does not exist", "the command './srv' cannot be run: permission denied". Looked up as
    the server's process will: on the `PATH` it gets (its `env`'s, else the bot's), and a command
    with a `/` from its working directory.
    """
    cwd = Path(entry.cwd or Path.cwd())
    if not cwd.is_dir():
        return f"the working directory {str(cwd)!r} does not exist"
    if os.sep in entry.command:
        program = cwd / entry.command
        if not program.exists():
            return f"the command {entry.command!r} was not found (not on PATH, nor a file)"
        if program.is_dir() or not os.access(program, os.X_OK):
            return f"the command {entry.command!r} cannot be run: permission denied"
        return None
    if shutil.which(entry.command, path=entry.env.get("PATH", os.environ.get("PATH", os.defpath))) is None:
        return f"the command {entry.command!r} was not found (not on PATH, nor a file)"
    return None


def _start_failure(exc: BaseException) -> OSError | None:
    """The `OSError` naming a file in `exc`'s chain (its causes, contexts, groups): a process that could not start."""
    seen: set[int] = set()
    pending: list[BaseException] = [exc]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, OSError) and current.filename is not None:
            return current
        if isinstance(current, BaseExceptionGroup):
            pending.extend(current.exceptions)
        pending.extend(e for e in (current.__cause__, current.__context__) if e is not None)
    return None


def _describe(exc: BaseException) -> str:
    """`exc` in one line: its type and message, and its cause's (the SDK wraps connect failures).

    A listing that is not one (`ListingError`) is said in words only: "its tools/list answer ...".
    """
    if isinstance(exc, ListingError):
        return exc.reason
    detail = " ".join(str(exc).split())[:300]
    text = f"{type(exc).__name__}" + (f": {detail}" if detail else "")
    cause = exc.__cause__
    if cause is not None and str(cause) and str(cause) not in detail:
        text += f" ({type(cause).__name__}: {' '.join(str(cause).split())[:200]})"
    return text

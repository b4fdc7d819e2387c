"""The http_request tool against a real local aiohttp server."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import httpx
import pytest
from aiohttp import web

from bot.errors import ConfigurationError
from bot.settings import ToolSettings
from bot.tools.http_request import make_http_request_tool, needs_review
from tests.support.bot_process import free_port


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Server:
    port: int
    received: list[Received] = field(default_factory=list)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    """A local HTTP server on 127.0.0.1, port 0, recording every request it gets."""
    state = Server(port=0)
    release = asyncio.Event()

    async def record(request: web.Request) -> None:
        state.received.append(
            Received(
                method=request.method,
                path=request.path_qs,
                headers=dict(request.headers),
                body=await request.read(),
            )
        )

    async def echo(request: web.Request) -> web.StreamResponse:
        await record(request)
        return web.json_response({"ok": True}, status=201 if request.method == "POST" else 200)

    async def redirect(request: web.Request) -> web.StreamResponse:
        await record(request)
        raise web.HTTPFound("/echo?from=redirect")

    async def big(request: web.Request) -> web.StreamResponse:
        await record(request)
        return web.Response(text="a" * 150 + "b" * 50, content_type="text/plain")

    async def huge(request: web.Request) -> web.StreamResponse:
        await record(request)
        return web.Response(body=b"x" * (3 * 1024 * 1024), content_type="text/plain")

    async def binary(request: web.Request) -> web.StreamResponse:
        await record(request)
        return web.Response(body=b"\x89PNG\r\n\x1a\n\x00\x00", content_type="image/png")

    async def slow(request: web.Request) -> web.StreamResponse:
        await record(request)
        await release.wait()
        return web.Response(text="late")

    app = web.Application()
    app.router.add_route("*", "/echo", echo)
    app.router.add_route("*", "/redirect", redirect)
    app.router.add_get("/big", big)
    app.router.add_get("/huge", huge)
    app.router.add_get("/binary", binary)
    app.router.add_get("/slow", slow)
    runner = web.AppRunner(app, shutdown_timeout=1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    state.port = runner.addresses[0][1]
    yield state
    release.set()
    await runner.cleanup()


def settings_for(*hosts: str, timeout: float = 5.0, max_chars: int = 4000) -> ToolSettings:
    """Tool settings allowing `hosts`."""
    return ToolSettings(http_allowed_hosts=hosts, http_timeout_s=timeout, http_max_response_chars=max_chars)


async def call(tool, **args) -> str:
    """Invoke the tool as the agent does and return its text."""
    result = await tool.ainvoke(args)
    assert isinstance(result, str)
    return result


async def test_allowed_host_port_sends_method_headers_and_json_body_exactly(server):
    """A listed host:port gets the method, the headers and the JSON body byte for byte."""
    tool = make_http_request_tool(settings_for(f"127.0.0.1:{server.port}"))
    body = {"name": "Zażółć", "items": [1, 2.5, {"nested": None}], "ok": True}

    result = await call(
        tool,
        method="post",
        url=f"{server.base}/echo?q=1",
        headers={"X-Trace": "abc-123", "Accept": "application/json"},
        body=body,
    )

    assert result.splitlines()[:2] == [
        "HTTP/1.1 201 Created",
        "content-type: application/json; charset=utf-8",
    ]
    assert result.endswith('\n\n{"ok": true}')
    [got] = server.received
    assert got.method == "POST"
    assert got.path == "/echo?q=1"
    assert got.headers["X-Trace"] == "abc-123"
    assert got.headers["Accept"] == "application/json"
    assert got.headers["Content-Type"] == "application/json"
    assert json.loads(got.body) == body
    assert got.body == json.dumps(body, ensure_ascii=False).encode()


@pytest.mark.parametrize("body", [[1, "two", {"3": 3}], "just a string", 42, False])
async def test_any_json_value_is_sent_as_json(server, body):
    """Arrays, strings, numbers and booleans are JSON-encoded like objects."""
    tool = make_http_request_tool(settings_for("127.0.0.1"))
    await call(tool, method="PUT", url=f"{server.base}/echo", body=body)
    assert json.loads(server.received[0].body) == body


async def test_content_type_from_headers_is_kept(server):
    """A Content-Type given in headers replaces the application/json default."""
    tool = make_http_request_tool(settings_for("127.0.0.1"))
    await call(
        tool,
        method="PATCH",
        url=f"{server.base}/echo",
        headers={"content-type": "application/merge-patch+json"},
        body={"a": 1},
    )
    assert server.received[0].headers["Content-Type"] == "application/merge-patch+json"


async def test_bare_host_entry_allows_any_port(server):
    """An entry without a port allows every port of that host."""
    tool = make_http_request_tool(settings_for("127.0.0.1"))
    result = await call(tool, method="GET", url=f"{server.base}/echo")
    assert result.startswith("HTTP/1.1 200 OK")
    assert len(server.received) == 1


@pytest.mark.parametrize(
    ("allowed", "url_template"),
    [
        ("127.0.0.1:{port}", "http://localhost:{port}/echo"),  # same server, other name
        ("127.0.0.1:{other}", "http://127.0.0.1:{port}/echo"),  # listed host, other port
        ("localhost", "http://127.0.0.1:{port}/echo"),
        ("127.0.0.1:{port}", "http://127.0.0.1.evil.example:{port}/echo"),
    ],
)
async def test_unlisted_host_is_refused_without_a_request(server, allowed, url_template):
    """A host (or port) not on the list gets an error naming the allowed hosts; nothing is sent."""
    fmt = {"port": server.port, "other": server.port + 1}
    tool = make_http_request_tool(settings_for(allowed.format(**fmt)))

    result = await call(tool, method="GET", url=url_template.format(**fmt))

    assert result.startswith("Error: host ")
    assert "is not allowed. Allowed hosts: " + allowed.format(**fmt) in result
    assert "HTTP_REQUEST_ALLOWED_HOSTS" in result
    assert server.received == []


async def test_the_request_sent_is_the_canonical_url(server):
    """Another spelling of a URL (case, trailing dot, encoded dot segments, fragment) is sent in canonical form."""
    tool = make_http_request_tool(settings_for("127.0.0.1"))

    result = await call(tool, method="get", url=f" HTTP://127.0.0.1.:{server.port}/x/%2e%2E/echo?q=%7e#frag")

    assert result.startswith("HTTP/1.1 200 OK")
    assert [(r.method, r.path) for r in server.received] == [("GET", "/echo?q=~")]


@pytest.mark.parametrize("userinfo", ["user@", "user:secret@", "127.0.0.1\\@"])
async def test_a_url_with_a_user_name_is_refused_unsent(server, userinfo):
    """Credentials in the URL (or a backslash trick that makes them) are refused with a reason; nothing is sent."""
    tool = make_http_request_tool(settings_for("127.0.0.1"))

    result = await call(tool, method="GET", url=f"http://{userinfo}127.0.0.1:{server.port}/echo")

    assert result.startswith("Error: the URL ")
    assert "user name or password" in result and "header" in result
    assert server.received == []


def test_the_tool_carries_its_canonical_form():
    """The tool's metadata holds the canonical form the policy, the card and edits use."""
    from bot.tools.canonical import canonical_args

    tool = make_http_request_tool(settings_for("internal.example"))
    assert canonical_args(tool, {"method": "delete", "url": "HTTPS://Internal.Example:443/a#x"}) == {
        "method": "DELETE",
        "url": "https://internal.example/a",
    }


async def test_empty_allow_list_refuses_everything(server):
    """With no hosts configured the tool says so instead of naming an empty list."""
    tool = make_http_request_tool(settings_for())
    result = await call(tool, method="GET", url=f"{server.base}/echo")
    assert result.startswith("Error: no hosts are allowed")
    assert "no hosts are allowed" in tool.description.lower() or "No hosts" in tool.description
    assert server.received == []


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ({"method": "GET", "url": "ftp://127.0.0.1/x"}, "absolute http:// or https:// URL"),
        ({"method": "GET", "url": "file:///etc/passwd"}, "absolute http:// or https:// URL"),
        ({"method": "GET", "url": "/echo"}, "absolute http:// or https:// URL"),
        ({"method": "TRACE", "url": "http://127.0.0.1/echo"}, "method 'TRACE' is not supported"),
        ({"method": "CONNECT", "url": "http://127.0.0.1/echo"}, "use one of GET, HEAD"),
        ({"method": "GET", "url": "http://127.0.0.1/echo", "body": {"a": 1}}, "cannot have a body"),
        ({"method": "HEAD", "url": "http://127.0.0.1/echo", "body": "x"}, "cannot have a body"),
    ],
)
async def test_bad_scheme_method_or_body_is_refused(server, args, fragment):
    """Non-HTTP schemes, unsupported methods and bodies on GET/HEAD are refused unsent."""
    tool = make_http_request_tool(settings_for("127.0.0.1"))
    result = await call(tool, **args)
    assert result.startswith("Error:")
    assert fragment in result
    assert server.received == []


@pytest.mark.parametrize(
    "name",
    ["Host", "host", "Content-Length", "Transfer-Encoding", "Connection", "X-HTTP-Method-Override"],
)
async def test_framing_and_override_headers_are_refused(server, name):
    """Host, Content-Length, Transfer-Encoding, hop-by-hop and override headers are refused."""
    tool = make_http_request_tool(settings_for(f"127.0.0.1:{server.port}"))
    result = await call(tool, method="GET", url=f"{server.base}/echo", headers={name: "evil.example"})
    assert result.startswith("Error: these headers may not be set: " + name)
    assert server.received == []


@pytest.mark.parametrize("headers", [{"X-A": "one\r\nHost: evil"}, {"Bad Name": "x"}, {"X-A": "café"}])
async def test_malformed_headers_are_refused(server, headers):
    """Header values with line breaks or non-ASCII, and invalid names, are refused unsent."""
    tool = make_http_request_tool(settings_for("127.0.0.1"))
    result = await call(tool, method="GET", url=f"{server.base}/echo", headers=headers)
    assert result.startswith("Error:")
    assert server.received == []


async def test_redirect_is_not_followed(server):
    """A 302 comes back with its Location (made absolute) and the target is not requested."""
    tool = make_http_request_tool(settings_for("127.0.0.1"))

    result = await call(tool, method="GET", url=f"{server.base}/redirect")

    assert result.startswith("HTTP/1.1 302 Found")
    assert "location: /echo?from=redirect" in result
    assert f"call http_request again with url {server.base}/echo?from=redirect" in result
    assert [r.path for r in server.received] == ["/redirect"]


async def test_long_body_is_truncated_with_a_note(server):
    """A body over the cap is cut and the note says exactly how many characters were cut."""
    tool = make_http_request_tool(settings_for("127.0.0.1", max_chars=100))

    result = await call(tool, method="GET", url=f"{server.base}/big")

    head, body = result.split("\n\n", 1)
    assert head == "HTTP/1.1 200 OK\ncontent-type: text/plain; charset=utf-8"
    assert body == "a" * 100 + "\n[truncated: 100 more characters not shown]"


async def test_huge_body_is_read_only_up_to_the_cap(server):
    """A body beyond the download cap is not read to the end; the note gives a lower bound."""
    tool = make_http_request_tool(settings_for("127.0.0.1", max_chars=100))
    result = await call(tool, method="GET", url=f"{server.base}/huge")
    assert result.endswith("; the body is larger than 1024 KiB]")
    assert "[truncated: more than 1048476 more characters not shown" in result


async def test_binary_body_is_summarized(server):
    """A binary content type is described, not dumped into the model's context."""
    tool = make_http_request_tool(settings_for("127.0.0.1"))
    result = await call(tool, method="GET", url=f"{server.base}/binary")
    assert result.endswith("(binary body not shown: 10 bytes, content-type image/png)")


async def test_head_has_empty_body(server):
    """HEAD returns the status line and headers with an empty body note."""
    tool = make_http_request_tool(settings_for("127.0.0.1"))
    result = await call(tool, method="head", url=f"{server.base}/echo")
    assert result.startswith("HTTP/1.1 200 OK")
    assert result.endswith("(empty body)")
    assert server.received[0].method == "HEAD"


async def test_timeout_is_an_error_string(server):
    """A server slower than the timeout gives an error saying how long was waited."""
    tool = make_http_request_tool(settings_for("127.0.0.1", timeout=0.3))
    result = await call(tool, method="GET", url=f"{server.base}/slow")
    assert result == (
        f"Error: 127.0.0.1:{server.port} did not answer within 0.3 seconds. Try again later, or ask for less data."
    )


async def test_connection_refused_is_an_error_string():
    """A listed host with nothing listening gives a connection error, not a traceback."""
    port = free_port()
    tool = make_http_request_tool(settings_for("127.0.0.1"))
    result = await call(tool, method="GET", url=f"http://127.0.0.1:{port}/nothing")
    assert result.startswith(f"Error: could not connect to 127.0.0.1:{port}")


async def test_injected_transport_is_used_and_not_closed():
    """A transport passed to the factory carries every call and stays usable afterwards."""
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(f"{request.method} {request.url}")
        return httpx.Response(204)

    transport = httpx.MockTransport(handler)
    tool = make_http_request_tool(settings_for("api.example.com"), transport=transport)
    for _ in range(2):
        result = await call(tool, method="DELETE", url="https://api.example.com/items/7")
        assert result == "HTTP/1.1 204 No Content\n\n(empty body)"
    assert seen == ["DELETE https://api.example.com/items/7"] * 2


def test_schema_seen_by_the_model():
    """The method and url are required; headers and body are optional, body is any JSON."""
    tool = make_http_request_tool(settings_for("api.example.com"))
    schema = tool.tool_call_schema.model_json_schema()
    properties = schema["properties"]

    assert list(properties) == ["method", "url", "headers", "body"]
    assert schema["required"] == ["method", "url"]
    assert properties["method"]["enum"] == [
        "GET",
        "HEAD",
        "POST",
        "PUT",
        "PATCH",
        "DELETE",
        "OPTIONS",
    ]
    assert properties["headers"]["default"] is None
    assert {"type": "object", "additionalProperties": {"type": "string"}} in properties["headers"]["anyOf"]
    assert properties["body"]["default"] is None
    assert "any JSON value" in properties["body"]["description"]
    assert {b["type"] for b in properties["body"]["anyOf"]} == {
        "object",
        "array",
        "string",
        "number",
        "boolean",
    }
    assert "GET and HEAD run without review" in tool.description
    assert "Allowed hosts: api.example.com." in tool.description


@pytest.mark.parametrize(
    "entry", ["https://api.example.com", "api.example.com/v1", "*.example.com", "host:http", "[::1", "bad host!!"]
)
def test_bad_allow_list_entry_fails_at_start(entry):
    """An allow-list entry that is not `host` or `host:port` raises ConfigurationError."""
    with pytest.raises(ConfigurationError, match="HTTP_REQUEST_ALLOWED_HOSTS entry"):
        make_http_request_tool(settings_for(entry))


def test_allowed_hosts_env_string_is_split_and_lowercased():
    """HTTP_REQUEST_ALLOWED_HOSTS as a string becomes lower-case entries (settings parsing)."""
    settings = ToolSettings(http_allowed_hosts="API.example.com, 127.0.0.1:8080 ,,")
    tool = make_http_request_tool(settings)
    assert "Allowed hosts: api.example.com, 127.0.0.1:8080." in tool.description


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({"method": "GET"}, False),
        ({"method": "get"}, False),
        ({"method": "HEAD"}, False),
        ({"method": "hEaD"}, False),
        ({"method": "POST"}, True),
        ({"method": "delete"}, True),
        ({"method": "OPTIONS"}, True),
        ({"method": " GET"}, True),
        ({"method": "\uff27\uff25\uff34"}, True),  # fullwidth GET
        ({"method": ""}, True),
        ({"method": None}, True),
        ({"method": 1}, True),
        ({}, True),
    ],
)
def test_needs_review(args, expected):
    """Only GET and HEAD (any case) skip review; anything else, or no method, is reviewed."""
    assert needs_review(args) is expected

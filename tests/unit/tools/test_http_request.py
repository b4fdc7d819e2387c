"""The http_request tool against a real local aiohttp server."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import httpx
import pytest
from aiohttp import web

from bot.base.errors import ConfigurationError
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

    @property
    def allowed(self) -> str:
        """The allow-list entry for this server: its address and port."""
        return f"127.0.0.1:{self.port}"


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
                headers={name.decode(): value.decode() for name, value in request.raw_headers},  # as sent
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
    assert got.headers["x-trace"] == "abc-123"  # header names go out in lower case, as the card shows them
    assert got.headers["accept"] == "application/json"
    assert got.headers["content-type"] == "application/json"
    assert json.loads(got.body) == body
    assert got.body == json.dumps(body, ensure_ascii=False).encode()


@pytest.mark.parametrize("body", [[1, "two", {"3": 3}], "just a string", 42, False])
async def test_any_json_value_is_sent_as_json(server, body):
    """Arrays, strings, numbers and booleans are JSON-encoded like objects."""
    tool = make_http_request_tool(settings_for(server.allowed))
    await call(tool, method="PUT", url=f"{server.base}/echo", body=body)
    assert json.loads(server.received[0].body) == body


async def test_a_string_body_is_sent_json_quoted_whatever_the_content_type(server):
    """As docs/tools-and-mcp.md says: the body is always JSON, so a string goes out with its quotes even as text/plain."""
    tool = make_http_request_tool(settings_for(server.allowed))
    await call(tool, method="POST", url=f"{server.base}/echo", headers={"Content-Type": "text/plain"}, body="hello")
    [got] = server.received
    assert (got.headers["content-type"], got.body) == ("text/plain", b'"hello"')


async def test_content_type_from_headers_is_kept(server):
    """A Content-Type given in headers replaces the application/json default."""
    tool = make_http_request_tool(settings_for(server.allowed))
    await call(
        tool,
        method="PATCH",
        url=f"{server.base}/echo",
        headers={"content-type": "application/merge-patch+json"},
        body={"a": 1},
    )
    assert server.received[0].headers["content-type"] == "application/merge-patch+json"


async def test_a_host_listed_without_a_port_allows_its_schemes_default_port_only(server):
    """`127.0.0.1` allows port 80 for http (and 443 for https), not the server's other port; `host:port` allows that port."""
    bare = make_http_request_tool(settings_for("127.0.0.1", "api.example.com"))
    refused = await call(bare, method="GET", url=f"{server.base}/echo")
    assert refused.startswith(
        f"Error: host 127.0.0.1:{server.port} is not allowed. Allowed hosts: 127.0.0.1 (port 80 for http, 443 for "
        f"https; list 127.0.0.1:{server.port} for port {server.port}), api.example.com. Use one of them"
    )
    assert server.received == []
    with_port = make_http_request_tool(settings_for(server.allowed))
    assert (await call(with_port, method="GET", url=f"{server.base}/echo")).startswith("HTTP/1.1 200 OK")
    assert len(server.received) == 1


@pytest.mark.parametrize(
    ("entry", "url", "allowed"),
    [
        ("api.example.com", "https://api.example.com/x", True),
        ("api.example.com", "http://api.example.com/x", True),
        ("api.example.com", "https://api.example.com:8443/x", False),
        ("api.example.com", "http://api.example.com:443/x", False),
        ("api.example.com:8443", "https://api.example.com:8443/x", True),
        ("api.example.com:8443", "https://api.example.com/x", False),
        ("[2001:db8::1]", "https://[2001:db8::1]/x", True),
        ("[2001:db8::1]", "https://[2001:db8::1]:8443/x", False),
    ],
)
async def test_which_ports_an_entry_allows(entry, url, allowed):
    """A bare entry is its scheme's default port (443 for https, 80 for http); `host:port` is that port only."""
    sent: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(str(request.url))
        return httpx.Response(204)

    tool = make_http_request_tool(settings_for(entry), transport=httpx.MockTransport(answer))
    result = await call(tool, method="GET", url=url)
    assert (sent == [url]) is allowed, result
    assert result.startswith("Error: host ") is not allowed


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
    tool = make_http_request_tool(settings_for(server.allowed))

    result = await call(tool, method="get", url=f" HTTP://127.0.0.1.:{server.port}/x/%2e%2E/echo?q=%7e#frag")

    assert result.startswith("HTTP/1.1 200 OK")
    assert [(r.method, r.path) for r in server.received] == [("GET", "/echo?q=~")]


@pytest.mark.parametrize("userinfo", ["user@", "user:secret@", "127.0.0.1\\@"])
async def test_a_url_with_a_user_name_is_refused_unsent(server, userinfo):
    """Credentials in the URL (or a backslash trick that makes them) are refused with a reason; nothing is sent."""
    tool = make_http_request_tool(settings_for(server.allowed))

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
    [
        "Host",
        "host",
        "Content-Length",
        "Transfer-Encoding",
        "Connection",
        "X-HTTP-Method-Override",
        "X-Original-URL",
        "X-Rewrite-URL",
        "X-Original-URI",
        "Forwarded",
        "X-Forwarded-Host",
        "X-Forwarded-Prefix",
        "X-Forwarded-Uri",
        "X-Forwarded-Path",
        "X-Forwarded-For",
    ],
)
async def test_framing_and_override_headers_are_refused(server, name):
    """Host, Content-Length, Transfer-Encoding, hop-by-hop, method-override headers and headers that make a
    server route another path or host than the URL's (X-Original-URL, Forwarded, X-Forwarded-*) are refused."""
    tool = make_http_request_tool(settings_for(f"127.0.0.1:{server.port}"))
    result = await call(tool, method="GET", url=f"{server.base}/echo", headers={name: "evil.example"})
    assert result.startswith("Error: these headers may not be set: " + name.lower())
    assert "The URL decides the host and the path" in result
    assert server.received == []


@pytest.fixture
async def rewriting_server() -> AsyncIterator[tuple[int, list[str]]]:
    """A server that routes by X-Original-URL or X-Rewrite-URL when given, as IIS URL Rewrite apps, older Symfony
    and Zend Framework do; it records the path it routed."""
    routed: list[str] = []

    async def route(request: web.Request) -> web.Response:
        path = request.headers.get("X-Original-URL") or request.headers.get("X-Rewrite-URL") or request.path
        routed.append(path)
        return web.Response(text=f"served {path}")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", route)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    yield runner.addresses[0][1], routed
    await runner.cleanup()


@pytest.mark.parametrize("header", ["X-Original-URL", "X-Rewrite-URL", "x-original-url"])
async def test_a_get_judged_as_one_path_cannot_reach_another_through_a_rewrite_header(rewriting_server, header):
    """A GET (no card by default) that a path rule judged as /public never reaches /admin/ through a header."""
    from bot.policy.conditions import compile_condition

    port, routed = rewriting_server
    args = {"method": "GET", "url": f"http://127.0.0.1:{port}/public", "headers": {header: "/admin/users/delete"}}
    rule = "url(args.url).getEscapedPath().startsWith('/admin/')"
    sample = {"method": "", "url": "", "headers": {}, "body": None}
    assert not needs_review(args)
    assert compile_condition(rule, ["method", "url", "headers", "body"], sample).holds(args) is False
    tool = make_http_request_tool(settings_for(f"127.0.0.1:{port}"))
    result = await call(tool, **args)
    assert result.startswith("Error: these headers may not be set: ")
    assert routed == []


@pytest.mark.parametrize("headers", [{"X-A": "one\r\nHost: evil"}, {"Bad Name": "x"}, {"X-A": "café"}])
async def test_malformed_headers_are_refused(server, headers):
    """Header values with line breaks or non-ASCII, and invalid names, are refused unsent."""
    tool = make_http_request_tool(settings_for(server.allowed))
    result = await call(tool, method="GET", url=f"{server.base}/echo", headers=headers)
    assert result.startswith("Error:")
    assert server.received == []


async def test_redirect_is_not_followed(server):
    """A 302 comes back with its Location (made absolute) and the target is not requested."""
    tool = make_http_request_tool(settings_for(server.allowed))

    result = await call(tool, method="GET", url=f"{server.base}/redirect")

    assert result.startswith("HTTP/1.1 302 Found")
    assert "location: /echo?from=redirect" in result
    assert f"call http_request again with url {server.base}/echo?from=redirect" in result
    assert [r.path for r in server.received] == ["/redirect"]


async def test_long_body_is_truncated_with_a_note(server):
    """A body over the cap is cut and the note says exactly how many characters were cut."""
    tool = make_http_request_tool(settings_for(server.allowed, max_chars=100))

    result = await call(tool, method="GET", url=f"{server.base}/big")

    head, body = result.split("\n\n", 1)
    assert head == "HTTP/1.1 200 OK\ncontent-type: text/plain; charset=utf-8"
    assert body == "a" * 100 + "\n[truncated: 100 more characters not shown]"


async def test_huge_body_is_read_only_up_to_the_cap(server):
    """A body beyond the download cap is not read to the end; the note gives a lower bound."""
    tool = make_http_request_tool(settings_for(server.allowed, max_chars=100))
    result = await call(tool, method="GET", url=f"{server.base}/huge")
    assert result.endswith("; the body is larger than 1024 KiB]")
    assert "[truncated: more than 1048476 more characters not shown" in result


async def test_binary_body_is_summarized(server):
    """A binary content type is described, not dumped into the model's context."""
    tool = make_http_request_tool(settings_for(server.allowed))
    result = await call(tool, method="GET", url=f"{server.base}/binary")
    assert result.endswith("(binary body not shown: 10 bytes, content-type image/png)")


async def test_head_has_empty_body(server):
    """HEAD returns the status line and headers with an empty body note."""
    tool = make_http_request_tool(settings_for(server.allowed))
    result = await call(tool, method="head", url=f"{server.base}/echo")
    assert result.startswith("HTTP/1.1 200 OK")
    assert result.endswith("(empty body)")
    assert server.received[0].method == "HEAD"


async def test_timeout_is_an_error_string(server):
    """A server slower than the timeout gives an error saying how long was waited."""
    tool = make_http_request_tool(settings_for(server.allowed, timeout=0.3))
    result = await call(tool, method="GET", url=f"{server.base}/slow")
    assert result == (
        f"Error: 127.0.0.1:{server.port} did not answer within 0.3 seconds. Try again later, or ask for less data."
    )


async def test_connection_refused_is_an_error_string():
    """A listed host with nothing listening gives a connection error, not a traceback."""
    port = free_port()
    tool = make_http_request_tool(settings_for(f"127.0.0.1:{port}"))
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


# --- the address a request connects to (DNS rebinding) ----------------------------------------


class SystemLikeDns:
    """A resolver stand-in that asks as `socket.getaddrinfo` does: a text host is encoded with Python's `idna`
    codec (IDNA 2003, which maps `ß` to `ss`) before it is looked up in `zone`."""

    def __init__(self, zone: dict[str, str]) -> None:
        self.zone = zone
        self.asked: list[str] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        self.asked.append(host)
        wire = host.encode("idna").decode("ascii")
        if wire not in self.zone:
            raise OSError(-2, "Name or service not known")
        return [self.zone[wire]]


@pytest.fixture
async def twin_hosts() -> AsyncIterator[tuple[int, list[str]]]:
    """Two servers on one port: `faß.de` (xn--fa-hia.de) at 127.0.0.2, its IDNA 2003 twin `fass.de` at 127.0.0.3."""
    port = free_port()
    got: list[str] = []
    runners: list[web.AppRunner] = []
    for address, name in (("127.0.0.2", "faß.de"), ("127.0.0.3", "fass.de")):

        async def answer(request: web.Request, name: str = name) -> web.Response:
            got.append(f"{name} {request.method} {request.path} {await request.text()}")
            return web.Response(text=f"this is {name}")

        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", answer)
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, address, port).start()
        runners.append(runner)
    yield port, got
    for runner in runners:
        await runner.cleanup()


async def test_a_punycode_host_is_resolved_under_the_name_that_was_allowed(twin_hosts):
    """A request for http://xn--fa-hia.de (faß.de) is resolved as `xn--fa-hia.de` and reaches that host's
    address with its body, never `fass.de`, the name IDNA 2003 would make of the Unicode spelling."""
    port, got = twin_hosts
    dns = SystemLikeDns({"xn--fa-hia.de": "127.0.0.2", "fass.de": "127.0.0.3"})
    # The loopback addresses are listed only because the stand-ins live there.
    tool = make_http_request_tool(
        settings_for(f"xn--fa-hia.de:{port}", f"127.0.0.2:{port}", f"127.0.0.3:{port}"), resolver=dns
    )
    result = await call(tool, method="POST", url=f"http://xn--fa-hia.de:{port}/pay", body={"x": 1})
    assert result.startswith("HTTP/1.1 200 OK"), result
    assert got == ['faß.de POST /pay {"x": 1}']
    assert dns.asked == ["xn--fa-hia.de"]


async def test_tls_is_verified_against_the_ascii_name_that_was_allowed():
    """SNI and the certificate check of a pinned https request name `xn--fa-hia.de`, as ssl reads it, not `fass.de`."""
    import ssl

    from bot.tools.http_request import _PinnedTransport

    seen: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.extensions["sni_hostname"])
        return httpx.Response(204)

    dns = StandInDns(**{"xn--fa-hia_de": [["93.184.216.34"]]})
    transport = _PinnedTransport(httpx.MockTransport(answer), lambda address, port, scheme: None, dns)
    async with httpx.AsyncClient(transport=transport) as client:
        await client.get("https://xn--fa-hia.de/")
    [sni] = seen
    # The ssl module encodes a text server_hostname with the `idna` codec (IDNA 2003), as getaddrinfo does.
    checked_as = ssl.create_default_context().wrap_bio(ssl.MemoryBIO(), ssl.MemoryBIO(), server_hostname=sni)
    assert checked_as.server_hostname == "xn--fa-hia.de"
    assert dns.asked == ["xn--fa-hia.de"]


async def test_a_host_with_an_invalid_punycode_label_is_an_error_string():
    """`xn--zz` is no IDNA label: the tool answers with the reason, sends nothing and raises nothing."""
    sent: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(str(request.url))
        return httpx.Response(204)

    tool = make_http_request_tool(settings_for("xn--zz.example"), transport=httpx.MockTransport(answer))
    result = await call(tool, method="GET", url="https://xn--zz.example/")
    assert result.startswith("Error: the host 'xn--zz.example' is not a valid internationalised (IDNA) name")
    assert sent == []


class StandInDns:
    """A resolver stand-in: answers each name from a script, one answer per question, and counts the questions."""

    def __init__(self, **answers: list[list[str]]) -> None:
        self._answers = {name.replace("_", "."): list(script) for name, script in answers.items()}
        self.asked: list[str] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        self.asked.append(host)
        script = self._answers[host]
        return script.pop(0) if len(script) > 1 else script[0]


async def test_a_listed_name_that_resolves_to_loopback_is_refused_unless_the_address_is_listed(server):
    """`localhost` (the system resolver: 127.0.0.1) is listed, its address is not: refused, nothing sent;
    with the address listed too, the request goes through."""
    by_name = make_http_request_tool(settings_for(f"localhost:{server.port}"))
    refused = await call(by_name, method="GET", url=f"http://localhost:{server.port}/echo")
    assert refused.startswith("Error: the host resolves to ")
    assert "a loopback address, which is not allowed unless HTTP_REQUEST_ALLOWED_HOSTS names that address" in refused
    assert server.received == []
    both = make_http_request_tool(settings_for(f"localhost:{server.port}", f"127.0.0.1:{server.port}"))
    assert (await call(both, method="GET", url=f"http://localhost:{server.port}/echo")).startswith("HTTP/1.1 200 OK")
    assert len(server.received) == 1


async def test_a_name_rebound_to_a_private_address_is_refused(server):
    """A public name whose DNS answer is now a loopback or private address gets no request."""
    dns = StandInDns(api_example_com=[["127.0.0.1"]], intranet_example_com=[["10.1.2.3"]])
    tool = make_http_request_tool(settings_for(f"api.example.com:{server.port}", "intranet.example.com"), resolver=dns)
    loopback = await call(tool, method="GET", url=f"http://api.example.com:{server.port}/echo")
    private = await call(tool, method="GET", url="https://intranet.example.com/")
    assert loopback.startswith("Error: the host resolves to 127.0.0.1, a loopback address")
    assert f"(e.g. 127.0.0.1:{server.port})" in loopback
    assert private.startswith("Error: the host resolves to 10.1.2.3, a private address")
    assert server.received == []


async def test_a_name_rebound_to_a_site_local_address_is_refused():
    """A public name whose answer is now fec0::5 (site-local, an internal network's address) gets no connection."""
    dns = StandInDns(api_example_com=[["fec0::5"]])
    tool = make_http_request_tool(settings_for("api.example.com"), resolver=dns)
    result = await call(tool, method="GET", url="https://api.example.com/")
    assert result.startswith("Error: the host resolves to fec0::5, a site-local address, which is not allowed")
    assert "(e.g. [fec0::5]:443)" in result
    assert dns.asked == ["api.example.com"]


async def test_the_request_goes_to_the_address_that_was_checked_under_its_host_name(server):
    """One resolution per request: a second, different answer is never asked for; the server sees the listed name."""
    dns = StandInDns(rebind_example=[["127.0.0.1"], ["10.9.9.9"]])
    tool = make_http_request_tool(
        settings_for(f"rebind.example:{server.port}", f"127.0.0.1:{server.port}"), resolver=dns
    )
    result = await call(tool, method="GET", url=f"http://rebind.example:{server.port}/echo")
    assert result.startswith("HTTP/1.1 200 OK")
    assert dns.asked == ["rebind.example"]
    [got] = server.received
    assert got.headers["Host"] == f"rebind.example:{server.port}"


async def test_only_the_checked_addresses_of_an_answer_are_connected_to(server):
    """An answer with a refused address and a listed one: the request reaches the listed one only."""
    dns = StandInDns(mixed_example=[["169.254.169.254", "127.0.0.1"]])
    tool = make_http_request_tool(
        settings_for(f"mixed.example:{server.port}", f"127.0.0.1:{server.port}"), resolver=dns
    )
    assert (await call(tool, method="GET", url=f"http://mixed.example:{server.port}/echo")).startswith("HTTP/1.1 200")
    assert len(server.received) == 1


async def test_a_name_that_does_not_resolve_is_an_error_string():
    """No DNS answer: a connection error naming the host, not a traceback."""

    async def nothing(host: str, port: int) -> list[str]:
        raise OSError(-2, "Name or service not known")

    tool = make_http_request_tool(settings_for("nowhere.example"), resolver=nothing)
    result = await call(tool, method="GET", url="https://nowhere.example/")
    assert (
        result
        == "Error: could not connect to nowhere.example: cannot resolve nowhere.example: Name or service not known."
    )


async def test_https_connects_to_the_address_and_verifies_the_host_name():
    """The pinned connection carries the host name for TLS (SNI and certificate check) and in Host."""
    from bot.tools.http_request import _PinnedTransport

    seen: list[tuple[str, str, str]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append((str(request.url), request.extensions["sni_hostname"], request.headers["Host"]))
        return httpx.Response(204)

    def allow(address, port, scheme) -> None:
        return None

    dns = StandInDns(api_example_com=[["93.184.216.34"]])
    async with httpx.AsyncClient(transport=_PinnedTransport(httpx.MockTransport(answer), allow, dns)) as client:
        response = await client.get("https://api.example.com/v1")
    assert response.status_code == 204
    assert seen == [("https://93.184.216.34/v1", "api.example.com", "api.example.com")]
    assert str(response.request.url) == "https://api.example.com/v1"  # the caller's request is left as it was


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("127.0.0.1", "loopback"),
        ("::1", "loopback"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("169.254.169.254", "link-local"),
        ("fe80::1", "link-local"),
        ("fec0::1", "site-local"),  # deprecated (RFC 3879), still routed where configured; Python calls it global
        ("feff::1", "site-local"),
        ("224.0.0.1", "multicast"),
        ("ff02::1", "multicast"),
        ("10.0.0.1", "private"),
        ("172.16.0.1", "private"),
        ("192.168.1.1", "private"),
        ("fc00::1", "private"),
        ("100.64.0.1", "non-public"),  # shared address space (CGNAT)
        ("240.0.0.1", "private"),
        ("::ffff:127.0.0.1", "IPv4-mapped"),
        ("::ffff:8.8.8.8", "IPv4-mapped"),
        ("2002:7f00:1::", "loopback"),  # 6to4 of 127.0.0.1
        ("64:ff9b::a00:1", "private"),  # NAT64 of 10.0.0.1
        ("8.8.8.8", None),
        ("2606:4700:4700::1111", None),
        ("64:ff9b::808:808", None),  # NAT64 of 8.8.8.8
    ],
)
def test_which_addresses_count_as_not_public(address, kind):
    """Loopback, unspecified, link-local, multicast, private, shared and reserved addresses are not public."""
    import ipaddress

    from bot.tools.http_request import non_public_kind

    assert non_public_kind(ipaddress.ip_address(address)) == kind


@pytest.mark.parametrize(
    ("entries", "warned"),
    [
        ("localhost:8080", ["localhost:8080"]),
        ("app.localhost, localhost", ["app.localhost", "localhost"]),
        ("localhost:8080, 127.0.0.1:8080", []),
        ("localhost, [::1]", []),
        ("localhost:8080, 127.0.0.1:9090", ["localhost:8080"]),
        ("api.example.com", []),
    ],
)
def test_a_localhost_entry_without_its_address_is_warned_about_at_start(caplog, entries, warned):
    """`localhost` alone will be refused at call time (loopback), so the start says so and names the fix."""
    with caplog.at_level(logging.WARNING, logger="bot.tools.http_request"):
        make_http_request_tool(ToolSettings(http_allowed_hosts=entries))
    lines = [r.getMessage() for r in caplog.records if "loopback" in r.getMessage()]
    assert [line.split()[2].rstrip(",") for line in lines] == warned
    assert all("also names the address, e.g. 127.0.0.1" in line for line in lines)

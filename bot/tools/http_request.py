"""The `http_request` tool: HTTP calls to an operator-approved list of hosts.

What keeps it safe, in order of the checks:

- only `http`/`https` URLs whose host and port are listed in `HTTP_REQUEST_ALLOWED_HOSTS` (a
  host listed without a port allows its scheme's default port only: 443 for https, 80 for
  http); the URL and the headers are first put in their canonical form (`bot.tools.http_url`:
  one spelling per request, no user name or password, no path that servers resolve
  differently, header names in lower case), which is also what the review policy judged and
  the card showed, and the same parsed `httpx.URL` that was checked is the one sent, so no
  second parser can disagree;
- the host name is resolved once, and the request connects only to an address that was
  checked: a loopback, private, link-local or other non-public address is refused unless the
  allow-list names that address itself (`127.0.0.1:8080`), so a listed name whose DNS answer
  changes (DNS rebinding) cannot reach the machine's own or the internal network's services;
  TLS still verifies the certificate against the host name;
- redirects are never followed: a 3xx comes back to the model with its Location, and following
  it is a new call that passes the allow-list (and the review policy) again;
- headers that would change where or how the request is framed (`Host`, `Content-Length`,
  `Transfer-Encoding`, hop-by-hop headers), that override the method behind the reviewer's
  back (`X-HTTP-Method-Override` and friends), or that make a server route another path or
  host than the URL's (`X-Original-URL`, `X-Rewrite-URL`, `Forwarded`, every `X-Forwarded-*`)
  are refused (`FORBIDDEN_HEADERS`);
- GET and HEAD carry no body, so a call that skips review (see `bot.tools.builtin`) cannot carry
  a payload either;
- the response is read up to a byte cap and shown up to `HTTP_REQUEST_MAX_RESPONSE_CHARS`.

Proxy variables and `.netrc` are ignored (`trust_env=False`): the allow-list must describe the
real destination, and credentials from the host's `.netrc` must never be attached to requests
the model composes.
"""

from __future__ import annotations

import asyncio
import codecs
import inspect
import ipaddress
import json
import logging
import re
import socket
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Annotated, Any, Final

import httpx
import idna
from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, Field, WithJsonSchema

from bot.base.errors import ConfigurationError, InvalidArgumentsError
from bot.settings import ToolSettings
from bot.tools.canonical import CANONICAL_ARGS, CANONICAL_CASE, Case, CaseRule, Part
from bot.tools.http_url import (
    DEFAULT_PORTS,
    canonical_headers,
    canonical_http_request_args,
    canonical_url,
    normalize_method,
)
from bot.tools.registry import ARGS_CHECK, CANCELLABLE

log = logging.getLogger(__name__)

ALLOWED_METHODS: Final = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
READ_ONLY_METHODS: Final = frozenset({"GET", "HEAD"})
"""Methods that run without review by default and never carry a body."""

FORBIDDEN_HEADERS: Final = frozenset(
    {
        # The URL decides the host; httpx frames the body itself.
        "host",
        "content-length",
        "transfer-encoding",
        # Hop-by-hop and framing headers.
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "upgrade",
        "expect",
        # Would turn a reviewed-as-GET call into something else on many servers.
        "x-http-method-override",
        "x-http-method",
        "x-method-override",
        # Would make the server route another path than the URL's: IIS URL Rewrite sets
        # X-Original-URL and apps behind it read it; Symfony (before 2018) and Zend Framework
        # took either as the request's path; X-Original-URI is the name nginx `auth_request`
        # setups pass it under.
        "x-original-url",
        "x-rewrite-url",
        "x-original-uri",
        # Another host (or scheme, or path prefix) than the URL's to servers that trust proxies:
        # RFC 7239's Forwarded (Spring, Jetty, Undertow), Jetty's X-Forwarded-Server; every
        # `x-forwarded-*` name is refused too (FORBIDDEN_HEADER_PREFIXES).
        "forwarded",
    }
)
"""Header names (lower case) the tool refuses to send; see also `FORBIDDEN_HEADER_PREFIXES`."""
FORBIDDEN_HEADER_PREFIXES: Final = ("x-forwarded-",)
"""Refused header name prefixes: X-Forwarded-Host, -Prefix, -Uri, -Path, -Proto, -For ... tell a
server behind a proxy what the proxy received (Django, Rails, Express, Symfony, Spring and ASP.NET
Core read the host and prefix from them; Traefik's ForwardAuth servers the URI and method). The
bot is no proxy, and a server that trusts them would route or authorise by them, not by the URL
a condition judged."""

HTTP_REQUEST_CASE: Final = (
    CaseRule("method", Part.VALUE, Case.UPPER, "methods"),
    CaseRule("headers", Part.KEYS, Case.LOWER, "header names"),
    CaseRule("url", Part.HOST, Case.LOWER, "schemes and host names"),
)
"""What `canonical_http_request_args` writes in one case (`bot.tools.canonical.CaseRule`): a condition
naming them in the other case never matches, and is refused when saved."""

_MAX_HEADERS: Final = 50
_MAX_HEADER_VALUE_CHARS: Final = 8192
_MAX_DOWNLOAD_BYTES: Final = 1024 * 1024
"""Bytes read from a response at most; beyond this the size of the cut is a lower bound."""
_USER_AGENT: Final = "Countersign-http_request/1"
_SHOWN_RESPONSE_HEADERS: Final = ("content-type", "location", "retry-after")
_TEXTUAL_TYPE_HINTS: Final = ("json", "xml", "javascript", "x-www-form-urlencoded", "yaml", "csv")


def needs_review(args: Mapping[str, Any]) -> bool:
    """The default review condition: every method except GET and HEAD waits for a human.

    A missing or non-string method counts as needing review (fail closed).
    """
    return normalize_method(args.get("method")) not in READ_ONLY_METHODS


@dataclass(frozen=True, slots=True)
class _HostRule:
    host: str
    port: int | None  # None: the scheme's default port only

    def allows_port(self, port: int, scheme: str) -> bool:
        return port == (self.port if self.port is not None else DEFAULT_PORTS[scheme])

    def matches(self, hosts: set[str], port: int, scheme: str) -> bool:
        return self.host in hosts and self.allows_port(port, scheme)

    def __str__(self) -> str:
        shown = f"[{self.host}]" if ":" in self.host else self.host
        return shown if self.port is None else f"{shown}:{self.port}"

    def explained(self, hosts: set[str], port: int) -> str:
        """The entry as a refusal names it, given the names and port a URL asked for.

        A host listed without a port, asked for on another port, says which ports it allows and
        what to list (`127.0.0.1 (port 80 for http, 443 for https; list 127.0.0.1:18080 for port
        18080)`), so the refusal does not seem to contradict itself.
        """
        if self.port is not None or self.host not in hosts:
            return str(self)
        wanted = _HostRule(self.host, port)
        return f"{self} (port 80 for http, 443 for https; list {wanted} for port {port})"


def _host_names(raw_host: str) -> set[str]:
    """The names an allow-list entry may match for a URL's ASCII host.

    That host, and its Unicode spelling when it has `xn--` labels (an entry may be written `faß.de`).
    """
    name = raw_host.lower().rstrip(".")
    try:
        return {name, idna.decode(name)}
    except (idna.IDNAError, UnicodeError):
        return {name}  # e.g. a label with `_`, which IDNA does not allow: compared as written


def _parse_port(text: str, entry: str) -> int:
    if not re.fullmatch(r"[0-9]{1,5}", text) or not 0 < int(text) < 65536:
        raise ConfigurationError(f"HTTP_REQUEST_ALLOWED_HOSTS entry {entry!r} has an invalid port {text!r}")
    return int(text)


_HOST_NAME = re.compile(r"[\w.-]+")
"""A host name or IPv4 address as an allow-list entry may spell it (letters of any script: an
internationalised name is compared as written)."""


def _parse_allowed_hosts(entries: tuple[str, ...]) -> tuple[_HostRule, ...]:
    """Parse `HTTP_REQUEST_ALLOWED_HOSTS` entries: `host`, `host:port`, `[v6]` or `[v6]:port`.

    Raises:
        ConfigurationError: for an entry that is not a bare host (e.g. a URL, a wildcard, or
            text with spaces or punctuation a host name cannot have).
    """
    rules: list[_HostRule] = []
    for raw in entries:
        entry = raw.strip().lower()
        if not entry:
            continue
        if "/" in entry or "@" in entry or "*" in entry:
            raise ConfigurationError(
                f"HTTP_REQUEST_ALLOWED_HOSTS entry {raw!r} is not a host: write `host` or "
                "`host:port`, without scheme, path or wildcards"
            )
        port: int | None = None
        if entry.startswith("["):
            host, closed, rest = entry[1:].partition("]")
            if not closed or (rest and not rest.startswith(":")):
                raise ConfigurationError(f"HTTP_REQUEST_ALLOWED_HOSTS entry {raw!r} is not `[ipv6]` or `[ipv6]:port`")
            if rest:
                port = _parse_port(rest[1:], raw)
        elif entry.count(":") == 1:
            host, _, port_text = entry.partition(":")
            port = _parse_port(port_text, raw)
        else:
            host = entry  # a name, an IPv4 address, or a bare IPv6 address
        host = host.rstrip(".")
        if ":" in host:  # compared with the compressed form URLs are put in (`[0:0::1]` is `[::1]`)
            try:
                host = ipaddress.IPv6Address(host).compressed
            except ValueError:
                raise ConfigurationError(
                    f"HTTP_REQUEST_ALLOWED_HOSTS entry {raw!r} is not a valid IPv6 address"
                ) from None
        if not host:
            raise ConfigurationError(f"HTTP_REQUEST_ALLOWED_HOSTS entry {raw!r} has no host")
        if ":" not in host and not _HOST_NAME.fullmatch(host):
            raise ConfigurationError(
                f"HTTP_REQUEST_ALLOWED_HOSTS entry {raw!r} is not a host name: letters, digits, '-', '_' and "
                "'.' only (separate entries with commas)"
            )
        rules.append(_HostRule(host, port))
    return tuple(rules)


def _warn_unreachable_loopback_names(rules: tuple[_HostRule, ...]) -> None:
    """Log a warning at start for each `localhost` entry that the address check will refuse.

    `localhost` (and any `*.localhost`, RFC 6761) always resolves to a loopback address, which
    `http_request` refuses unless the list names that address itself; an allow-list written before
    that rule (`localhost:8080` alone) would otherwise fail only at the first call.
    """
    for rule in rules:
        if rule.host != "localhost" and not rule.host.endswith(".localhost"):
            continue
        if any(_is_loopback(other.host) and other.port == rule.port for other in rules):
            continue
        port = f":{rule.port}" if rule.port is not None else ""
        log.warning(
            "HTTP_REQUEST_ALLOWED_HOSTS names %s, which resolves to a loopback address: http_request will refuse "
            "it unless the list also names the address, e.g. 127.0.0.1%s",
            rule,
            port,
        )


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _BorrowedTransport(httpx.AsyncBaseTransport):
    """Lends a caller's transport to a short-lived client without letting the client close it."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self._inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        """Leave the borrowed transport open; its owner closes it."""

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None = None,
        exc_value: BaseException | None = None,
        traceback: TracebackType | None = None,
    ) -> None:
        """Leave the borrowed transport open; its owner closes it."""


Resolver = Callable[[str, int], Awaitable[Sequence[str]]]
"""`(host, port) -> addresses`: the IP addresses a host name resolves to, as text, in the order to
try them; raises `OSError` when the name does not resolve."""

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_NAT64: Final = ipaddress.IPv6Network("64:ff9b::/96")
"""RFC 6052's well-known prefix: its addresses reach the IPv4 address in their last 32 bits."""


async def system_resolver(host: str, port: int) -> list[str]:
    """The addresses the system resolver gives `host` for a TCP connection, without duplicates.

    Raises:
        OSError: (`socket.gaierror`) when the name does not resolve.
    """
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    addresses: list[str] = []
    for family, _, _, _, sockaddr in infos:
        if family in (socket.AF_INET, socket.AF_INET6):
            address = str(sockaddr[0]).partition("%")[0]  # a scope id belongs to the socket, not the address
            if address not in addresses:
                addresses.append(address)
    return addresses


def non_public_kind(address: IpAddress) -> str | None:
    """What makes `address` something other than a public unicast address, or None when it is one.

    Covers loopback, unspecified, link-local, IPv6 site-local (`fec0::/10`: deprecated, but still
    routed inside networks that use it, and Python 3.11 calls it global), multicast, private
    (RFC 1918, ULA), shared (100.64.0.0/10, CGNAT), reserved and documentation ranges, and every
    address Python's `ipaddress` does not call global. An IPv4-mapped IPv6 address is refused as
    such; a 6to4 or NAT64 address is judged by the IPv4 address it reaches.

    Returns:
        A few words for the error message (`"loopback"`, `"private"`, ...), or None.
    """
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return "IPv4-mapped"
        embedded = address.sixtofour
        if embedded is None and address in _NAT64:
            embedded = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        if embedded is not None:
            return non_public_kind(embedded)
    checks = (
        ("unspecified", address.is_unspecified),
        ("loopback", address.is_loopback),
        ("link-local", address.is_link_local),
        ("site-local", isinstance(address, ipaddress.IPv6Address) and address.is_site_local),
        ("multicast", address.is_multicast),
        ("private", address.is_private),
        ("reserved", address.is_reserved),
    )
    kind = next((name for name, applies in checks if applies), None)
    if kind is None and not address.is_global:
        kind = "non-public"
    return kind


class _PinnedTransport(httpx.AsyncBaseTransport):
    """Sends each request to an address it checked, never to one a second DNS answer gives.

    The host name of the request is resolved once; each address is checked (`allowed`) and
    only the addresses that pass are connected to, in order, the next one tried when a
    connection is refused. The request keeps its `Host` header and, for https, verifies the
    server's certificate against the host name (httpx's `sni_hostname` extension), so only
    the TCP destination is pinned.

    The name resolved and verified is the ASCII one the URL carries (`url.raw_host`,
    `xn--fa-hia.de`), never httpx's Unicode `url.host` (`faß.de`): `getaddrinfo` and `ssl`
    encode a Unicode name with IDNA 2003, which maps `ß` to `ss`, and `fass.de` is another
    domain than the one allowed.

    Args:
        inner: the transport that sends (it is closed with this one).
        allowed: `(address, port, scheme) -> None`, raising `_RefusedError` saying why the
            address may not be connected to.
        resolve: the resolver (`system_resolver`, or a stand-in in tests).
    """

    def __init__(
        self,
        inner: httpx.AsyncBaseTransport,
        allowed: Callable[[IpAddress, int, str], None],
        resolve: Resolver,
    ) -> None:
        self._inner = inner
        self._allowed = allowed
        self._resolve = resolve

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Resolve, check, and send `request` to the first checked address that accepts a connection.

        Raises:
            _RefusedError: every address the host resolves to is refused (nothing is sent).
            httpx.ConnectError: the name does not resolve, or no checked address accepts a
                connection.
        """
        url = request.url
        host, scheme = url.raw_host.decode("ascii"), url.scheme
        port = url.port if url.port is not None else DEFAULT_PORTS[scheme]
        addresses = await self._addresses(host, port)
        refusal: _RefusedError | None = None
        checked: list[IpAddress] = []
        for address in addresses:
            try:
                self._allowed(address, port, scheme)
            except _RefusedError as refused:
                refusal = refusal or refused
                continue
            checked.append(address)
        if not checked:
            raise refusal or _RefusedError(f"{host} has no address to connect to.")
        failure: httpx.ConnectError | None = None
        for address in checked:
            request.url = url.copy_with(host=str(address))
            if host != str(address):
                request.extensions = {**request.extensions, "sni_hostname": host}
            try:
                return await self._inner.handle_async_request(request)
            except httpx.ConnectError as exc:
                failure = exc
            finally:
                request.url = url
        raise failure or httpx.ConnectError(f"could not connect to {host}")

    async def _addresses(self, host: str, port: int) -> list[IpAddress]:
        try:
            return [ipaddress.ip_address(host)]
        except ValueError:
            pass  # a name: resolve it
        try:
            answers = await self._resolve(host, port)
        except OSError as exc:
            raise httpx.ConnectError(f"cannot resolve {host}: {exc.strerror or exc}") from None
        addresses: list[IpAddress] = []
        for answer in answers:
            try:
                addresses.append(ipaddress.ip_address(answer))
            except ValueError:
                log.warning("http_request: the resolver gave %r for %s, which is no IP address", answer, host)
        if not addresses:
            raise httpx.ConnectError(f"cannot resolve {host}: no address")
        return addresses

    async def aclose(self) -> None:
        """Close the inner transport."""
        await self._inner.aclose()


# "Any JSON value", spelled out: an empty schema means the same in JSON Schema, but
# langchain-google-genai turns a schema without a type into STRING for Gemini, and the model
# would then send objects as strings. Nested arrays are still accepted at run time.
_JSON_VALUE_SCHEMA: Final[dict[str, Any]] = {
    "anyOf": [
        {"type": "object"},
        {
            "type": "array",
            "items": {
                "anyOf": [
                    {"type": "object"},
                    {"type": "string"},
                    {"type": "number"},
                    {"type": "boolean"},
                ]
            },
        },
        {"type": "string"},
        {"type": "number"},
        {"type": "boolean"},
    ]
}


class _HttpRequestArgs(BaseModel):
    """Arguments of the http_request tool."""

    # WithJsonSchema (type metadata) rather than json_schema_extra (field metadata): LangChain
    # rebuilds the fields for `tool_call_schema` and keeps only the former.
    method: Annotated[str, WithJsonSchema({"type": "string", "enum": list(ALLOWED_METHODS)})] = Field(
        description=(
            "HTTP method. GET and HEAD run right away; POST, PUT, PATCH, DELETE and OPTIONS "
            "wait for a human's approval."
        )
    )
    url: str = Field(description="Absolute http:// or https:// URL on one of the allowed hosts, with any query string.")
    headers: dict[str, str] | None = Field(
        default=None,
        description="Optional request headers, an object mapping header names to string values "
        '(e.g. {"Accept": "application/json"}). Host, Content-Length, Transfer-Encoding, '
        "method-override and path-override headers (X-Original-URL, Forwarded, X-Forwarded-*) and "
        "names with `_` are not allowed.",
    )
    body: Annotated[Any, WithJsonSchema(_JSON_VALUE_SCHEMA)] = Field(
        default=None,
        description="Optional request body: any JSON value (object, array, string, number or "
        "boolean), sent as JSON with Content-Type: application/json unless headers set another "
        "Content-Type. Not allowed with GET or HEAD.",
    )


class _RefusedError(Exception):
    """A request the tool will not send; the message is the model-facing explanation."""


def _error(message: str) -> str:
    return f"Error: {message}"


def _check_headers(headers: Mapping[str, str] | None) -> dict[str, str]:
    """Validated request headers in canonical form (`canonical_headers`); raises `_RefusedError` saying why."""
    if not headers:
        return {}
    if len(headers) > _MAX_HEADERS:
        raise _RefusedError(f"at most {_MAX_HEADERS} headers may be sent.")
    try:
        headers = canonical_headers(headers)
    except InvalidArgumentsError as exc:
        raise _RefusedError(f"{exc.message}.") from None
    refused = sorted(
        name for name in headers if name in FORBIDDEN_HEADERS or name.startswith(FORBIDDEN_HEADER_PREFIXES)
    )
    if refused:
        raise _RefusedError(
            f"these headers may not be set: {', '.join(refused)}. The URL decides the host and the "
            "path, the tool frames the body itself, and the method must be the `method` argument. "
            "Remove them and try again."
        )
    checked: dict[str, str] = {}
    for name, value in headers.items():
        if not isinstance(value, str):
            raise _RefusedError(f"the value of header {name!r} must be a string.")
        if len(value) > _MAX_HEADER_VALUE_CHARS:
            raise _RefusedError(f"the value of header {name!r} is too long.")
        if not value.isascii() or any(ch in value for ch in "\r\n\x00"):
            raise _RefusedError(f"the value of header {name!r} must be printable ASCII on a single line.")
        checked[name] = value
    return checked


def _looks_textual(content_type: str, sample: bytes) -> bool:
    media_type = content_type.split(";", 1)[0].strip().lower()
    if media_type.startswith("text/") or any(h in media_type for h in _TEXTUAL_TYPE_HINTS):
        return True
    if media_type and media_type != "application/octet-stream":
        return False  # images, archives, PDFs, ...
    if b"\x00" in sample[:1024]:
        return False
    try:
        # The last bytes may be a character cut by the read cap.
        sample[:4096].decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start >= len(sample[:4096]) - 3
    return True


def _decode(data: bytes, charset: str | None) -> str:
    encoding = charset or "utf-8"
    try:
        codecs.lookup(encoding)
    except LookupError:
        encoding = "utf-8"
    return data.decode(encoding, errors="replace")


def _render(
    response: httpx.Response,
    request_url: httpx.URL,
    data: bytes,
    complete: bool,
    max_chars: int,
) -> str:
    """The response as the model reads it: status line, a few headers, then the body."""
    lines = [f"{response.http_version} {response.status_code} {response.reason_phrase}".rstrip()]
    for name in _SHOWN_RESPONSE_HEADERS:
        if (value := response.headers.get(name)) is not None:
            lines.append(f"{name}: {value}")
    location = response.headers.get("location")
    if response.is_redirect and location is not None:
        try:
            target = str(request_url.join(location))
        except httpx.InvalidURL:
            target = location
        lines.append(
            f"Redirect not followed. To follow it, call http_request again with url {target} "
            "(it must be on the allowed hosts)."
        )
    lines.append("")

    if not data:
        lines.append("(empty body)")
        return "\n".join(lines)
    content_type = response.headers.get("content-type", "")
    if not _looks_textual(content_type, data):
        size = f"{len(data)} bytes" if complete else f"more than {len(data)} bytes"
        lines.append(f"(binary body not shown: {size}, content-type {content_type or 'unknown'})")
        return "\n".join(lines)

    text = _decode(data, response.charset_encoding)
    if len(text) <= max_chars and complete:
        lines.append(text)
        return "\n".join(lines)
    cut = len(text) - max_chars
    lines.append(text[:max_chars])
    if complete:
        lines.append(f"[truncated: {cut} more characters not shown]")
    else:
        lines.append(
            f"[truncated: more than {max(cut, 0)} more characters not shown; the body is larger "
            f"than {_MAX_DOWNLOAD_BYTES // 1024} KiB]"
        )
    return "\n".join(lines)


def make_http_request_tool(
    settings: ToolSettings,
    *,
    transport: httpx.AsyncBaseTransport | None = None,
    resolver: Resolver = system_resolver,
) -> BaseTool:
    """Build the `http_request` tool for the hosts in `settings.http_allowed_hosts`.

    Args:
        settings: allow-list, timeout and response size cap.
        transport: an httpx transport to send through instead of the network (tests); it is
            borrowed, never closed by the tool, and decides itself where requests go: no
            address is resolved or checked.
        resolver: resolves host names for the address check (a DNS stand-in in tests).

    Returns:
        The tool, named `http_request`, whose arguments are `method, url, headers, body`.

    Raises:
        ConfigurationError: when an allow-list entry is not a host or `host:port`.
    """
    rules = _parse_allowed_hosts(settings.http_allowed_hosts)
    _warn_unreachable_loopback_names(rules)
    allowed_text = ", ".join(str(rule) for rule in rules)
    # Building an SSL context loads the CA bundle (tens of ms of event-loop CPU); once per tool,
    # not once per request (measured in bench/turns.py).
    tls = httpx.create_ssl_context(trust_env=False)
    timeout_s = settings.http_timeout_s
    max_chars = settings.http_max_response_chars

    def check_url(raw_url: str) -> httpx.URL:
        try:
            url = httpx.URL(canonical_url(raw_url))
        except InvalidArgumentsError as exc:
            raise _RefusedError(f"{exc.message}.") from None
        port = url.port if url.port is not None else DEFAULT_PORTS[url.scheme]
        names = _host_names(url.raw_host.decode("ascii"))
        if not any(rule.matches(names, port, url.scheme) for rule in rules):
            if not rules:
                raise _RefusedError(
                    "no hosts are allowed, so http_request cannot be used here. An "
                    "administrator can allow hosts with HTTP_REQUEST_ALLOWED_HOSTS."
                )
            shown = url.netloc.decode("ascii", errors="replace")
            listed = ", ".join(rule.explained(names, port) for rule in rules)
            raise _RefusedError(
                f"host {shown} is not allowed. Allowed hosts: {listed}. Use one of them, or ask an "
                "administrator to add it to HTTP_REQUEST_ALLOWED_HOSTS."
            )
        return url

    def check_address(address: IpAddress, port: int, scheme: str) -> None:
        """Refuse a non-public address the allow-list does not name as an address (DNS rebinding)."""
        kind = non_public_kind(address)
        if kind is None or any(rule.host == address.compressed and rule.allows_port(port, scheme) for rule in rules):
            return
        shown = f"[{address.compressed}]:{port}" if address.version == 6 else f"{address}:{port}"
        raise _RefusedError(
            f"the host resolves to {address}, a {kind} address, which is not allowed unless "
            f"HTTP_REQUEST_ALLOWED_HOSTS names that address itself (e.g. {shown}). Nothing was sent."
        )

    async def send(method: str, url: httpx.URL, headers: dict[str, str], content: bytes | None) -> str:
        sender: httpx.AsyncBaseTransport = (
            _BorrowedTransport(transport)
            if transport is not None
            else _PinnedTransport(httpx.AsyncHTTPTransport(verify=tls, trust_env=False), check_address, resolver)
        )
        async with (
            asyncio.timeout(timeout_s),
            httpx.AsyncClient(
                transport=sender,
                timeout=httpx.Timeout(timeout_s),
                follow_redirects=False,
                trust_env=False,
                headers={"User-Agent": _USER_AGENT},
            ) as client,
            client.stream(method, url, headers=headers, content=content) as response,
        ):
            buffer = bytearray()
            complete = True
            async for chunk in response.aiter_bytes():
                buffer += chunk
                if len(buffer) > _MAX_DOWNLOAD_BYTES:
                    del buffer[_MAX_DOWNLOAD_BYTES:]
                    complete = False
                    break
            log.info(
                "http_request %s %s://%s%s -> %d (%d bytes read)",
                method,
                url.scheme,
                url.netloc.decode("ascii", errors="replace"),
                url.path,
                response.status_code,
                len(buffer),
            )
            return _render(response, url, bytes(buffer), complete, max_chars)

    def prepare(
        method: str, url: str, headers: dict[str, str] | None, body: Any
    ) -> tuple[str, httpx.URL, dict[str, str], bytes | None]:
        """Everything checked before a request is sent; raises `_RefusedError` with the reason."""
        verb = normalize_method(method)
        if verb not in ALLOWED_METHODS:
            raise _RefusedError(f"method {method!r} is not supported; use one of {', '.join(ALLOWED_METHODS)}.")
        target = check_url(url)
        request_headers = _check_headers(headers)
        content: bytes | None = None
        if body is not None:
            if verb in READ_ONLY_METHODS:
                raise _RefusedError(f"{verb} requests cannot have a body; leave `body` empty.")
            try:
                content = json.dumps(body, ensure_ascii=False, allow_nan=False).encode()
            except (TypeError, ValueError) as exc:
                raise _RefusedError(f"the body is not a JSON value: {exc}.") from None
            if "content-type" not in request_headers:
                request_headers["content-type"] = "application/json"
        return verb, target, request_headers, content

    def refusal(args: Mapping[str, Any]) -> str | None:
        """Why the tool would refuse `args` without sending anything (for edits), or None."""
        try:
            prepare(str(args.get("method", "")), str(args.get("url", "")), args.get("headers"), args.get("body"))
        except _RefusedError as refused:
            return str(refused)
        return None

    async def http_request(
        method: str,
        url: str,
        headers: dict[str, str] | None = None,
        body: Any = None,
    ) -> str:
        """Make an HTTP request to one of the allowed hosts and return the response.

        GET and HEAD run without review; POST, PUT, PATCH, DELETE and OPTIONS wait for a
        human's approval before they are sent. Redirects are not followed: a 3xx answer comes
        back with its Location so you can decide to request it. The answer starts with the
        status line and the content-type (and location) headers, followed by the body as
        text, cut to a maximum length with a note saying how much was cut. A line starting
        with "Error:" means the request was not sent or did not complete; it says what to do.
        """
        try:
            verb, target, request_headers, content = prepare(method, url, headers, body)
        except _RefusedError as refusal:
            return _error(str(refusal))

        host = target.netloc.decode("ascii", errors="replace")
        try:
            return await send(verb, target, request_headers, content)
        except _RefusedError as refusal:  # an address the allow-list does not cover
            log.warning("http_request to %s refused: %s", host, refusal)
            return _error(str(refusal))
        except (httpx.TimeoutException, TimeoutError):
            return _error(f"{host} did not answer within {timeout_s:g} seconds. Try again later, or ask for less data.")
        except httpx.ConnectError as exc:
            return _error(f"could not connect to {host}: {exc or type(exc).__name__}.")
        except httpx.HTTPError as exc:
            # Protocol errors, a connection dropped mid-response, invalid redirects ...
            log.warning("http_request to %s failed: %s: %s", host, type(exc).__name__, exc)
            return _error(f"the request to {host} failed: {type(exc).__name__}: {exc}.")

    description = inspect.cleandoc(http_request.__doc__ or "")
    if rules:
        description += f"\n\nAllowed hosts: {allowed_text}."
    else:
        description += "\n\nNo hosts are allowed at the moment, so every request is refused."
    return StructuredTool.from_function(
        coroutine=http_request,
        name="http_request",
        description=description,
        args_schema=_HttpRequestArgs,
        # A stop may cancel a request under way: the server sees a closed connection, and the
        # model reads that the outcome is unknown (bot.turns.stop.signal).
        metadata={
            ARGS_CHECK: refusal,
            CANONICAL_ARGS: canonical_http_request_args,
            CANONICAL_CASE: HTTP_REQUEST_CASE,
            CANCELLABLE: True,
        },
    )

"""The canonical form of `http_request` arguments: one spelling per request.

See docs/decisions/0010-canonical-arguments.md.

A URL can be written many ways that the tool sends to the same place: `HTTPS://Internal.Example:443/a`,
`https://internal.example./a`, `https://internal.example/x/../a#top`. An admin's condition compares
strings, so it must see the one spelling the tool will send. `canonical_url` parses with the same
parser the tool sends with (httpx), then writes the URL back in this form:

- scheme and host lower-case; an internationalised host in its ASCII (IDNA, `xn--`) form, as
  sent on the wire (an `xn--` label that is no valid IDNA 2008 label is refused, as httpx
  refuses the Unicode name it would stand for, and so is a host starting with one that httpx
  cannot decode whole, e.g. with a `_` in another label); the trailing dot of a fully
  qualified name dropped (the allow-list ignores it too); IPv6 addresses compressed (`[0:0::1]` is `[::1]`);
  IPv4 addresses only as four decimal numbers (`127.1`, `2130706433` or `0x7f.0.0.1` would
  reach the same address through the system resolver under another name, so they are refused);
- the port only when it is not the scheme's default (80 for http, 443 for https);
- the path at least `/`, with RFC 3986 normalisation: percent-encodings of unreserved
  characters decoded (`%7E` is `~`, `%2e` is `.`), other percent-encodings in upper case, a
  `%` that starts no encoding written `%25`, and `.`/`..` segments removed as httpx removes
  them (also after decoding, so `/a/%2e%2e/b` is `/b`);
- the query kept, normalised like the path (an empty `?` dropped); the fragment dropped (it is
  never sent);
- surrounding whitespace removed.

Refused (`InvalidArgumentsError`), because no spelling of them is safe to judge or to send: a
user name or password (`user@host`; credentials belong in headers, and a backslash before
the `@` splits the URL differently in browsers and in httpx), a host with characters outside
letters, digits, `-`, `_` and dots (percent-encoding, a backslash), a zone id, another scheme,
an invalid port, and a path that servers resolve differently (`check_path`): an empty segment
(`//`, which some servers merge into one `/`), an encoded slash or backslash, or a backslash
(`%2F`, `%5C`: some servers decode them into separators), a `;` (Tomcat, Jetty and Spring drop
what follows it in a segment, so `/public/..;/admin` is `/admin` to them), an encoded NUL
(`%00`), a segment that ends in `.` or a space once decoded (IIS and Windows strip them, so
`/admin./x` and `/admin%20/x` are `/admin/x` there). A path-prefix condition then reads the
segments the server will.

The method is written in upper case. Header names are written in lower case, as HTTP/2 sends
them (HTTP reads them case-insensitively), and values without surrounding spaces or tabs (HTTP
drops them); two names that differ only in case are refused: HTTP reads them as one header, a
condition as two. A name with `_` is refused: CGI, PHP, Rack and many WSGI servers read
`x_sudo` and `x-sudo` as one variable (`HTTP_X_SUDO`), a condition as two (nginx drops such
headers by default). `canonical_http_request_args` is idempotent, and the tool sends exactly the
URL and headers it returns.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import unquote

import httpx
import idna

from bot.base.errors import InvalidArgumentsError

DEFAULT_PORTS: Final = {"http": 80, "https": 443}
_WHITESPACE: Final = " \t\n\r\f\v"
_LABEL: Final = re.compile(r"[a-z0-9_-]{1,63}")
_NUMERIC_LABEL: Final = re.compile(r"[0-9]+|0x[0-9a-f]*")
_PERCENT: Final = re.compile(r"%([0-9A-Fa-f]{2})|%")
_UNRESERVED: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
HEADER_NAME: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
"""An HTTP field name (RFC 9110 `token`)."""
_STRIPPED_AT_SEGMENT_END: Final = (".", " ")
"""What Windows (and so IIS) strips from the end of a path segment: `/admin./` is `/admin/` there."""
_PATH_REFUSALS: Final = (
    ("//", "has an empty segment (`//`), which some servers merge into one `/`; remove the extra `/`"),
    ("%2F", "has an encoded `/` (`%2F`), which some servers decode into a separator; remove it"),
    ("%5C", "has an encoded backslash (`%5C`), which some servers read as `/`; remove it"),
    ("\\", "has a backslash, which some servers read as `/`; use `/`"),
    (
        ";",
        "has a `;`: some servers (Tomcat, Jetty) drop what follows it in a segment and others do not; "
        "leave it out, or write `%3B` if it is part of a name",
    ),
    ("%00", "has an encoded NUL (`%00`), where some servers cut the path; remove it"),
)
"""What `check_path` refuses in a normalised path, and why."""


def normalize_method(value: object) -> str | None:
    """The upper-case HTTP method in `value`, or None when it is not an ASCII string.

    The tool, its built-in review condition and the canonical form all use this, so they can
    never disagree about which method a call uses (`"get"` is GET; a non-ASCII look-alike is
    no method at all).
    """
    if not isinstance(value, str) or not value.isascii():
        return None
    return value.upper()


def canonical_http_request_args(args: Mapping[str, Any]) -> dict[str, Any]:
    """`http_request`'s arguments in canonical form (see the module docstring).

    Args:
        args: `{"method", "url", "headers", "body"}` as sent; values of unexpected types are
            left for the tool's schema to refuse.

    Returns:
        A new dict: the method upper-case, the URL per `canonical_url`, the headers per
        `canonical_headers`, the body as given.

    Raises:
        InvalidArgumentsError: the URL is refused (field `args.url`), or a header name is not
            one, or two differ only in case (field `args.headers`).
    """
    out = dict(args)
    method = normalize_method(out.get("method"))
    if method is not None:
        out["method"] = method
    if isinstance(out.get("url"), str):
        out["url"] = canonical_url(out["url"])
    headers = out.get("headers")
    if isinstance(headers, Mapping):
        out["headers"] = canonical_headers(headers)
    return out


def canonical_headers(headers: Mapping[str, Any]) -> dict[str, Any]:
    """Request headers as the tool sends them: names in lower case, text values without surrounding blanks.

    HTTP compares names without case (HTTP/2 and 3 send them in lower case only) and drops the
    spaces and tabs around a value, so a condition must read one spelling of each:
    `args.headers['x-sudo'] == 'yes'` holds for `{"X-Sudo": " yes"}`.

    Args:
        headers: names to values as sent; a value that is not text is left for the tool to refuse.

    Returns:
        A new dict in the same order.

    Raises:
        InvalidArgumentsError: (field `args.headers`) for a name that is not an HTTP field name,
            a name with `_` (`x_sudo`, which CGI-style servers read as `x-sudo`), or two names
            that are one header in HTTP (`Accept` and `accept`).
    """
    out: dict[str, Any] = {}
    for name, value in headers.items():
        if not isinstance(name, str) or not HEADER_NAME.fullmatch(name):
            raise InvalidArgumentsError(f"{str(name)[:100]!r} is not a valid header name", field="args.headers")
        if "_" in name:
            # CGI (and PHP, Rack, many WSGI servers) turn `-` into `_` for HTTP_* variables.
            raise InvalidArgumentsError(
                f"the header name {name[:100]!r} has a `_`, which CGI, PHP and Rack servers read as `-` "
                "(and nginx drops such headers); write `-` instead",
                field="args.headers",
            )
        key = name.lower()
        if key in out:
            raise InvalidArgumentsError(
                f"the header {key!r} is given twice (header names ignore case); give it once",
                field="args.headers",
            )
        out[key] = value.strip(" \t") if isinstance(value, str) else value
    return out


def canonical_url(text: str) -> str:
    """The canonical spelling of an absolute http(s) URL (see the module docstring).

    Args:
        text: the URL as written.

    Returns:
        `scheme://host[:port]/path[?query]`; `canonical_url` of it returns it unchanged, and
        `httpx.URL` of it prints it unchanged.

    Raises:
        InvalidArgumentsError: with field `args.url`, saying what is wrong and what to write.
    """
    stripped = text.strip(_WHITESPACE)
    shown = stripped[:200]
    try:
        url = httpx.URL(stripped)
    except (httpx.InvalidURL, TypeError, ValueError) as exc:
        raise _refused(f"invalid URL {shown!r}: {exc}") from None
    scheme = url.scheme.lower()
    if scheme not in DEFAULT_PORTS or not url.raw_host:
        raise _refused(f"invalid URL {shown!r}: give an absolute http:// or https:// URL")
    if url.userinfo:
        raise _refused(
            f"the URL {shown!r} carries a user name or password (the part before `@`); "
            "remove it, and send credentials in a header (e.g. Authorization) instead"
        )
    host = canonical_host(url.raw_host.decode("ascii", errors="replace"))
    port = url.port if url.port is not None else DEFAULT_PORTS[scheme]
    if not 0 < port < 65536:
        raise _refused(f"invalid port {port} in URL {shown!r}")
    netloc = f"[{host}]" if ":" in host else host
    if port != DEFAULT_PORTS[scheme]:
        netloc += f":{port}"
    raw = url.raw_path.decode("ascii", errors="replace")
    path, _, query = raw.partition("?")
    path = _remove_dot_segments(_normalize_percent(path)) or "/"
    check_path(path)
    query = _normalize_percent(query)
    return f"{scheme}://{netloc}{path}" + (f"?{query}" if query else "")


def canonical_host(raw_host: str) -> str:
    """A host as `canonical_url` writes it (without brackets for IPv6).

    Args:
        raw_host: the host as httpx parsed it (ASCII: an internationalised name is already in
            its `xn--` form).

    Raises:
        InvalidArgumentsError: for a host that is neither a plain name, a dotted-quad IPv4
            address nor an IPv6 address, or a name with an `xn--` label that is no valid IDNA
            2008 label (`xn--zz`), or one starting with `xn--` that IDNA cannot decode whole.
    """
    host = raw_host.lower()
    if ":" in host:
        if "%" in host:
            raise _refused(f"the IPv6 address {raw_host!r} has a zone id (`%...`); leave it out")
        try:
            return ipaddress.IPv6Address(host).compressed
        except ValueError:
            raise _refused(f"{raw_host!r} is not a valid IPv6 address") from None
    name = host[:-1] if host.endswith(".") else host
    labels = name.split(".")
    if len(name) > 253 or not all(_LABEL.fullmatch(label) for label in labels):
        raise _refused(
            f"the host {raw_host!r} is not a valid host name: use letters, digits, `-` and dots, "
            "without percent-encoding or backslashes"
        )
    if _NUMERIC_LABEL.fullmatch(labels[-1]):
        # The resolver reads a name ending in a number as an IPv4 address in any of its old
        # spellings; only the one standard spelling can be compared and allowed.
        try:
            return str(ipaddress.IPv4Address(name))
        except ValueError:
            raise _refused(
                f"the host {raw_host!r} is not a valid IPv4 address: write it as four decimal numbers (e.g. 10.0.0.1)"
            ) from None
    try:
        for label in labels:
            if label.startswith("xn--"):
                idna.decode(label)
        if name.startswith("xn--"):
            # httpx decodes such a host whole (IDNA 2008) for every request it builds (`url.host`).
            idna.decode(name)
    except (idna.IDNAError, UnicodeError) as exc:
        raise _refused(
            f"the host {raw_host!r} is not a valid internationalised (IDNA) name ({exc}); write it in its own "
            "letters or in its correct `xn--` form"
        ) from None
    return name


def check_path(path: str) -> None:
    """Refuse a normalised path that servers resolve differently (see the module docstring).

    A segment is checked once decoded too: `%20` at its end is a space that Windows strips.

    Args:
        path: the path as `canonical_url` writes it (percent-encodings in upper case, dot
            segments removed).

    Raises:
        InvalidArgumentsError: (field `args.url`) naming what is wrong and what to write.
    """
    for needle, problem in _PATH_REFUSALS:
        if needle in path:
            raise _refused(f"the URL path {path[:200]!r} {problem}")
    for segment in unquote(path).split("/"):
        if segment.endswith(_STRIPPED_AT_SEGMENT_END):
            raise _refused(
                f"the URL path {path[:200]!r} has a segment ending in `.` or a space ({segment[:100]!r}), which IIS "
                "and Windows servers strip (`/admin./` is `/admin/` to them); remove the trailing `.` or space"
            )


def _normalize_percent(text: str) -> str:
    """RFC 3986 6.2.2: decode unreserved characters, upper-case other encodings, escape a lone `%`."""

    def one(match: re.Match[str]) -> str:
        hex_digits = match.group(1)
        if hex_digits is None:
            return "%25"
        char = chr(int(hex_digits, 16))
        return char if char in _UNRESERVED else f"%{hex_digits.upper()}"

    return _PERCENT.sub(one, text)


def _remove_dot_segments(path: str) -> str:
    """Drop `.` and `..` segments exactly as httpx does for what it sends (`/a/b/..` is `/a`).

    This runs again after `_normalize_percent`, so `%2e%2e` counts as `..`. httpx's rule (RFC
    3986 5.2.4, except that a final `.` or `..` leaves no trailing slash) is kept, so a path
    spelled with dots and the same path spelled with encoded dots give one form.
    """
    if "." not in path:
        return path
    output: list[str] = []
    for segment in path.split("/"):
        if segment == ".":
            continue
        if segment == "..":
            if output and output != [""]:
                output.pop()
            continue
        output.append(segment)
    return "/".join(output)


def _refused(message: str) -> InvalidArgumentsError:
    return InvalidArgumentsError(message, field="args.url")

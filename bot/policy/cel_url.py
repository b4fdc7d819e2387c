"""URL helpers for admin conditions, named as in Kubernetes' CEL URL library.

`url(args.url).getHostname() == 'internal.example'` says what `args.url.startsWith(...)` only
approximates (`https://internal.example.evil.example/` starts with `https://internal.example`).
`url()` parses with `bot.tools.http_url.canonical_url`, the parser and canonical form the
`http_request` tool sends with, so a helper reads exactly the request that would go out. Text
that is not an http(s) URL the tool would send is an evaluation error: the call needs review
(fail closed, `bot.policy.review`). `isURL()` asks without failing.

As in Kubernetes (https://kubernetes.io/docs/reference/using-api/cel/#kubernetes-url-library):
`getScheme()`, `getHost()` (with the port when one is written: `example.com:8443`,
`[::1]:8443`), `getHostname()` (without port or brackets), `getPort()` (the written port as
text, `''` for the scheme's default, which the canonical form never writes), `getEscapedPath()`
and `getQuery()` (a map from each name to its list of values, decoded).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final
from urllib.parse import parse_qs

import httpx
from celpy import celtypes

from bot.base.errors import InvalidArgumentsError
from bot.tools.http_url import canonical_url

_MARK: Final = celtypes.StringType("\x00url")
"""A key no JSON argument can have (NUL is scrubbed or refused), marking a parsed URL value."""


def _parsed(value: Any) -> celtypes.MapType:
    if not isinstance(value, celtypes.MapType) or _MARK not in value:
        raise TypeError("expected a URL made by url(...)")
    return value


def _part(name: str) -> Callable[[Any], Any]:
    key = celtypes.StringType(name)

    def get(value: Any) -> Any:
        return _parsed(value)[key]

    get.__name__ = f"get_{name}"
    return get


def url(value: Any) -> celtypes.MapType:
    """Parse `value` into a URL value for the `get...()` helpers.

    Raises:
        TypeError: `value` is not text.
        ValueError: the text is not an http(s) URL the tool would send (the condition then
            fails, and the call needs review).
    """
    if not isinstance(value, str):
        raise TypeError("url() takes text")
    try:
        parsed = httpx.URL(canonical_url(str(value)))
    except InvalidArgumentsError as exc:
        raise ValueError(exc.message) from None
    hostname = parsed.raw_host.decode("ascii")
    port = "" if parsed.port is None else str(parsed.port)
    bracketed = f"[{hostname}]" if ":" in hostname else hostname
    query = {
        celtypes.StringType(name): celtypes.ListType([celtypes.StringType(v) for v in values])
        for name, values in parse_qs(parsed.query.decode("ascii"), keep_blank_values=True).items()
    }
    return celtypes.MapType(
        {
            _MARK: celtypes.BoolType(True),
            celtypes.StringType("scheme"): celtypes.StringType(parsed.scheme),
            celtypes.StringType("host"): celtypes.StringType(f"{bracketed}:{port}" if port else bracketed),
            celtypes.StringType("hostname"): celtypes.StringType(hostname),
            celtypes.StringType("port"): celtypes.StringType(port),
            celtypes.StringType("path"): celtypes.StringType(parsed.raw_path.decode("ascii").partition("?")[0]),
            celtypes.StringType("query"): celtypes.MapType(query),
        }
    )


def is_url(value: Any) -> celtypes.BoolType:
    """Whether `value` is text that `url()` accepts."""
    if not isinstance(value, str):
        return celtypes.BoolType(False)
    try:
        canonical_url(str(value))
    except InvalidArgumentsError:
        return celtypes.BoolType(False)
    return celtypes.BoolType(True)


URL_FUNCTIONS: Final[dict[str, Callable[..., Any]]] = {
    "url": url,
    "isURL": is_url,
    "getScheme": _part("scheme"),
    "getHost": _part("host"),
    "getHostname": _part("hostname"),
    "getPort": _part("port"),
    "getEscapedPath": _part("path"),
    "getQuery": _part("query"),
}
"""The helpers by their CEL names, for `bot.policy.conditions`."""

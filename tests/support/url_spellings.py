"""Hypothesis strategies: many spellings of one HTTP request's URL.

Each base URL is written in canonical form (`bot.tools.http_url.canonical_url`); `spellings`
draws another way to write the same request, the way a model (or an attacker steering one)
might: upper-case scheme and host, the default port written out, an empty `@`, a trailing dot,
the Unicode form of an IDNA host, percent-encoded unreserved characters, `.`/`..` segments, a
fragment, surrounding whitespace. The tests state that the canonical form, and therefore the
policy's mode, never depends on which of these was written.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

_UNRESERVED_MARKS = "-._~"
_UNICODE_HOSTS = {"xn--bcher-kva.example": "bücher.example"}


@dataclass(frozen=True, slots=True)
class _Base:
    scheme: str
    host: str
    port: int | None
    path: str
    query: str | None

    def __str__(self) -> str:
        netloc = f"[{self.host}]" if ":" in self.host else self.host
        if self.port is not None:
            netloc += f":{self.port}"
        return f"{self.scheme}://{netloc}{self.path}" + (f"?{self.query}" if self.query else "")


_BASES = [
    _Base("https", "internal.example", None, "/", None),
    _Base("https", "internal.example", None, "/deploy/run", "env=prod&dry-run=no"),
    _Base("http", "internal.example", 8080, "/a/b.json", None),
    _Base("https", "xn--bcher-kva.example", None, "/katalog", None),
    _Base("https", "internal.example.evil.example", None, "/", None),
    _Base("https", "evil.example", None, "/internal.example/x", None),
    _Base("http", "127.0.0.1", 9000, "/x%3Ay", "q=~a"),
    _Base("https", "::1", None, "/v1", None),
]
BASE_URLS = [str(base) for base in _BASES]
"""Canonical URLs: an internal host, a look-alike, a path that names it, IPs, IDNA, a query."""

_BY_TEXT = {str(base): base for base in _BASES}
_DEFAULT_PORT = {"http": 80, "https": 443}


def _mixed_case(draw: st.DrawFn, text: str) -> str:
    flips = draw(st.lists(st.booleans(), min_size=len(text), max_size=len(text)))
    return "".join(ch.upper() if flip else ch for ch, flip in zip(text, flips, strict=True))


def _encode_some(draw: st.DrawFn, text: str) -> str:
    """Percent-encode some unreserved characters, and vary the case of existing encodings."""
    out: list[str] = []
    index = 0
    while index < len(text):
        ch = text[index]
        if ch == "%":
            out.append("%" + _mixed_case(draw, text[index + 1 : index + 3]))
            index += 3
            continue
        if ((ch.isalnum() and ch.isascii()) or ch in _UNRESERVED_MARKS) and draw(st.booleans()):
            out.append("%" + _mixed_case(draw, f"{ord(ch):02x}"))
        else:
            out.append(ch)
        index += 1
    return "".join(out)


def _with_dot_segments(draw: st.DrawFn, path: str) -> str:
    segments = path.split("/")[1:]
    at = draw(st.integers(0, max(len(segments) - 1, 0)))
    detour = draw(st.sampled_from(["./", "zz/../", "%2e/", "a/%2E%2e/", "../"]))
    if detour == "../" and at != 0:
        detour = "./"  # `..` at the root stays at the root; elsewhere it would climb
    return "/" + "/".join(segments[:at]) + ("/" if at else "") + detour + "/".join(segments[at:])


@st.composite
def spellings(draw: st.DrawFn, url: str) -> str:
    """Another spelling of the canonical `url` (one of `BASE_URLS`) that means the same request."""
    base = _BY_TEXT[url]
    scheme = _mixed_case(draw, base.scheme)
    host = base.host
    if host in _UNICODE_HOSTS and draw(st.booleans()):
        host = _UNICODE_HOSTS[host]
    if ":" in host:
        host = f"[{_mixed_case(draw, host)}]"
    else:
        host = _mixed_case(draw, host)
        if draw(st.booleans()):
            host += "."
    port = base.port
    if port is None and draw(st.booleans()):
        port = _DEFAULT_PORT[base.scheme]
    netloc = host + (f":{'0' * draw(st.integers(0, 2))}{port}" if port is not None else "")
    if draw(st.booleans()):
        netloc = "@" + netloc
    path = _encode_some(draw, base.path)
    if draw(st.booleans()):
        path = _with_dot_segments(draw, path)
    if path == "/" and draw(st.booleans()):
        path = ""
    query = _encode_some(draw, base.query) if base.query else ("" if draw(st.booleans()) else None)
    text = f"{scheme}://{netloc}{path}" + (f"?{query}" if query is not None else "")
    if draw(st.booleans()):
        text += "#" + draw(st.sampled_from(["", "top", "/../admin", "?x=1"]))
    return draw(st.sampled_from(["", " ", "\t"])) + text + draw(st.sampled_from(["", " ", "\n"]))

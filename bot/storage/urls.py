"""PostgreSQL URL helpers: one URL in, the forms each driver wants out.

`urllib.parse.urlunsplit` drops the `//` of a URL with an empty host for schemes it does not
know (`postgresql:///db?host=/socket` would become `postgresql:/db?...`, which libpq refuses),
so URLs are reassembled here by hand.
"""

from __future__ import annotations

from urllib.parse import SplitResult, urlsplit

SCHEMES = ("postgresql", "postgres")


def _join(
    parts: SplitResult,
    *,
    scheme: str | None = None,
    netloc: str | None = None,
    path: str | None = None,
) -> str:
    url = f"{scheme or parts.scheme}://{parts.netloc if netloc is None else netloc}"
    url += parts.path if path is None else path
    if parts.query:
        url += f"?{parts.query}"
    if parts.fragment:
        url += f"#{parts.fragment}"
    return url


def normalise(url: str) -> str:
    """Return `url` with the `postgresql://` scheme.

    Raises:
        ValueError: when the URL is not a PostgreSQL URL (the message shows no password).
    """
    parts = urlsplit(url)
    if parts.scheme not in SCHEMES:
        got = parts.scheme or "no scheme"
        raise ValueError(f"DATABASE_URL must start with postgresql:// or postgres:// (got {got}://...)")
    try:
        parts.port  # noqa: B018 - urllib checks the range only when the port is read
    except ValueError:
        raise ValueError("DATABASE_URL has an invalid port (it must be 1 to 65535)") from None
    return _join(parts, scheme="postgresql")


def redact(url: str) -> str:
    """`url` without its password, for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    userinfo, _, hostport = parts.netloc.rpartition("@")
    user = userinfo.split(":", 1)[0]
    return _join(parts, netloc=f"{user}:***@{hostport}")


def with_database(url: str, database: str) -> str:
    """`url` pointing at another database on the same server."""
    return _join(urlsplit(url), path=f"/{database}")


def for_yoyo(url: str) -> str:
    """The URL with yoyo-migrations' psycopg 3 backend scheme."""
    return _join(urlsplit(normalise(url)), scheme="postgresql+psycopg")

"""PostgreSQL URL helpers: one URL in, the forms each driver wants out."""

from __future__ import annotations

from urllib.parse import SplitResult, urlsplit, urlunsplit

SCHEMES = ("postgresql", "postgres")


def normalise(url: str) -> str:
    """Return `url` with the `postgresql://` scheme.

    Raises:
        ValueError: when the URL is not a PostgreSQL URL (the message shows no password).
    """
    parts = urlsplit(url)
    if parts.scheme not in SCHEMES:
        raise ValueError(
            f"DATABASE_URL must start with postgresql:// (got {parts.scheme or 'no scheme'}://...)"
        )
    return urlunsplit(parts._replace(scheme="postgresql"))


def redact(url: str) -> str:
    """`url` without its password, for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = f"{parts.username}:***@{parts.hostname or ''}"
    if parts.port:
        netloc += f":{parts.port}"
    return urlunsplit(parts._replace(netloc=netloc))


def with_database(url: str, database: str) -> str:
    """`url` pointing at another database on the same server."""
    parts: SplitResult = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{database}"))


def for_yoyo(url: str) -> str:
    """The URL with yoyo-migrations' psycopg 3 backend scheme."""
    return urlunsplit(urlsplit(normalise(url))._replace(scheme="postgresql+psycopg"))

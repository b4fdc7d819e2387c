"""PostgreSQL URL helpers: scheme normalising, redaction, database swap, yoyo's scheme."""

from __future__ import annotations

import pytest

from bot.storage.urls import for_yoyo, normalise, redact, with_database

PASSWORD = "s3cr3t-Pa55"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("postgres://u:p@h:5432/db", "postgresql://u:p@h:5432/db"),
        ("postgresql://u:p@h:5432/db", "postgresql://u:p@h:5432/db"),
        ("POSTGRES://u:p@h/db", "postgresql://u:p@h/db"),
        ("postgres://u@h/db?sslmode=require", "postgresql://u@h/db?sslmode=require"),
        ("postgres://u:p@/db?host=/run/postgresql", "postgresql://u:p@/db?host=/run/postgresql"),
    ],
)
def test_normalise_uses_the_postgresql_scheme(url, expected):
    """`postgres://` becomes `postgresql://`; everything else is kept."""
    assert normalise(url) == expected


@pytest.mark.parametrize(
    "url",
    [
        f"mysql://root:{PASSWORD}@db/app",
        f"sqlite:///{PASSWORD}.db",
        f"http://admin:{PASSWORD}@db:5432/app",
        f"postgresql+asyncpg://u:{PASSWORD}@h/db",
    ],
)
def test_normalise_refuses_other_schemes_without_showing_the_password(url):
    """A non-PostgreSQL URL is refused; the message names the scheme, not the password."""
    with pytest.raises(ValueError, match="DATABASE_URL must start with postgresql://") as info:
        normalise(url)
    assert PASSWORD not in str(info.value)
    assert url.split(":", 1)[0] in str(info.value)


def test_normalise_refuses_a_url_without_scheme():
    """A bare host string is refused, with no password in the message."""
    with pytest.raises(ValueError) as info:
        normalise(f"//u:{PASSWORD}@h/db")
    assert "no scheme" in str(info.value)
    assert PASSWORD not in str(info.value)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (
            f"postgresql://bot:{PASSWORD}@db.example:5432/app",
            "postgresql://bot:***@db.example:5432/app",
        ),
        (f"postgres://bot:{PASSWORD}@db.example/app", "postgres://bot:***@db.example/app"),
        (
            f"postgresql://bot:{PASSWORD}@db.example:5433/app?sslmode=require",
            "postgresql://bot:***@db.example:5433/app?sslmode=require",
        ),
    ],
)
def test_redact_hides_the_password(url, expected):
    """The password becomes `***`; user, host, port, path and query stay."""
    assert redact(url) == expected


@pytest.mark.parametrize(
    "url",
    ["postgresql://bot@db.example:5432/app", "postgresql://db.example/app", "postgresql:///app"],
)
def test_redact_without_password_is_unchanged(url):
    """A URL without a password is returned as is."""
    assert redact(url) == url


def test_redact_keeps_ipv6_brackets():
    """An IPv6 host keeps its brackets after redaction."""
    assert redact(f"postgresql://u:{PASSWORD}@[::1]:5432/db") == "postgresql://u:***@[::1]:5432/db"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("postgresql://u:p@h:5432/postgres", "postgresql://u:p@h:5432/countersign"),
        ("postgresql://u:p@h:5432", "postgresql://u:p@h:5432/countersign"),
        ("postgresql://u:p@h:5432/", "postgresql://u:p@h:5432/countersign"),
        (
            "postgresql://u:p@h/postgres?sslmode=require",
            "postgresql://u:p@h/countersign?sslmode=require",
        ),
        (
            "postgresql://u@/postgres?host=/socket/dir",
            "postgresql://u@/countersign?host=/socket/dir",
        ),
        (
            "postgresql://u@localhost:5432/postgres?host=/socket/dir&port=5433",
            "postgresql://u@localhost:5432/countersign?host=/socket/dir&port=5433",
        ),
    ],
)
def test_with_database_swaps_only_the_database(url, expected):
    """The path becomes `/<database>`; credentials, host, port and query (`?host=`) stay."""
    assert with_database(url, "countersign") == expected


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("postgresql://u:p@h:5432/db", "postgresql+psycopg://u:p@h:5432/db"),
        ("postgres://u:p@h/db", "postgresql+psycopg://u:p@h/db"),
        ("postgres://u@/db?host=/socket/dir", "postgresql+psycopg://u@/db?host=/socket/dir"),
    ],
)
def test_for_yoyo_uses_the_psycopg_backend_scheme(url, expected):
    """yoyo gets `postgresql+psycopg://` for both PostgreSQL spellings."""
    assert for_yoyo(url) == expected


def test_for_yoyo_refuses_other_schemes():
    """for_yoyo refuses a non-PostgreSQL URL like normalise does."""
    with pytest.raises(ValueError, match="postgresql://"):
        for_yoyo(f"mysql://u:{PASSWORD}@h/db")


@pytest.mark.parametrize(
    ("helper", "expected"),
    [
        (normalise, "postgresql:///db?host=/socket/dir"),
        (lambda url: with_database(url, "db"), "postgresql:///db?host=/socket/dir"),
        (for_yoyo, "postgresql+psycopg:///db?host=/socket/dir"),
    ],
    ids=["normalise", "with_database", "for_yoyo"],
)
def test_url_without_host_keeps_its_double_slash(helper, expected):
    """A host-less socket URL (`postgresql:///db?host=/dir`) stays a valid URL."""
    assert helper("postgresql:///db?host=/socket/dir") == expected


def test_an_out_of_range_port_is_refused():
    """A port above 65535 is refused instead of wrapping around silently."""
    with pytest.raises(ValueError, match="invalid port"):
        normalise("postgresql://u:p@127.0.0.1:99999/db")

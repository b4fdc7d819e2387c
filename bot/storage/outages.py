"""Whether a database error means "not now" (an outage, worth trying again) rather than "no"."""

from __future__ import annotations

import ssl

import asyncpg
import psycopg

OUTAGE_SQLSTATE_CLASSES = frozenset({"08", "53", "57"})
"""SQLSTATE classes that mean "not now" rather than "no" (PostgreSQL's docs, Appendix A): 08
connection exception, 53 insufficient resources (too many connections), 57 operator
intervention (shutting down, starting up, in recovery)."""
OUTAGE_SQLSTATES = frozenset({"25006"})
"""Single SQLSTATEs that mean "not now": 25006 read_only_sql_transaction, what a hot standby
answers every write with (the server the URL names is a standby during a failover)."""


def is_outage(exc: BaseException) -> bool:
    """Whether `exc` says PostgreSQL cannot be reached now, rather than that it refused us.

    An outage: a refused, reset or timed-out connection, a host name that does not resolve
    (OSError, TimeoutError), or a server error of `OUTAGE_SQLSTATE_CLASSES` or `OUTAGE_SQLSTATES`
    (a read-only server); psycopg's connection failures without a SQLSTATE count too (asyncpg has
    checked the URL and the password first: `check_reachable`). Not an outage: a wrong password
    or user (28), a missing database (3D), a certificate that does not verify, a malformed URL,
    or any other error.
    """
    if isinstance(exc, ssl.SSLCertVerificationError):
        return False
    if isinstance(exc, (OSError, TimeoutError)):
        return True
    if isinstance(exc, asyncpg.PostgresError | psycopg.Error):
        sqlstate = exc.sqlstate
        if sqlstate is None:
            return isinstance(exc, psycopg.OperationalError)
        return sqlstate[:2] in OUTAGE_SQLSTATE_CLASSES or sqlstate in OUTAGE_SQLSTATES
    return False

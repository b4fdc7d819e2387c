"""The `current_time` tool: what time and day it is, in any IANA time zone.

Models have no clock; without this tool they guess dates from their training data. The clock is
injectable so tests can pin "now".
"""

from __future__ import annotations

import functools
import inspect
import logging
import zoneinfo
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Final

from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, Field

from bot.base.errors import InvalidArgumentsError
from bot.tools.canonical import CANONICAL_ARGS

log = logging.getLogger(__name__)

_MAX_ZONE_CHARS: Final = 64


def _utc_now() -> datetime:
    return datetime.now(UTC)


@functools.cache
def _zones_by_lower_name() -> dict[str, str]:
    """Every known zone name keyed by its lower-case form (built once; it walks tzdata)."""
    # "localtime" is the server's own zone file on some systems, not an IANA name.
    names = zoneinfo.available_timezones() - {"localtime"}
    return {name.lower(): name for name in names}


def _resolve_zone(name: str) -> zoneinfo.ZoneInfo | None:
    """The zone called `name` (case-insensitively), or None when there is no such zone.

    Only names from the zone list are loaded: `ZoneInfo` itself would also try to open any
    path-like key under the tz directories (`Europe` raises IsADirectoryError, and files such
    as `tzdata.zi` are not zones at all).
    """
    candidate = name.strip()
    if not candidate or len(candidate) > _MAX_ZONE_CHARS:
        return None
    canonical = _zones_by_lower_name().get(candidate.lower())
    if canonical is None:
        return None
    try:
        return zoneinfo.ZoneInfo(canonical)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        log.warning("time zone %r is listed but cannot be loaded", canonical)
        return None


def canonical_current_time_args(args: Mapping[str, Any]) -> dict[str, Any]:
    """`current_time`'s arguments in canonical form: the zone as the tool reads it.

    The tool looks zones up without case and surrounding whitespace (`europe/warsaw` is
    `Europe/Warsaw`), so that is the spelling a condition sees (docs/decisions/0010).

    Args:
        args: `{"timezone"}` as sent; a value that is not text is left for the schema.

    Raises:
        InvalidArgumentsError: (field `args.timezone`) for a name that is no known zone.
    """
    out = dict(args)
    name = out.get("timezone")
    if isinstance(name, str):
        zone = _resolve_zone(name)
        if zone is None:
            raise InvalidArgumentsError(
                f"unknown time zone {name[:_MAX_ZONE_CHARS]!r}; use an IANA name such as 'UTC' or 'Europe/Warsaw'",
                field="args.timezone",
            )
        out["timezone"] = zone.key
    return out


def format_time(moment: datetime, zone: zoneinfo.ZoneInfo) -> str:
    """`moment` in `zone` as `2026-05-09T14:03:12+02:00 (Saturday, Europe/Warsaw, CEST)`.

    Args:
        moment: an aware datetime.
        zone: the zone to show it in.
    """
    local = moment.astimezone(zone).replace(microsecond=0)
    abbreviation = local.tzname() or ""
    label = zone.key if abbreviation in ("", zone.key) else f"{zone.key}, {abbreviation}"
    return f"{local.isoformat()} ({local.strftime('%A')}, {label})"


class _CurrentTimeArgs(BaseModel):
    """Arguments of the current_time tool."""

    timezone: str = Field(
        default="UTC",
        description="IANA time zone name such as `Europe/Warsaw`, `Asia/Jakarta` or `UTC`.",
    )


def make_current_time_tool(now: Callable[[], datetime] = _utc_now) -> BaseTool:
    """Build the `current_time` tool.

    Args:
        now: the clock; must return an aware datetime (tests pass a fixed one).

    Returns:
        The tool, named `current_time`.
    """

    async def current_time(timezone: str = "UTC") -> str:
        """Get the current date, time and weekday.

        Returns an ISO 8601 timestamp with its UTC offset, followed by the weekday and the
        zone, for the given IANA time zone (default UTC). Use it whenever the answer depends
        on today's date or the current time.
        """
        zone = _resolve_zone(timezone)
        if zone is None:
            return (
                f"Error: unknown time zone {timezone[:_MAX_ZONE_CHARS]!r}. Use an IANA time "
                "zone name such as 'UTC', 'Europe/Warsaw' or 'America/New_York'."
            )
        return format_time(now(), zone)

    return StructuredTool.from_function(
        coroutine=current_time,
        name="current_time",
        description=inspect.cleandoc(current_time.__doc__ or ""),
        args_schema=_CurrentTimeArgs,
        metadata={CANONICAL_ARGS: canonical_current_time_args},
    )

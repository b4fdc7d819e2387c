"""The current_time tool: a fixed clock shown in the requested IANA zone."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bot.tools.current_time import make_current_time_tool

FIXED = datetime(2026, 5, 9, 12, 30, 15, 123456, tzinfo=UTC)


@pytest.fixture
def current_time():
    """The tool with its clock pinned to FIXED."""
    return make_current_time_tool(now=lambda: FIXED)


async def test_default_is_utc(current_time):
    """Without arguments the time is given in UTC, with the weekday."""
    assert await current_time.ainvoke({}) == "2026-05-09T12:30:15+00:00 (Saturday, UTC)"


@pytest.mark.parametrize(
    ("zone", "expected"),
    [
        ("Europe/Warsaw", "2026-05-09T14:30:15+02:00 (Saturday, Europe/Warsaw, CEST)"),
        ("Asia/Jakarta", "2026-05-09T19:30:15+07:00 (Saturday, Asia/Jakarta, WIB)"),
        ("Pacific/Kiritimati", "2026-05-10T02:30:15+14:00 (Sunday, Pacific/Kiritimati, +14)"),
        ("America/New_York", "2026-05-09T08:30:15-04:00 (Saturday, America/New_York, EDT)"),
        ("europe/warsaw", "2026-05-09T14:30:15+02:00 (Saturday, Europe/Warsaw, CEST)"),
    ],
)
async def test_zone(current_time, zone, expected):
    """The fixed instant is converted to the zone, including the date and weekday change."""
    assert await current_time.ainvoke({"timezone": zone}) == expected


@pytest.mark.parametrize("zone", ["Mars/Olympus_Mons", "Europe", "../../etc/passwd", "/etc/localtime", "", "x" * 200])
async def test_bad_zone_is_an_error_string(current_time, zone):
    """An unknown or path-like zone gives an error naming the problem and an example."""
    result = await current_time.ainvoke({"timezone": zone})
    assert result.startswith("Error: unknown time zone")
    assert "Europe/Warsaw" in result


def test_schema_timezone_is_optional():
    """The model sees an optional `timezone` string defaulting to UTC."""
    schema = make_current_time_tool().tool_call_schema.model_json_schema()
    assert schema.get("required", []) == []
    assert schema["properties"]["timezone"]["default"] == "UTC"
    assert schema["properties"]["timezone"]["description"]


def test_the_canonical_zone_is_the_one_the_tool_shows():
    """A condition on `args.timezone` sees the zone's own name, whatever case or blanks were sent; an unknown zone has none."""
    from bot.base.errors import InvalidArgumentsError
    from bot.tools.canonical import canonical_args

    tool = make_current_time_tool()
    assert canonical_args(tool, {"timezone": " europe/WARSAW "}) == {"timezone": "Europe/Warsaw"}
    assert canonical_args(tool, {"timezone": "Europe/Warsaw"}) == {"timezone": "Europe/Warsaw"}
    with pytest.raises(InvalidArgumentsError, match="unknown time zone") as refused:
        canonical_args(tool, {"timezone": "Mars/Olympus_Mons"})
    assert refused.value.field == "args.timezone"

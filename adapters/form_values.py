"""What Slack's and Discord's renderings of an MCP server's form share: option ids, numbers, dates.

A choice's options travel in a modal as their position ("0", "1", ...), not as the server's
value: a server's value may be longer than an input allows (Slack 150 characters, Discord 100)
or repeat after shortening, and a position is short and unique. `option_value` turns a submitted
position back into the server's option before `bot.tools.mcp.elicitation.forms.read_answer` reads
it (docs/decisions/0050-elicitation-forms-on-slack-and-discord.md).
"""

from __future__ import annotations

import math
from datetime import UTC, date, datetime
from decimal import Decimal

from bot.tools.mcp.elicitation.forms import FieldKind, FormField, Option

_NUMBER_CHARS = 20
"""The longest limit or default written into a number input; a longer one is left to the check."""


def option_id(index: int) -> str:
    """The id an option travels as in a modal: its position, from "0"."""
    return str(index)


def option_value(spec: FormField, submitted: str) -> Option | str:
    """The option a modal submitted as `submitted` (see `option_id`), for `read_answer`.

    The `Option` itself rather than its value, so that an option whose value is blank ("")
    reads as picked, not as a field left empty. Anything that is not a position of `spec`'s
    options is returned as it is, so that `read_answer` refuses it with its own words.
    """
    if submitted.isdigit() and int(submitted) < len(spec.options):
        return spec.options[int(submitted)]
    return submitted


def default_ids(spec: FormField) -> tuple[str, ...]:
    """The ids (`option_id`) of a CHOICE's or CHOICES's default options, in option order.

    At most one for a CHOICE (the first option of a repeated value), and at most `max_items`
    for a CHOICES: a default the input could not hold is cut, not sent to the platform.
    """
    chosen = spec.default if isinstance(spec.default, tuple) else (spec.default,)
    ids = tuple(option_id(i) for i, option in enumerate(spec.options) if option.value in chosen)
    most = 1 if spec.kind is FieldKind.CHOICE else spec.max_items
    return ids[:most] if most is not None and most >= 1 else ids


def clip(text: str, limit: int) -> str:
    """`text` in at most `limit` characters, ending with "…" when cut."""
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def number_text(value: float, *, integer: bool) -> str | None:
    """A number as a number input shows it: plain decimal digits ("0.00001", not "1e-05").

    None for a number that does not fit `_NUMBER_CHARS` or is not finite: such a limit or
    default is left out of the input, and the server's schema still checks the answer.
    """
    if not math.isfinite(value):
        return None
    text = str(int(value)) if integer or float(value).is_integer() else format(Decimal(repr(float(value))), "f")
    return text if len(text) <= _NUMBER_CHARS else None


def number_bounds(spec: FormField) -> tuple[str | None, str | None]:
    """A NUMBER's or INTEGER's `(minimum, maximum)` as number-input text; None where there is none.

    An integer's bounds are rounded inwards (a minimum of 0.5 is 1); bounds that leave no
    number between them are both left out, and the answer is refused by the schema's check.
    """
    integer = spec.kind is FieldKind.INTEGER
    low, high = spec.minimum, spec.maximum
    if integer:
        low = float(math.ceil(low)) if low is not None and math.isfinite(low) else low
        high = float(math.floor(high)) if high is not None and math.isfinite(high) else high
    if low is not None and high is not None and low > high:
        return None, None
    return (
        number_text(low, integer=integer) if low is not None else None,
        number_text(high, integer=integer) if high is not None else None,
    )


def default_number(spec: FormField) -> str | None:
    """A NUMBER's or INTEGER's default as number-input text; None when it has none or it breaks its own bounds."""
    value = spec.default
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if spec.kind is FieldKind.INTEGER and not float(value).is_integer():
        return None
    if (spec.minimum is not None and value < spec.minimum) or (spec.maximum is not None and value > spec.maximum):
        return None  # outside its own bounds: a number input refuses such an initial value
    return number_text(value, integer=spec.kind is FieldKind.INTEGER)


def default_text(spec: FormField, limit: int) -> str | None:
    """A TEXT field's default when an input of at most `limit` characters holds it, else None."""
    value = spec.default
    if not isinstance(value, str) or not value:
        return None
    longest = limit if spec.max_length is None else min(limit, spec.max_length)
    return value if len(value) <= longest else None


def default_date(spec: FormField) -> date | None:
    """A `format: date` field's default as a date ("2026-12-07"), else None."""
    if not isinstance(spec.default, str):
        return None
    try:
        return date.fromisoformat(spec.default)
    except ValueError:
        return None


EPOCH_S_MAX = 9_999_999_999
"""The latest moment a date-time picker takes, in seconds since the epoch (ten digits, in 2286)."""


def default_moment(spec: FormField) -> datetime | None:
    """A `format: date-time` field's default as an aware moment (UTC when it names no zone), else None.

    None too for a moment a date-time picker cannot show: before 1970 or after `EPOCH_S_MAX`.
    """
    if not isinstance(spec.default, str):
        return None
    try:
        moment = datetime.fromisoformat(spec.default)
    except ValueError:
        return None
    moment = moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    return moment if 0 <= moment.timestamp() <= EPOCH_S_MAX else None


def moment_text(epoch_s: int | float) -> str:
    """A moment picked in a form (seconds since the epoch) as RFC 3339 text in UTC: "2026-12-07T20:40:00Z".

    A number no calendar holds is returned as its digits, for `read_answer` to refuse as not a date-time.
    """
    try:
        return datetime.fromtimestamp(epoch_s, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (OverflowError, OSError, ValueError):
        return str(epoch_s)


def boolean_value(submitted: str) -> bool | str:
    """A yes / no option's id ("true" or "false") as a bool; anything else as it is, for `read_answer` to refuse."""
    return {"true": True, "false": False}.get(submitted, submitted)


BOOLEAN_IDS = ("true", "false")
"""The ids of a yes / no field's two options, Yes first."""

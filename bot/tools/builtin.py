"""The built-in tools and their default review modes (what an admin's `default` restores)."""

from __future__ import annotations

from bot.base.mode import Mode
from bot.settings import ToolSettings
from bot.tools.calculator import make_calculator_tool
from bot.tools.current_time import make_current_time_tool
from bot.tools.http_request import make_http_request_tool, needs_review
from bot.tools.registry import ToolSpec
from bot.tools.send_email import make_send_email_tool


def builtin_tools(settings: ToolSettings) -> list[ToolSpec]:
    """The built-in tools for `settings`, each with its default mode.

    - `calculator`, `current_time`: AUTO (no side effects).
    - `http_request`: REVIEW when the method is not GET or HEAD (case-insensitive; a missing
      or non-string method is reviewed).
    - `send_email`: REVIEW; present only when `SMTP_URL` is set.

    Args:
        settings: the tool section of the settings.

    Returns:
        The specs in the order the model sees the tools.

    Raises:
        ConfigurationError: when `HTTP_REQUEST_ALLOWED_HOSTS`, `SMTP_URL` or `SMTP_FROM` is
            malformed.
    """
    specs = [
        ToolSpec(tool=make_calculator_tool(), default_mode=Mode.AUTO),
        ToolSpec(tool=make_current_time_tool(), default_mode=Mode.AUTO),
        ToolSpec(
            tool=make_http_request_tool(settings),
            default_mode=Mode.REVIEW,
            review_when=needs_review,
            review_when_text="the method is not GET or HEAD",
        ),
    ]
    if settings.smtp_url is not None:
        specs.append(ToolSpec(tool=make_send_email_tool(settings), default_mode=Mode.REVIEW))
    return specs

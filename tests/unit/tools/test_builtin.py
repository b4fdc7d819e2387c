"""Built-in tool defaults: which tools exist and how they are reviewed."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from bot.base.mode import Mode
from bot.settings import ToolSettings
from bot.tools.builtin import builtin_tools


def by_name(settings: ToolSettings):
    """The built-in specs keyed by tool name."""
    return {spec.name: spec for spec in builtin_tools(settings)}


def test_without_smtp_url():
    """Without SMTP_URL: calculator, current_time, http_request; no send_email."""
    specs = builtin_tools(ToolSettings(smtp_url=None))
    assert [spec.name for spec in specs] == ["calculator", "current_time", "http_request"]


def test_with_smtp_url():
    """With SMTP_URL, send_email is added and always reviewed."""
    specs = by_name(ToolSettings(smtp_url=SecretStr("smtp://mail.example.com:2525")))
    assert list(specs) == ["calculator", "current_time", "http_request", "send_email"]
    assert specs["send_email"].default_mode is Mode.REVIEW
    assert specs["send_email"].review_when is None


def test_modes():
    """The calculator and current_time run freely; http_request is reviewed by condition."""
    specs = by_name(ToolSettings(smtp_url=None))
    assert specs["calculator"].default_mode is Mode.AUTO
    assert specs["current_time"].default_mode is Mode.AUTO
    assert specs["http_request"].default_mode is Mode.REVIEW
    assert specs["http_request"].review_when is not None


@pytest.mark.parametrize(
    ("args", "needs_review"),
    [
        ({"method": "GET", "url": "https://a.example"}, False),
        ({"method": "get", "url": "https://a.example"}, False),
        ({"method": "Get"}, False),
        ({"method": "HEAD"}, False),
        ({"method": "head"}, False),
        ({"method": "POST", "body": {"a": 1}}, True),
        ({"method": "post"}, True),
        ({"method": "PUT"}, True),
        ({"method": "PATCH"}, True),
        ({"method": "DELETE"}, True),
        ({"method": "OPTIONS"}, True),
        ({"method": "GET "}, True),
        ({"method": ""}, True),
        ({"method": None}, True),
        ({"method": ["GET"]}, True),
        ({"url": "https://a.example"}, True),
    ],
)
def test_http_request_review_when(args, needs_review):
    """Only GET and HEAD, in any case, skip review; a missing or odd method is reviewed."""
    review_when = by_name(ToolSettings(smtp_url=None))["http_request"].review_when
    assert review_when is not None
    assert review_when(args) is needs_review


def test_all_builtin_tools_are_async_with_descriptions():
    """Every built-in tool has a coroutine and a description for the model."""
    specs = builtin_tools(ToolSettings(smtp_url=SecretStr("smtp://mail.example.com")))
    for spec in specs:
        assert spec.tool.coroutine is not None, spec.name
        assert spec.tool.description, spec.name

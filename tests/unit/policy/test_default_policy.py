"""DefaultPolicy: each tool's built-in mode and review condition, failing closed."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.tools import tool

from bot.base.mode import Mode
from bot.policy.review import DefaultPolicy, PolicyContext
from bot.settings import ToolSettings
from bot.tools.http_request import make_http_request_tool, needs_review
from bot.tools.registry import ToolRegistry, ToolSpec

CONTEXT = PolicyContext(thread_id="slack:T1:C1:1.2", platform="slack", workspace_id="T1", channel_id="C1")


@tool
def lookup(query: str) -> str:
    """Look something up."""
    return query


@tool
def send(to: str, body: str) -> str:
    """Send a message."""
    return to


@tool
def wipe(target: str) -> str:
    """Delete everything."""
    return target


@tool
def post(method: str, amount: int = 0) -> str:
    """Post something, maybe."""
    return method


class Recorder:
    """A review condition that records the args it saw and returns a fixed answer."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.seen: list[Mapping[str, Any]] = []

    def __call__(self, args: Mapping[str, Any]) -> Any:
        self.seen.append(dict(args))
        return self.answer


def broken(args: Mapping[str, Any]) -> bool:
    """A review condition that always raises."""
    raise KeyError("amount")


def call(name: str, **args: Any) -> dict[str, Any]:
    """A tool call as the model emits it."""
    return {"name": name, "args": args, "id": f"call-{name}", "type": "tool_call"}


def policy(*specs: ToolSpec) -> DefaultPolicy:
    """A DefaultPolicy over `specs`."""
    return DefaultPolicy(ToolRegistry(specs))


async def test_auto_tool_is_auto():
    """A tool whose default mode is AUTO runs without review."""
    p = policy(ToolSpec(tool=lookup, default_mode=Mode.AUTO))
    assert await p.mode_for(call("lookup", query="x"), CONTEXT) is Mode.AUTO


async def test_review_tool_without_condition_is_review():
    """A REVIEW tool without a condition is always reviewed."""
    p = policy(ToolSpec(tool=send, default_mode=Mode.REVIEW))
    assert await p.mode_for(call("send", to="a", body="b"), CONTEXT) is Mode.REVIEW


async def test_spec_default_mode_is_review():
    """A ToolSpec without a mode defaults to REVIEW (safe by default)."""
    p = policy(ToolSpec(tool=send))
    assert await p.mode_for(call("send", to="a", body="b"), CONTEXT) is Mode.REVIEW


async def test_deny_tool_is_deny():
    """A DENY tool is denied."""
    p = policy(ToolSpec(tool=wipe, default_mode=Mode.DENY))
    assert await p.mode_for(call("wipe", target="db"), CONTEXT) is Mode.DENY


@pytest.mark.parametrize(("answer", "expected"), [(True, Mode.REVIEW), (False, Mode.AUTO)])
async def test_review_when_decides(answer, expected):
    """With `review_when`, a REVIEW tool is reviewed only when the condition holds."""
    condition = Recorder(answer)
    p = policy(ToolSpec(tool=post, default_mode=Mode.REVIEW, review_when=condition))
    assert await p.mode_for(call("post", method="PUT", amount=3), CONTEXT) is expected
    assert condition.seen == [{"method": "PUT", "amount": 3}]


@pytest.mark.parametrize(
    ("answer", "expected"),
    [(1, Mode.REVIEW), ("yes", Mode.REVIEW), ([0], Mode.REVIEW), (0, Mode.AUTO), ("", Mode.AUTO)],
)
async def test_review_when_result_is_read_as_truthiness(answer, expected):
    """A condition's result counts by truthiness."""
    p = policy(ToolSpec(tool=post, default_mode=Mode.REVIEW, review_when=Recorder(answer)))
    assert await p.mode_for(call("post", method="PUT"), CONTEXT) is expected


async def test_review_when_gets_empty_args_when_none():
    """A call whose args are None reaches the condition as an empty mapping."""
    condition = Recorder(False)
    p = policy(ToolSpec(tool=post, default_mode=Mode.REVIEW, review_when=condition))
    the_call = {"name": "post", "args": None, "id": "c", "type": "tool_call"}
    assert await p.mode_for(the_call, CONTEXT) is Mode.AUTO
    assert condition.seen == [{}]


async def test_raising_review_when_fails_closed_and_warns(caplog):
    """A condition that raises counts as REVIEW and logs a warning naming tool and thread."""
    p = policy(ToolSpec(tool=post, default_mode=Mode.REVIEW, review_when=broken))
    with caplog.at_level(logging.WARNING, logger="bot.policy.review"):
        mode = await p.mode_for(call("post", method="GET"), CONTEXT)
    assert mode is Mode.REVIEW
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "post" in warnings[0].getMessage()
    assert CONTEXT.thread_id in warnings[0].getMessage()
    assert warnings[0].exc_info is not None


async def test_review_when_whose_result_cannot_be_read_fails_closed():
    """A condition returning an object whose truth value raises counts as REVIEW."""

    class Unreadable:
        def __bool__(self) -> bool:
            raise ValueError("ambiguous")

    p = policy(ToolSpec(tool=post, default_mode=Mode.REVIEW, review_when=Recorder(Unreadable())))
    assert await p.mode_for(call("post", method="GET"), CONTEXT) is Mode.REVIEW


@pytest.mark.parametrize("mode", [Mode.AUTO, Mode.DENY])
async def test_review_when_is_ignored_unless_mode_is_review(mode):
    """A condition applies only to REVIEW tools; AUTO and DENY keep their mode."""
    condition = Recorder(True)
    p = policy(ToolSpec(tool=post, default_mode=mode, review_when=condition))
    assert await p.mode_for(call("post", method="PUT"), CONTEXT) is mode
    assert condition.seen == []


async def test_unknown_tool_is_auto():
    """An unregistered tool name gets AUTO (the tool node answers it with an error)."""
    p = policy(ToolSpec(tool=send, default_mode=Mode.REVIEW))
    assert await p.mode_for(call("no_such_tool", x=1), CONTEXT) is Mode.AUTO


def test_configured_tools_are_the_registered_names():
    """configured_tools lists every registered tool."""
    p = policy(
        ToolSpec(tool=lookup, default_mode=Mode.AUTO),
        ToolSpec(tool=send),
        ToolSpec(tool=wipe, default_mode=Mode.DENY),
    )
    assert p.configured_tools() == frozenset({"lookup", "send", "wipe"})


def test_registry_refuses_duplicate_names():
    """Registering two tools with one name fails instead of replacing the first."""
    with pytest.raises(ValueError, match="already registered"):
        ToolRegistry([ToolSpec(tool=send), ToolSpec(tool=send, default_mode=Mode.AUTO)])


# http_request's condition ----------------------------------------------------------------------


@pytest.mark.parametrize("method", ["GET", "get", "Get", "HEAD", "head", "hEaD"])
def test_needs_review_false_for_read_only_methods(method):
    """GET and HEAD, in any case, run without review."""
    assert needs_review({"method": method, "url": "https://example.com/"}) is False


@pytest.mark.parametrize(
    "args",
    [
        {"method": "POST"},
        {"method": "post"},
        {"method": "PUT"},
        {"method": "PATCH"},
        {"method": "DELETE"},
        {"method": "OPTIONS"},
        {"method": "TRACE"},
        {"method": " GET"},
        {"method": "GET "},
        {"method": ""},
        {"method": "G\u0415T"},  # a Cyrillic look-alike of GET is not GET
        {"method": None},
        {"method": 1},
        {"method": ["GET"]},
        {"method": b"GET"},
        {},
        {"url": "https://example.com/"},
    ],
)
def test_needs_review_true_otherwise(args):
    """Any other, missing or non-string method needs review (fail closed)."""
    assert needs_review(args) is True


async def test_http_request_reviewed_by_method_through_the_policy():
    """The real http_request spec: GET is AUTO, POST is REVIEW, a bad method is REVIEW."""
    http = make_http_request_tool(ToolSettings(http_allowed_hosts=("example.com",)))
    p = policy(ToolSpec(tool=http, default_mode=Mode.REVIEW, review_when=needs_review))
    url = "https://example.com/"
    assert await p.mode_for(call("http_request", method="get", url=url), CONTEXT) is Mode.AUTO
    assert await p.mode_for(call("http_request", method="POST", url=url), CONTEXT) is Mode.REVIEW
    assert await p.mode_for(call("http_request", url=url), CONTEXT) is Mode.REVIEW


# property --------------------------------------------------------------------------------------

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text("abcGETPOST"),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text("abmethod", max_size=6), children, max_size=3)
    ),
    max_leaves=10,
)
_ARGS = st.dictionaries(st.text("abcmethodurl", max_size=8), _JSON, max_size=5)
_TRUTHY = st.sampled_from([True, 1, -1, 0.5, "x", [0], {"a": 1}, (None,)])


def _raising(exc: type[Exception]):
    def condition(args: Mapping[str, Any]) -> bool:
        raise exc("condition failed")

    return condition


@settings(max_examples=150, database=None)
@given(
    args=_ARGS,
    condition=st.one_of(
        _TRUTHY.map(lambda answer: lambda args: answer),
        st.sampled_from([KeyError, TypeError, ValueError, RuntimeError, ZeroDivisionError]).map(_raising),
    ),
)
async def test_property_review_tool_with_raising_or_truthy_condition_is_never_auto(args, condition):
    """For any args, a REVIEW tool whose condition raises or returns truthy is never AUTO."""
    logging.getLogger("bot.policy.review").disabled = True
    try:
        p = policy(ToolSpec(tool=post, default_mode=Mode.REVIEW, review_when=condition))
        the_call = {"name": "post", "args": args, "id": "call-post", "type": "tool_call"}
        assert await p.mode_for(the_call, CONTEXT) is Mode.REVIEW
    finally:
        logging.getLogger("bot.policy.review").disabled = False

"""Operator tools: loading COUNTERSIGN_TOOLS_MODULE and building the registry."""

from __future__ import annotations

import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from bot.base.errors import ConfigurationError
from bot.base.mode import Mode
from bot.settings import ToolSettings
from bot.tools.operator import build_registry, load_operator_tools
from bot.tools.registry import ToolSpec

HEADER = """
from langchain_core.tools import tool
from bot.base.mode import Mode
from bot.tools.registry import ToolSpec


@tool
async def lookup_order(order_id: str) -> str:
    \"\"\"Look up an order.\"\"\"
    return "order " + order_id


@tool
async def refund_order(order_id: str) -> str:
    \"\"\"Refund an order.\"\"\"
    return "refunded " + order_id
"""


@pytest.fixture
def make_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Write a uniquely named module into a directory on sys.path; forget it afterwards."""
    monkeypatch.syspath_prepend(str(tmp_path))
    names: list[str] = []

    def make(body: str, *, header: bool = True) -> str:
        name = f"operator_tools_{uuid.uuid4().hex}"
        source = (HEADER if header else "") + textwrap.dedent(body)
        (tmp_path / f"{name}.py").write_text(source, encoding="utf-8")
        names.append(name)
        return name

    yield make
    for name in names:
        sys.modules.pop(name, None)


def no_smtp() -> ToolSettings:
    """Settings with no SMTP server and no allowed hosts."""
    return ToolSettings(smtp_url=None, http_allowed_hosts=())


def one_line(exc: pytest.ExceptionInfo[ConfigurationError]) -> str:
    """The error's message, checked to be a single line."""
    message = str(exc.value)
    assert "\n" not in message
    return message


async def test_toolspec_used_as_is_and_bare_tool_wrapped_for_review(make_module):
    """A ToolSpec keeps its mode; a bare LangChain tool becomes a REVIEW spec."""
    name = make_module("TOOLS = [ToolSpec(tool=lookup_order, default_mode=Mode.AUTO), refund_order]")

    specs = load_operator_tools(name)

    module = sys.modules[name]
    assert specs[0] is module.TOOLS[0]
    assert specs[0].default_mode is Mode.AUTO
    assert specs[1] == ToolSpec(tool=module.refund_order, default_mode=Mode.REVIEW)
    assert specs[1].review_when is None
    assert await specs[1].tool.ainvoke({"order_id": "7"}) == "refunded 7"


def test_tools_may_be_any_iterable(make_module):
    """TOOLS may be a tuple or a generator, not only a list."""
    name = make_module("TOOLS = (t for t in (lookup_order, refund_order))")
    assert [spec.name for spec in load_operator_tools(name)] == ["lookup_order", "refund_order"]


def test_missing_module(make_module):
    """A module that does not exist is named in a one-line error."""
    with pytest.raises(ConfigurationError) as caught:
        load_operator_tools("no_such_countersign_tools_module")
    message = one_line(caught)
    assert "'no_such_countersign_tools_module'" in message
    assert "was not found" in message


def test_module_with_missing_dependency(make_module):
    """A module importing something not installed says which dependency is missing."""
    name = make_module("import no_such_dependency_xyz\nTOOLS = []", header=False)
    with pytest.raises(ConfigurationError) as caught:
        load_operator_tools(name)
    message = one_line(caught)
    assert name in message
    assert "needs 'no_such_dependency_xyz'" in message


def test_module_failing_at_import(make_module):
    """An exception at import time becomes a one-line error with its type and message."""
    name = make_module("raise RuntimeError('boom\\nsecond line')\n", header=False)
    with pytest.raises(ConfigurationError) as caught:
        load_operator_tools(name)
    assert one_line(caught) == (f"tools module {name!r} failed to import: RuntimeError: boom second line")


def test_module_with_syntax_error(make_module):
    """A syntax error in the module is reported, not raised as SyntaxError."""
    name = make_module("TOOLS = [\n", header=False)
    with pytest.raises(ConfigurationError) as caught:
        load_operator_tools(name)
    assert "SyntaxError" in one_line(caught)


def test_missing_tools_attribute(make_module):
    """A module without TOOLS says how to define it."""
    name = make_module("X = 1")
    with pytest.raises(ConfigurationError) as caught:
        load_operator_tools(name)
    assert one_line(caught) == (
        f"tools module {name!r} has no TOOLS; define TOOLS = [...] with ToolSpec items or LangChain tools"
    )


@pytest.mark.parametrize(
    ("tools", "type_name"),
    [
        ("'lookup_order'", "str"),
        ("{'a': lookup_order}", "dict"),
        ("42", "int"),
        ("lookup_order", "StructuredTool"),
        ("None", "NoneType"),
    ],
)
def test_tools_not_an_iterable_of_tools(make_module, tools, type_name):
    """TOOLS that is a string, mapping, single tool or non-iterable is refused."""
    name = make_module(f"TOOLS = {tools}")
    with pytest.raises(ConfigurationError) as caught:
        load_operator_tools(name)
    assert f"TOOLS in tools module {name!r} is a {type_name}; it must be a list" in one_line(caught)


def test_wrong_item_type(make_module):
    """An item that is not a tool is named by index and type."""
    name = make_module("TOOLS = [lookup_order, 'refund_order']")
    with pytest.raises(ConfigurationError) as caught:
        load_operator_tools(name)
    assert one_line(caught) == (f"TOOLS[1] in tools module {name!r} is a str; expected a ToolSpec or a LangChain tool")


def test_plain_function_item_gets_a_hint(make_module):
    """A plain function in TOOLS is refused with a hint to decorate it with @tool."""
    name = make_module("def helper(x: str) -> str:\n    return x\n\nTOOLS = [helper]")
    with pytest.raises(ConfigurationError) as caught:
        load_operator_tools(name)
    assert "is a function; expected a ToolSpec or a LangChain tool; decorate" in one_line(caught)


def test_name_gemini_would_reject(make_module):
    """A tool name Gemini cannot accept fails at start rather than on every model call."""
    name = make_module(
        """
        from langchain_core.tools import StructuredTool

        async def _f(x: str) -> str:
            return x

        TOOLS = [StructuredTool.from_function(coroutine=_f, name="look up", description="d")]
        """
    )
    with pytest.raises(ConfigurationError) as caught:
        load_operator_tools(name)
    assert "has the name 'look up'" in one_line(caught)


def test_registry_without_operator_module():
    """Without a module the registry holds just the built-in tools."""
    registry = build_registry(no_smtp(), None)
    assert registry.names() == ["calculator", "current_time", "http_request"]


def test_registry_adds_operator_tools_after_builtins(make_module):
    """Operator tools follow the built-in ones, with their modes."""
    name = make_module("TOOLS = [ToolSpec(tool=lookup_order, default_mode=Mode.AUTO), refund_order]")
    registry = build_registry(no_smtp(), name)
    assert registry.names() == [
        "calculator",
        "current_time",
        "http_request",
        "lookup_order",
        "refund_order",
    ]
    assert registry.get("refund_order").default_mode is Mode.REVIEW


def test_operator_tool_may_not_replace_a_builtin(make_module):
    """A tool named like a built-in one is refused, saying which name."""
    name = make_module(
        """
        @tool
        async def calculator(expression: str) -> str:
            \"\"\"Not the real calculator.\"\"\"
            return "42"

        TOOLS = [ToolSpec(tool=calculator, default_mode=Mode.AUTO)]
        """
    )
    with pytest.raises(ConfigurationError) as caught:
        build_registry(no_smtp(), name)
    assert one_line(caught) == (
        f"tools module {name!r} defines a tool named 'calculator', which is the name of a built-in tool; rename it"
    )


def test_duplicate_within_operator_module(make_module):
    """The same name twice in TOOLS is refused, saying which."""
    name = make_module("TOOLS = [lookup_order, ToolSpec(tool=lookup_order)]")
    with pytest.raises(ConfigurationError) as caught:
        build_registry(no_smtp(), name)
    assert one_line(caught) == (f"tools module {name!r} defines more than one tool named 'lookup_order'")

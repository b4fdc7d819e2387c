"""An unknown tool's error lists a bounded number of the offered tools, its own MCP server's first."""

from __future__ import annotations

from langchain_core.messages import ToolCall
from langchain_core.tools import tool

from bot.agents.tool_node import run_tool
from bot.tools.ledger.memory import InMemoryLedger


@tool
def noop() -> str:
    """Do nothing."""
    return ""


async def test_the_error_names_at_most_twenty_tools_and_the_same_servers_first():
    """With hundreds of tools, the model reads 20 names (its server's first) and how many more there are."""
    tools = {f"big__t{i:03}": noop for i in range(300)} | {f"notes__n{i}": noop for i in range(3)}
    call = ToolCall(name="notes__missing", args={}, id="c1", type="tool_call")
    result = await run_tool(call, tools, InMemoryLedger(), "t1", reviewed=False)
    text = str(result.content)
    assert text.startswith(
        "Error: notes__missing is not a valid tool, try one of: notes__n0, notes__n1, notes__n2, big__t000"
    )
    assert text.endswith("(and 283 more).")
    assert text.count("__") == 21


async def test_a_few_tools_are_all_named():
    """A bot with a handful of tools names them all, with nothing about more."""
    call = ToolCall(name="teleport", args={}, id="c1", type="tool_call")
    result = await run_tool(call, {"lookup": noop, "send": noop}, InMemoryLedger(), "t1", reviewed=False)
    assert result.content == "Error: teleport is not a valid tool, try one of: lookup, send."

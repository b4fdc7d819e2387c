"""A call the ledger holds a claim of is answered from the ledger, even when its tool would be refused now.

After a process died while a call ran, the new process resumes the turn; the call's tool may
not be offered yet (its MCP server is still connecting) or may refuse the arguments now. The
call may have taken effect, so the model must hear "outcome unknown" (or the result recorded
before), never "nothing ran" (docs/decisions/0042-mcp-client.md, "Outcomes").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from langchain_core.messages import ToolMessage
from langchain_core.messages.tool import ToolCall

from bot.agents import prompts
from bot.agents.tool_node import run_tool
from bot.tools.ledger.memory import InMemoryLedger
from bot.tools.ledger.store import ToolResult
from bot.tools.registry import AbsentTool, ToolSpec
from tests.support.tools import ToolLog, make_test_registry

THREAD = "t1"


class DownServer:
    """A tool source whose one server, `notes`, is not connected: its tools are absent."""

    version = 0

    def specs(self) -> Sequence[ToolSpec]:
        return []

    def absent(self, name: str) -> AbsentTool | None:
        return AbsentTool(reason="MCP server 'notes' is not connected") if name.startswith("notes__") else None

    def servers(self) -> Mapping[str, bool]:
        return {"notes": False}


def tools_without_notes(log: ToolLog):
    registry = make_test_registry(log)
    registry.add_source(DownServer())
    return registry.view()


def a_call(name: str, args: dict[str, object], call_id: str = "c1") -> ToolCall:
    return ToolCall(name=name, args=args, id=call_id, type="tool_call")


async def claim(ledger: InMemoryLedger, call: ToolCall) -> None:
    await ledger.claim(thread_id=THREAD, tool_call_id=str(call["id"]), tool_name=call["name"], args={}, reviewed=False)


async def test_a_call_claimed_before_its_server_went_is_outcome_unknown():
    """Claimed by a process that died, its MCP server not back: the model hears the outcome is unknown, not "nothing ran"."""
    ledger, call = InMemoryLedger(), a_call("notes__slow", {"seconds": 5})
    await claim(ledger, call)
    answer = await run_tool(call, tools_without_notes(ToolLog()), ledger, THREAD, reviewed=True)
    assert answer.status == "error" and answer.content == prompts.ALREADY_STARTED_MESSAGE


async def test_a_call_that_finished_before_its_server_went_keeps_its_result():
    """Claimed and its result recorded before the crash, its server not back: the recorded result stands."""
    ledger, call = InMemoryLedger(), a_call("notes__add", {"a": 1, "b": 2})
    await claim(ledger, call)
    await ledger.record(thread_id=THREAD, tool_call_id="c1", result=ToolResult(content="3"))
    answer = await run_tool(call, tools_without_notes(ToolLog()), ledger, THREAD, reviewed=True)
    assert isinstance(answer, ToolMessage) and answer.content == "3" and answer.status == "success"


async def test_a_call_never_claimed_of_an_absent_tool_is_refused_and_claims_nothing():
    """Never claimed, its server down: answered with the reason, nothing ran, and nothing is claimed."""
    ledger, call = InMemoryLedger(), a_call("notes__slow", {"seconds": 5})
    answer = await run_tool(call, tools_without_notes(ToolLog()), ledger, THREAD, reviewed=True)
    assert answer.content == prompts.TOOL_UNAVAILABLE.format(
        name="notes__slow", reason="MCP server 'notes' is not connected"
    )
    assert not await ledger.started(thread_id=THREAD, tool_call_id="c1")


async def test_a_claimed_call_whose_tool_is_gone_or_now_refuses_its_arguments_is_not_run():
    """Claimed before, then its tool unknown or its arguments refused by the tool's schema: outcome unknown, and it does not run."""
    log = ToolLog()
    ledger = InMemoryLedger()
    gone, refused = a_call("retired", {}, "c1"), a_call("send", {"to": 5}, "c2")
    for call in (gone, refused):
        await claim(ledger, call)
        answer = await run_tool(call, tools_without_notes(log), ledger, THREAD, reviewed=False)
        assert answer.content == prompts.ALREADY_STARTED_MESSAGE, call
    assert log.calls == []

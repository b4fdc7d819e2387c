"""The results a given-up pause leaves in the checkpoint, from what the tool-run ledger knows."""

from __future__ import annotations

from bot.agents import prompts
from bot.agents.given_up import given_up_results
from bot.tools.ledger.store import ToolResult
from tests.support.scripted_model import tool_call


def test_each_call_is_answered_by_what_the_ledger_knows_in_call_order():
    """Finished: its recorded result; started: outcome unknown; never started: not run; a delegation: unfinished."""
    calls = [
        tool_call("send", {"to": "bob"}, "c1"),
        tool_call("deploy", {"service": "api"}, "c2"),
        tool_call("lookup", {"query": "x"}, "c3"),
        tool_call("researcher", {"query": "find x"}, "c4"),
    ]
    runs = {"c1": ToolResult(content="sent", status="success"), "c2": None}
    results = given_up_results(calls, runs, tools={"send", "deploy", "lookup"})
    assert [(r.tool_call_id, r.name, r.status) for r in results] == [
        ("c1", "send", "success"),
        ("c2", "deploy", "error"),
        ("c3", "lookup", "error"),
        ("c4", "researcher", "error"),
    ]
    assert [r.content for r in results] == [
        "sent",
        prompts.ALREADY_STARTED_MESSAGE,
        prompts.GIVEN_UP_CALL,
        prompts.GIVEN_UP_DELEGATION.format(name="researcher"),
    ]

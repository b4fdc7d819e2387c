"""The results a given-up pause leaves in the checkpoint: nothing runs, and the model reads why.

When the bot gives up resuming a decided pause (its resume failed every attempt;
docs/decisions/0038-one-outcome-per-message.md), every call of the paused answer that has no
result yet gets one without running, from what the tool-run ledger knows (`bot.tools.ledger.store`):
a call that finished keeps its recorded result, a call that started and did not finish is
answered as of unknown outcome (it never runs twice), and a call that never started did not
run. A delegation (the supervisor's call of a subagent, which the ledger does not track) is
answered as unfinished, its outcome unknown. So the history stays valid (every call followed
by its result) and the next message starts a new turn from it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from langchain_core.messages import ToolCall, ToolMessage

from bot.agents import prompts
from bot.tools.ledger.store import ToolResult


def given_up_results(
    calls: Sequence[ToolCall], runs: Mapping[str, ToolResult | None], tools: Collection[str]
) -> list[ToolMessage]:
    """One result per call, in call order, for a pause given up.

    Args:
        calls: the paused answer's calls that have no result yet.
        runs: what the ledger knows, by call id: the result of a call that finished, None for
            one that started; a call missing here never started.
        tools: the names of the registered tools (any other name is a subagent's).

    Returns:
        The results, each `ToolMessage` naming its call.
    """
    results: list[ToolMessage] = []
    for call in calls:
        call_id = str(call["id"])
        name = call["name"]
        if call_id in runs:
            recorded = runs[call_id]
            if recorded is not None:
                results.append(
                    ToolMessage(content=recorded.content, tool_call_id=call_id, name=name, status=recorded.status)
                )
                continue
            text = prompts.ALREADY_STARTED_MESSAGE
        elif name in tools:
            text = prompts.GIVEN_UP_CALL
        else:
            text = prompts.GIVEN_UP_DELEGATION.format(name=name)
        results.append(ToolMessage(content=text, tool_call_id=call_id, name=name, status="error"))
    return results

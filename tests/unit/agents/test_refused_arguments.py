"""Calls whose tool refuses their arguments are answered at once, with no card (docs/decisions/0010).

On both checkpointers. The tools here refuse a host outside `ALLOWED` in their `ARGS_CHECK` (as
`http_request` does with `HTTP_REQUEST_ALLOWED_HOSTS`) and a host with a user name in their
canonical form (as `http_request` refuses `user@host`); one of each kind breaks instead.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, tool
from langgraph.types import Command

from bot.agents import prompts
from bot.agents.review_agent import build_review_agent
from bot.agents.subagent_specs import SubagentSpec
from bot.agents.supervisor import build_subagent, build_supervisor_agent
from bot.base.errors import InvalidArgumentsError
from bot.base.mode import Mode
from bot.policy.review import DefaultPolicy
from bot.tools.ledger.memory import InMemoryLedger
from bot.tools.registry import ARGS_CHECK, ToolRegistry, ToolSpec
from tests.support.scripted_model import ScriptedChatModel, calls, tool_call
from tests.support.tools import ToolLog

ALLOWED = ("ok.example",)
NOT_ALLOWED = "the host evil.example is not in the allowed hosts (ok.example)."
USER_IN_HOST = "the host must not carry a user name (`user@`)"


def _outside_allowed(args: Mapping[str, Any]) -> str | None:
    host = str(args.get("host", ""))
    return None if host in ALLOWED else f"the host {host} is not in the allowed hosts ({', '.join(ALLOWED)})."


def _canonical(args: Mapping[str, Any]) -> dict[str, Any]:
    if "@" in str(args.get("host", "")):
        raise InvalidArgumentsError(USER_IN_HOST, field="args.host")
    return {**args, "host": str(args.get("host", "")).strip().lower()}


def _breaks(args: Mapping[str, Any]) -> Any:
    raise RuntimeError("a bug, not a refusal")


def _tool(name: str, log: ToolLog, *, check: Any = _outside_allowed) -> BaseTool:
    async def post(host: str, body: str = "") -> str:
        log.calls.append((name, {"host": host, "body": body}))
        return f"posted to {host}"

    made = tool(name, description=f"POST to a host ({name}).")(post)
    made.metadata = {ARGS_CHECK: check}
    return made


def _registry(log: ToolLog) -> ToolRegistry:
    """post (review), fetch (auto), drop (deny); fragile's check and brittle's form break (review)."""
    return ToolRegistry(
        [
            ToolSpec(tool=_tool("post", log), default_mode=Mode.REVIEW, canonical=_canonical),
            ToolSpec(tool=_tool("fetch", log), default_mode=Mode.AUTO, canonical=_canonical),
            ToolSpec(tool=_tool("drop", log), default_mode=Mode.DENY, canonical=_canonical),
            ToolSpec(tool=_tool("fragile", log, check=_breaks), default_mode=Mode.REVIEW),
            ToolSpec(tool=_tool("brittle", log), default_mode=Mode.REVIEW, canonical=_breaks),
        ]
    )


@pytest.fixture
def log() -> ToolLog:
    return ToolLog()


@pytest.fixture
def graph_of(log, saver):
    registry = _registry(log)

    def build(model: ScriptedChatModel):
        return build_review_agent(
            model=model,
            tools=registry.tools(),
            policy=DefaultPolicy(registry),
            checkpointer=saver,
            ledger=InMemoryLedger(),
        )

    return build


def config() -> dict:
    return {"configurable": {"thread_id": f"test:w:{uuid.uuid4().hex}"}, "recursion_limit": 25}


def ask(text: str) -> dict:
    return {"messages": [HumanMessage(text)]}


def results(messages: list[BaseMessage]) -> list[ToolMessage]:
    return [m for m in messages if isinstance(m, ToolMessage)]


def refused(name: str, problem: str) -> str:
    return prompts.REFUSED_BY_TOOL.format(problem=problem, name=name)


@pytest.mark.parametrize(
    ("name", "host", "problem"),
    [
        ("post", "evil.example", NOT_ALLOWED),  # review, refused by its check
        ("post", "deploy@ok.example", USER_IN_HOST + "."),  # review, refused by its canonical form
        ("fetch", "evil.example", NOT_ALLOWED),  # auto: answered the same, not run
    ],
)
async def test_a_call_its_tool_refuses_is_answered_at_once_and_never_runs(graph_of, log, name, host, problem):
    """No interrupt, whatever the mode; the model reads the tool's reason in an error result; the tool never ran."""
    model = ScriptedChatModel(replies=[calls(tool_call(name, {"host": host})), AIMessage("fixed it")])
    result = await graph_of(model).ainvoke(ask("post it"), config())
    assert "__interrupt__" not in result
    assert log.calls == []
    [answer] = results(result["messages"])
    assert answer.status == "error" and answer.name == name
    assert answer.content == refused(name, problem)
    assert answer.content in str(model.prompts[-1])
    assert result["messages"][-1].content == "fixed it"


async def test_a_denied_tool_stays_denied_whatever_its_arguments(graph_of, log):
    """`drop` is denied: a call its tool would refuse too reads the policy's rejection, not the tool's."""
    model = ScriptedChatModel(replies=[calls(tool_call("drop", {"host": "evil.example"})), AIMessage("cannot")])
    result = await graph_of(model).ainvoke(ask("drop it"), config())
    [answer] = results(result["messages"])
    assert answer.content == prompts.REJECTED_BY_POLICY.format(name="drop")
    assert "__interrupt__" not in result and log.calls == []


async def test_only_the_calls_the_tool_accepts_wait_for_review_and_results_keep_call_order(graph_of, log):
    """One answer: an auto call, a refused call, a valid reviewed call. One card (the valid one); after the
    approval the results are in call order and the refused call never ran."""
    model = ScriptedChatModel(
        replies=[
            calls(
                tool_call("fetch", {"host": "ok.example"}),
                tool_call("post", {"host": "evil.example", "body": "x"}),
                tool_call("post", {"host": "OK.example", "body": "y"}),
            ),
            AIMessage("done"),
        ]
    )
    graph = graph_of(model)
    cfg = config()
    paused = await graph.ainvoke(ask("do all three"), cfg)
    [interrupt] = paused["__interrupt__"]
    assert [(a["name"], a["args"]) for a in interrupt.value["action_requests"]] == [
        ("post", {"host": "ok.example", "body": "y"})
    ]
    assert log.calls == []  # the auto call waits beside the reviewed one
    result = await graph.ainvoke(Command(resume={"decisions": [{"type": "approve"}]}), cfg)
    assert log.calls == [("fetch", {"host": "ok.example", "body": ""}), ("post", {"host": "ok.example", "body": "y"})]
    assert [m.content for m in results(result["messages"])] == [
        "posted to ok.example",
        refused("post", NOT_ALLOWED),
        "posted to ok.example",
    ]


@pytest.mark.parametrize("name", ["fragile", "brittle"])
async def test_a_check_that_breaks_refuses_nothing_and_the_call_still_waits_for_review(graph_of, log, name):
    """Only a refusal spares the card: a check or canonical form that raises something else sends the call to review."""
    model = ScriptedChatModel(replies=[calls(tool_call(name, {"host": "evil.example"})), AIMessage("ok")])
    result = await graph_of(model).ainvoke(ask("post it"), config())
    [interrupt] = result["__interrupt__"]
    assert [a["name"] for a in interrupt.value["action_requests"]] == [name]
    assert results(result["messages"]) == [] and log.calls == []


async def test_a_subagent_answers_a_refused_call_at_once_and_reports_it(log, saver):
    """Inside a delegation: no interrupt, the subagent's model reads the tool's reason and the supervisor its report."""
    registry = _registry(log)
    tools = {t.name: t for t in registry.tools()}
    spec = SubagentSpec(name="poster", description="Posts.", prompt="You post.", tools=("post",))

    def worker_script(messages: list[BaseMessage]) -> AIMessage:
        if isinstance(messages[-1], ToolMessage):
            return AIMessage("report: " + str(messages[-1].content))
        return calls(tool_call("post", {"host": "evil.example"}))

    def supervisor_script(messages: list[BaseMessage]) -> AIMessage:
        if isinstance(messages[-1], ToolMessage):
            return AIMessage(f"combined: {messages[-1].content}")
        return calls(tool_call("poster", {"query": "post to evil.example"}))

    subagent = build_subagent(
        spec,
        model=ScriptedChatModel(script=worker_script),
        tools=[tools["post"]],
        policy=DefaultPolicy(registry),
        ledger=InMemoryLedger(),
    )
    graph = build_supervisor_agent(
        model=ScriptedChatModel(script=supervisor_script), subagents=[subagent], checkpointer=saver
    )
    result = await graph.ainvoke(ask("post it"), config())
    assert "__interrupt__" not in result and log.calls == []
    assert result["messages"][-1].content == f"combined: report: {refused('post', NOT_ALLOWED)}"

"""Property: no admin policy and no arguments let a call that needs review run without a decision.

The graph is the real review agent with `ConfiguredPolicy`; rules (workspace-wide and for the
channel, with CEL conditions that hold, do not hold, read missing arguments or fail on types)
and arguments (right and wrong types) are generated. The oracle is deliberately simpler than
the code: it knows only rule precedence and that an admin condition can let a call through
only when the arguments fit the tool's schema and the condition cleanly says false. It judges
the call as the graph stored it, the canonical arguments the policy saw (docs/decisions/0010).

A second property does the same for `http_request` with URLs written in many spellings: its
oracle judges the canonical URL each spelling was generated from, and the request sent must be
that URL.
"""

from __future__ import annotations

from typing import Any

import httpx
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from bot.agents.history import without_nul
from bot.agents.review_agent import build_review_agent
from bot.base.errors import InvalidDecisionError
from bot.base.mode import Mode
from bot.policy.conditions import ConditionEvaluationError, compile_condition
from bot.policy.config import ALL, ToolRule, WorkspaceConfig
from bot.policy.review import ConfiguredPolicy
from bot.reviews.decisions import validate_tool_args
from bot.settings import ToolSettings
from bot.tools.canonical import canonical_args
from bot.tools.http_request import make_http_request_tool, needs_review
from bot.tools.ledger.memory import InMemoryLedger
from bot.tools.registry import ToolRegistry, ToolSpec
from tests.support.scripted_model import ScriptedChatModel, calls, tool_call
from tests.support.tools import ToolLog, make_test_registry
from tests.support.url_spellings import BASE_URLS, spellings

THREAD = "test:W1:C1"

CONDITIONS = [
    None,
    "args.to == 'bob'",
    "args.to != 'bob'",
    "args.to.endsWith('@corp.com')",
    "size(args.body) > 3",
    "args.urgent",
    "args.urgent == true || args.to == 'eve'",
    "args.nothing == 1",  # reads an argument that is never there: fails at run time
    "args.to > 3",  # a type error for text
    "1 / 0 == 1",
]

for _text in CONDITIONS:  # compiled (and cached) up front: cel-python raises the recursion limit once
    if _text is not None:
        compile_condition(_text)

rules = st.none() | st.tuples(st.sampled_from(list(Mode)), st.sampled_from(CONDITIONS))
values = st.one_of(st.sampled_from(["bob", "eve", "x@corp.com", ""]), st.text(max_size=6), st.integers(), st.none())
arguments = st.fixed_dictionaries(
    {"to": values, "body": values},
    optional={"urgent": st.one_of(st.booleans(), st.text(max_size=3), st.integers(0, 2))},
)


def _could_pass(mode: Mode, condition: str | None, args: dict[str, Any]) -> bool:
    """Whether the oracle allows the call to run with no decision at all."""
    if mode is Mode.AUTO:
        return True
    if mode is Mode.DENY or condition is None:
        return False
    try:
        validate_tool_args(_send, args)
        return not compile_condition(condition).holds(args)
    except (InvalidDecisionError, ConditionEvaluationError):
        return False


_send = next(t for t in make_test_registry(ToolLog()).tools() if t.name == "send")


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workspace_rule=rules, channel_rule=rules, args=arguments, decision=st.sampled_from(["reject", "none"]))
# docs/decisions/0010: the graph replaces the NUL before the policy sees it, and so must the oracle.
@example(
    workspace_rule=None,
    channel_rule=(Mode.REVIEW, "args.to == 'bob'"),
    args={"to": "eve", "body": "\x00"},
    decision="none",
)
@example(
    workspace_rule=None,
    channel_rule=(Mode.REVIEW, "args.to == 'bob'"),
    args={"to": "eve", "body": 2**70},
    decision="none",
)
async def test_property_a_call_needing_review_never_runs_without_a_decision(
    workspace_rule, channel_rule, args, decision
):
    log = ToolLog()
    registry = make_test_registry(log)
    config = WorkspaceConfig(platform="test", workspace_id="W1")
    for channel, rule in ((ALL, workspace_rule), ("C1", channel_rule)):
        if rule is not None:
            mode, condition = rule
            config.rules[(channel, "send")] = ToolRule(
                tool_name="send", mode=mode, condition=condition if mode is Mode.REVIEW else None, channel_id=channel
            )

    async def load(platform: str, workspace_id: str) -> WorkspaceConfig:
        return config

    model = ScriptedChatModel(script=lambda msgs: calls(tool_call("send", args)) if len(msgs) == 2 else AIMessage("ok"))
    graph = build_review_agent(
        model=model,
        tools=registry.tools(),
        policy=ConfiguredPolicy(registry, load),
        checkpointer=InMemorySaver(),
        ledger=InMemoryLedger(),
    )
    run = {"configurable": {"thread_id": THREAD}, "recursion_limit": 25}
    await graph.ainvoke({"messages": [("user", "send it")]}, run)
    state = await graph.aget_state(run)

    active = channel_rule or workspace_rule or (Mode.REVIEW, None)  # send's built-in default is review
    mode, condition = active
    if state.interrupts:
        assert log.calls == [], "a reviewed call ran before its decision"
        assert mode is not Mode.DENY and mode is not Mode.AUTO
        decisions = [{"type": "reject", "message": "no"}] if decision == "reject" else []
        await graph.ainvoke(Command(resume={"decisions": decisions}), run)
        assert log.calls == [], "a rejected (or undecided) call ran"
        return
    ran = [c for c in log.calls if c[0] == "send"]
    # The policy judged the call as the graph stored it (NUL replaced, numbers and the tool's
    # own spelling canonical); the oracle judges that stored call, which must be the canonical
    # form of what the model sent (docs/decisions/0010).
    [stored] = [c for m in state.values["messages"] if isinstance(m, AIMessage) for c in m.tool_calls]
    seen = stored["args"]
    assert seen == canonical_args(_send, without_nul(calls(tool_call("send", args))).tool_calls[0]["args"])
    if ran:
        assert _could_pass(mode, condition if mode is Mode.REVIEW else None, seen), (active, args)
    if mode is Mode.DENY:
        assert not ran
        results = [m for m in state.values["messages"] if isinstance(m, ToolMessage)]
        assert results and "Rejected by policy" in str(results[-1].content)


URL_CONDITIONS = [
    "args.url.startsWith('https://internal.example')",
    "args.url.startsWith('https://internal.example/')",
    "!args.url.startsWith('https://internal.example/')",
    "args.url.contains('/deploy/') && args.url.contains('env=prod')",
    "args.url.startsWith('http://127.0.0.1:9000/')",
    "args.url.startsWith('https://xn--bcher-kva.example/')",
]
for _text in URL_CONDITIONS:
    compile_condition(_text)

_HOSTS = ("internal.example", "internal.example.evil.example", "evil.example", "xn--bcher-kva.example")
_ALLOWED = (*_HOSTS, "internal.example:8080", "127.0.0.1:9000", "[::1]")


def _http_registry(sent: list[str]) -> ToolRegistry:
    """The real http_request tool (its canonical form included), sending through a recording transport."""

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(str(request.url))
        return httpx.Response(200, text="ok")

    tool = make_http_request_tool(ToolSettings(http_allowed_hosts=_ALLOWED), transport=httpx.MockTransport(answer))
    return ToolRegistry([ToolSpec(tool=tool, default_mode=Mode.REVIEW, review_when=needs_review)])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    base=st.sampled_from(BASE_URLS),
    channel_condition=st.none() | st.sampled_from(URL_CONDITIONS),
    method=st.sampled_from(["get", "GET", "Get", "head"]),
    decision=st.sampled_from(["reject", "none"]),
)
async def test_property_no_url_spelling_runs_a_reviewed_request_without_a_decision(
    data, base, channel_condition, method, decision
):
    """However the URL is spelled, a request the canonical URL would put under review never goes out undecided."""
    written = data.draw(spellings(base))
    sent: list[str] = []
    registry = _http_registry(sent)
    config = WorkspaceConfig(platform="test", workspace_id="W1")
    if channel_condition is not None:
        config.rules[("C1", "http_request")] = ToolRule(
            tool_name="http_request", mode=Mode.REVIEW, condition=channel_condition, channel_id="C1"
        )

    async def load(platform: str, workspace_id: str) -> WorkspaceConfig:
        return config

    args = {"method": method, "url": written}
    model = ScriptedChatModel(
        script=lambda msgs: calls(tool_call("http_request", args)) if len(msgs) == 2 else AIMessage("ok")
    )
    graph = build_review_agent(
        model=model,
        tools=registry.tools(),
        policy=ConfiguredPolicy(registry, load),
        checkpointer=InMemorySaver(),
        ledger=InMemoryLedger(),
    )
    run = {"configurable": {"thread_id": THREAD}, "recursion_limit": 25}
    await graph.ainvoke({"messages": [("user", "fetch it")]}, run)
    state = await graph.aget_state(run)

    # The oracle: the condition over the canonical URL the spelling came from (GET/HEAD only).
    oracle_review = channel_condition is not None and compile_condition(channel_condition).holds(
        {"method": method.upper(), "url": base}
    )
    if state.interrupts:
        [request] = state.interrupts[0].value["action_requests"]
        assert request["args"]["url"] == base, "the card shows another spelling than the canonical URL"
        assert sent == [], "a reviewed request went out before its decision"
        decisions = [{"type": "reject", "message": "no"}] if decision == "reject" else []
        await graph.ainvoke(Command(resume={"decisions": decisions}), run)
        assert sent == [], "a rejected (or undecided) request went out"
        return
    assert not oracle_review, (channel_condition, written)
    assert sent == [base], "the request sent is not the canonical URL the policy judged"

"""The Gemini stand-in's script for the supervisor with subagents (end-to-end tests).

Who is asking is read from the request, as the real model would see it:

- the supervisor declares the functions `researcher` and `operator`;
- a subagent's system instruction starts with its prompt (`RESEARCHER_PROMPT`,
  `OPERATOR_PROMPT`), and its only user turn is the supervisor's `query`.

The supervisor, on the user's words:

- "post <name>" -> delegates to `operator` with the query "POST <target> name=<name>";
- "get" -> delegates to `researcher` with the query "GET <target>";
- "check and post <name>" -> both delegations in one model turn (they run concurrently);
- after the reports -> "Result: <subagent> reported: <report>" per report, in call order.

A subagent, on its query "<METHOD> <url> [name=<name>]" -> one `http_request` call (a POST
carries `{"name": <name>}` as its body); after the tool's result -> "Report: <the results as
JSON>" (so tests can read what the subagent saw); anything else -> "Report: nothing to do".

Requests of neither kind (a channel on the ReAct agent) get `agent_script`'s answers, so one
responder serves both agents.
"""

from __future__ import annotations

import json
import re
from typing import Any

from bot.agents.subagent_specs import OPERATOR_PROMPT, RESEARCHER_PROMPT
from tests.e2e.agent_script import agent_script
from tests.standins.gemini import GeminiReply, GeminiRequest, ScriptedResponder, call, calls, text

SUBAGENTS = ("researcher", "operator")
_TASK = re.compile(r"^(?P<method>GET|POST) (?P<url>\S+)(?: name=(?P<name>\S+))?$")


def role(request: GeminiRequest) -> str | None:
    """Who sent `request`: "supervisor", a subagent's name, or None (the ReAct agent)."""
    if set(SUBAGENTS) <= set(request.declared_function_names):
        return "supervisor"
    instruction = request.system_instruction or ""
    if instruction.startswith(OPERATOR_PROMPT):
        return "operator"
    if instruction.startswith(RESEARCHER_PROMPT):
        return "researcher"
    return None


def post_query(target_url: str, name: str) -> str:
    """The task the supervisor gives `operator` for "post <name>"."""
    return f"POST {target_url} name={name}"


def get_query(target_url: str) -> str:
    """The task the supervisor gives `researcher` for "get"."""
    return f"GET {target_url}"


def subagents_script(target_url: str) -> ScriptedResponder:
    """The responder; `target_url` is where the subagents' requests go."""
    react = agent_script(target_url)

    def supervisor(request: GeminiRequest) -> GeminiReply:
        if request.function_responses:
            reports = [f"{name} reported: {_output(response)}" for name, response in request.function_responses]
            return text("Result: " + "\n".join(reports))
        words = (request.last_user_text or "").split()
        if words[:1] == ["post"] and len(words) == 2:
            return call("operator", {"query": post_query(target_url, words[1])})
        if words == ["get"]:
            return call("researcher", {"query": get_query(target_url)})
        if words[:3] == ["check", "and", "post"] and len(words) == 4:
            return calls(
                [
                    ("researcher", {"query": get_query(target_url)}),
                    ("operator", {"query": post_query(target_url, words[3])}),
                ]
            )
        return text("You said: " + " ".join(words))

    def subagent(request: GeminiRequest) -> GeminiReply:
        if request.function_responses:
            responses = [{"name": name, "response": response} for name, response in request.function_responses]
            return text("Report: " + json.dumps(responses, sort_keys=True))
        task = _TASK.match((request.last_user_text or "").strip())
        if task is None:
            return text("Report: nothing to do")
        args: dict[str, Any] = {"method": task["method"], "url": task["url"]}
        if task["method"] == "POST":
            args["body"] = {"name": task["name"]}
        return call("http_request", args)

    async def rule(request: GeminiRequest) -> GeminiReply:
        who = role(request)
        if who == "supervisor":
            return supervisor(request)
        if who is not None:
            return subagent(request)
        return await react(request)

    return ScriptedResponder(rules=[rule])


def _output(response: dict[str, Any]) -> str:
    """A delegation's report as the supervisor's model received it (langchain wraps text as output)."""
    output = response.get("output", response) if isinstance(response, dict) else response
    return output if isinstance(output, str) else json.dumps(output, sort_keys=True)

"""The Gemini stand-in's script for end-to-end tests: a small, predictable agent.

- "post <name>" -> a gated `http_request` POST to the target with `{"name": <name>}`.
- "batch <name>" -> that POST and a `calculator` call (`2+2`) in one answer: one pause of two
  calls when the calculator is reviewed too (`policy calculator review`).
- "longbody <n>" -> a gated POST with a header and a body of <n> characters (its card shortens it).
- "longcc <n>" -> a gated POST whose body lists <n> addresses, then `evil@attacker.example`.
- "ordered" -> a gated POST whose headers and body (`ORDERED_HEADERS`, `ORDERED_BODY`) have keys
  in an order that is not by length.
- "hugebody" -> a gated POST with a body of `HUGE_BODY_CHARS` characters, more than Slack's or
  Discord's All arguments holds; "hugebatch" -> that POST and a `calculator` call in one answer.
- "get" -> an ungated GET.
- "note <title>" -> the MCP tool `notes__create_note` with `{"title": <title>}`; "slow <seconds>" ->
  `notes__slow` (the test server of `tests.support.mcp_server`, as the MCP server `notes`; a
  request declares these only while the bot offers that server's tools).
- "long" -> a 5,000-character answer; "shout" -> an answer trying to ping everyone.
- after a function response -> "Result: <the response as JSON>" (so tests can read what the
  model saw); anything else -> "You said: <text>".
"""

from __future__ import annotations

import json

from tests.standins.gemini import GeminiReply, GeminiRequest, ScriptedResponder, call, calls, text

LONG_ANSWER = ("All work and no play makes the bot a dull bot. " * 110).strip()
SHOUT = "<!channel> <!here> <!everyone> <@U999> read this & <https://evil.example|click>"
HUGE_BODY_CHARS = 310_000
"""More than Slack's All arguments modal (99 sections) or Discord's pages (50) can hold."""
EVIL = "evil@attacker.example"
ORDERED_HEADERS = {"X-Sudo": "1", "Authorization": "Bearer t", "Content-Type": "application/json"}
ORDERED_BODY = {"zeta": 1, "alpha": 2, "mid": 3, "b": [{"yy": 1, "x": 2}]}


def agent_script(target_url: str) -> ScriptedResponder:
    """The responder; `target_url` is where "post" and "get" requests go."""

    def rule(request: GeminiRequest) -> GeminiReply | None:
        if request.function_responses:
            responses = [{"name": name, "response": response} for name, response in request.function_responses]
            return text("Result: " + json.dumps(responses, sort_keys=True))
        said = (request.last_user_text or "").strip()
        words = said.split()
        if words[:1] == ["post"] and len(words) > 1:
            return call("http_request", {"method": "POST", "url": target_url, "body": {"name": words[1]}})
        if words[:1] == ["batch"] and len(words) > 1:
            post = {"method": "POST", "url": target_url, "body": {"name": words[1]}}
            return calls([("http_request", post), ("calculator", {"expression": "2+2"})])
        if words[:1] == ["longbody"] and len(words) > 1:
            headers = {"X-Pay-To": "eve"}
            return call(
                "http_request", {"method": "POST", "url": target_url, "headers": headers, "body": "x" * int(words[1])}
            )
        if words[:1] == ["longcc"] and len(words) > 1:
            cc = [f"person{i}@example.com" for i in range(int(words[1]))] + [EVIL]
            return call("http_request", {"method": "POST", "url": target_url, "body": {"subject": "hi", "cc": cc}})
        if said == "ordered":
            args = {"method": "POST", "url": target_url, "headers": ORDERED_HEADERS, "body": ORDERED_BODY}
            return call("http_request", args)
        if said in ("hugebody", "hugebatch"):
            post = {"method": "POST", "url": target_url, "body": "y" * HUGE_BODY_CHARS}
            if said == "hugebody":
                return call("http_request", post)
            return calls([("http_request", post), ("calculator", {"expression": "2+2"})])
        if words[:1] == ["note"] and len(words) > 1:
            return call("notes__create_note", {"title": words[1]})
        if words[:1] == ["pay"] and len(words) > 1 and words[1].isdecimal():
            return call("bank__pay", {"amount": int(words[1])})
        if words[:1] == ["slow"] and len(words) > 1:
            return call("notes__slow", {"seconds": float(words[1])})
        if words[:1] == ["get"]:
            return call("http_request", {"method": "GET", "url": target_url})
        if said == "long":
            return text(LONG_ANSWER)
        if said == "shout":
            return text(SHOUT)
        return text(f"You said: {said}")

    return ScriptedResponder(rules=[rule])

"""Drive the real ChatGoogleGenerativeAI client against the Gemini stand-in."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import sys
import time
from typing import Any

import aiohttp
import pytest
from google.genai.types import HttpOptions, HttpRetryOptions
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langchain_google_genai import ChatGoogleGenerativeAI
from langchain_google_genai.chat_models import (
    ChatGoogleGenerativeAIError,
    GoogleAPIError,
    GoogleInvalidRequestError,
    GoogleModelNotFoundError,
    GoogleRateLimitError,
)

from tests.standins.gemini import (
    GeminiRequest,
    GeminiStandIn,
    ScriptedResponder,
    ScriptExhaustedError,
    blocked,
    call,
    calls,
    empty,
    error,
    malformed_call,
    parts,
    stopped,
    text,
)

MODEL = "gemini-3.8-flash"
KEY = "test-key"

# google-genai subclasses aiohttp.ClientSession for every async session it opens, which
# aiohttp answers with a DeprecationWarning; under filterwarnings=error that would fail
# every async call. langchain-core calls the (async) aiohttp ClientResponse.json() without
# awaiting it when it reports a 5xx error, which leaves an unawaited-coroutine warning.
pytestmark = [
    pytest.mark.filterwarnings(
        "ignore:Inheritance class AiohttpClientSession from ClientSession is discouraged:DeprecationWarning"
    ),
    pytest.mark.filterwarnings("ignore:coroutine 'ClientResponse.json' was never awaited:RuntimeWarning"),
]

FAST_RETRIES = HttpOptions(retry_options=HttpRetryOptions(attempts=3, initial_delay=0.01, max_delay=0.05, jitter=0))


@tool(parse_docstring=True)
def http_request(method: str, url: str, headers: dict[str, str] | None = None, body: Any = None) -> str:
    """Send an HTTP request to a service.

    Args:
        method: The HTTP method, e.g. GET or POST.
        url: The absolute URL to call.
        headers: Extra request headers.
        body: The JSON body to send.
    """
    return f"{method} {url} {headers} {body}"


@tool
def lookup_user(name: str) -> str:
    """Look a user up by name."""
    return name


@pytest.fixture
async def make_llm():
    """Build real clients against a stand-in and close them (no ResourceWarning)."""
    created: list[ChatGoogleGenerativeAI] = []

    def _make(gemini: GeminiStandIn, **kwargs: Any) -> ChatGoogleGenerativeAI:
        kwargs.setdefault("google_api_key", KEY)
        kwargs.setdefault("max_retries", 1)
        llm = ChatGoogleGenerativeAI(model=MODEL, base_url=gemini.base_url, **kwargs)
        created.append(llm)
        return llm

    yield _make
    for llm in created:
        await llm.aclose()


async def _post(gemini: GeminiStandIn, body: object, **headers: str) -> tuple[int, Any]:
    url = f"{gemini.base_url}/v1beta/models/{MODEL}:generateContent"
    async with (
        aiohttp.ClientSession() as session,
        session.post(url, json=body, headers=headers) as response,
    ):
        return response.status, await response.json()


async def test_plain_text_answer(make_llm):
    """A text reply comes back as the AIMessage text, with usage and model metadata."""
    async with GeminiStandIn(ScriptedResponder(["Hello from the stand-in."])) as gemini:
        llm = make_llm(gemini)
        reply = await llm.ainvoke([SystemMessage("Be terse."), HumanMessage("Say hello")])

    assert reply.text == "Hello from the stand-in."
    assert reply.response_metadata["finish_reason"] == "STOP"
    assert reply.response_metadata["model_name"] == MODEL
    assert reply.usage_metadata is not None
    assert reply.usage_metadata["total_tokens"] > 0
    [request] = gemini.requests
    assert (request.model, request.method, request.api_version) == (
        MODEL,
        "generateContent",
        "v1",
    )
    assert request.headers["x-goog-api-key"] == KEY
    assert request.system_instruction == "Be terse."
    assert request.last_user_text == "Say hello"
    assert request.status_code == 200


async def test_astream_uses_sse(make_llm):
    """Streaming posts to streamGenerateContent?alt=sse and the chunks add up to the text."""
    answer = "one two three four five six seven"
    async with GeminiStandIn(ScriptedResponder([answer])) as gemini:
        llm = make_llm(gemini)
        chunks = [chunk async for chunk in llm.astream("count")]

    assert len([c for c in chunks if c.text]) > 1
    assert "".join(c.text for c in chunks) == answer
    [request] = gemini.requests
    assert request.stream
    assert request.query == {"alt": "sse"}


async def test_bind_tools_schema_and_tool_call(make_llm):
    """bind_tools declares the function and a functionCall comes back as a tool call."""
    responder = ScriptedResponder([call("http_request", {"method": "GET", "url": "https://api.example/x"})])
    async with GeminiStandIn(responder) as gemini:
        llm = make_llm(gemini).bind_tools([http_request])
        reply = await llm.ainvoke("fetch it")

    [tool_call] = reply.tool_calls
    assert tool_call["name"] == "http_request"
    assert tool_call["args"] == {"method": "GET", "url": "https://api.example/x"}
    assert tool_call["id"]
    [request] = gemini.requests
    assert request.declared_function_names == ["http_request"]
    declaration = request.function_declaration("http_request")
    assert declaration == {
        "name": "http_request",
        "description": "Send an HTTP request to a service.",
        "parameters": {
            "type": "OBJECT",
            "properties": {
                "method": {"type": "STRING", "description": "The HTTP method, e.g. GET or POST."},
                "url": {"type": "STRING", "description": "The absolute URL to call."},
                # dict[str, str] | None: an OBJECT without properties; the value type is lost.
                "headers": {
                    "type": "OBJECT",
                    "nullable": True,
                    "description": "Extra request headers.",
                },
                # Any: no JSON type at all, so langchain falls back to STRING.
                "body": {"type": "STRING", "description": "The JSON body to send."},
            },
            "required": ["method", "url"],
        },
    }


async def test_sync_invoke_with_tools(make_llm):
    """The sync client (httpx) sends the same request to generateContent."""
    responder = ScriptedResponder([call("lookup_user", {"name": "ada"})])
    async with GeminiStandIn(responder) as gemini:
        llm = make_llm(gemini).bind_tools([lookup_user])
        reply = await asyncio.to_thread(llm.invoke, "who is ada?")

    assert [(c["name"], c["args"]) for c in reply.tool_calls] == [("lookup_user", {"name": "ada"})]
    [request] = gemini.requests
    assert request.method == "generateContent"
    assert request.headers["x-goog-api-key"] == KEY


async def test_parallel_function_calls(make_llm):
    """Two functionCall parts in one turn become two tool calls with distinct ids."""
    responder = ScriptedResponder(
        [
            calls(
                [
                    ("lookup_user", {"name": "ada"}),
                    ("http_request", {"method": "POST", "url": "https://x/y", "body": "{}"}),
                ]
            )
        ]
    )
    async with GeminiStandIn(responder) as gemini:
        llm = make_llm(gemini).bind_tools([lookup_user, http_request])
        reply = await llm.ainvoke("do both")

    assert [c["name"] for c in reply.tool_calls] == ["lookup_user", "http_request"]
    assert reply.tool_calls[1]["args"]["body"] == "{}"
    assert len({c["id"] for c in reply.tool_calls}) == 2


async def test_round_trip_with_function_response(make_llm):
    """AI tool call -> ToolMessage -> the second request carries the functionResponse."""
    responder = ScriptedResponder([call("lookup_user", {"name": "ada"})])
    responder.add_rule(
        lambda request: (
            text(f"found {request.function_responses[0][1]['output']}") if request.function_responses else None
        )
    )
    async with GeminiStandIn(responder) as gemini:
        llm = make_llm(gemini).bind_tools([lookup_user])
        history: list[Any] = [HumanMessage("who is ada?")]
        first = await llm.ainvoke(history)
        [tool_call] = first.tool_calls
        history += [first, ToolMessage("Ada Lovelace", tool_call_id=tool_call["id"])]
        second = await llm.ainvoke(history)

    assert second.text == "found Ada Lovelace"
    first_request, second_request = gemini.requests
    assert second_request.status_code == 200
    assert second_request.function_responses == [("lookup_user", {"output": "Ada Lovelace"})]
    assert second_request.function_calls == [("lookup_user", {"name": "ada"})]
    model_turn = second_request.contents[1]
    assert model_turn["role"] == "model"
    # The thought signature the stand-in issued is sent back with the call.
    assert model_turn["parts"][0]["thoughtSignature"]
    assert first_request.last_user_text == second_request.last_user_text == "who is ada?"


async def test_missing_tool_message_is_refused(make_llm):
    """A model function call without its ToolMessage gets 400 INVALID_ARGUMENT."""
    consulted: list[GeminiRequest] = []

    def responder(request: GeminiRequest) -> str:
        consulted.append(request)
        return "unreachable"

    history = [
        HumanMessage("who is ada?"),
        AIMessage("", tool_calls=[{"name": "lookup_user", "args": {"name": "ada"}, "id": "c1"}]),
        HumanMessage("and?"),
    ]
    async with GeminiStandIn(responder) as gemini:
        llm = make_llm(gemini).bind_tools([lookup_user])
        with pytest.raises(GoogleInvalidRequestError) as exc_info:
            await llm.ainvoke(history)

    assert isinstance(exc_info.value, ChatGoogleGenerativeAIError)
    assert "number of function response parts is equal to" in str(exc_info.value)
    assert "INVALID_ARGUMENT" in str(exc_info.value)
    assert consulted == []
    assert gemini.requests[0].status_code == 400


async def test_partial_tool_messages_for_parallel_calls_are_refused(make_llm):
    """Answering one of two parallel calls is refused like the real API does."""
    history = [
        HumanMessage("do both"),
        AIMessage(
            "",
            tool_calls=[
                {"name": "lookup_user", "args": {"name": "ada"}, "id": "c1"},
                {"name": "lookup_user", "args": {"name": "bob"}, "id": "c2"},
            ],
        ),
        ToolMessage("Ada", tool_call_id="c1"),
    ]
    async with GeminiStandIn(ScriptedResponder()) as gemini:
        llm = make_llm(gemini).bind_tools([lookup_user])
        with pytest.raises(GoogleInvalidRequestError, match="number of function response parts"):
            await llm.ainvoke(history)


async def test_bad_api_key_is_refused(make_llm):
    """A wrong key gets 400 API_KEY_INVALID, raised as GoogleInvalidRequestError."""
    async with GeminiStandIn(ScriptedResponder(), api_key=KEY) as gemini:
        llm = make_llm(gemini, google_api_key="wrong-key")
        with pytest.raises(GoogleInvalidRequestError) as exc_info:
            await llm.ainvoke("hi")
        status, body = await _post(gemini, {"contents": []}, **{"x-goog-api-key": "nope"})

    assert "API key not valid. Please pass a valid API key." in str(exc_info.value)
    assert "API_KEY_INVALID" in str(exc_info.value)
    assert status == 400
    assert body["error"]["status"] == "INVALID_ARGUMENT"
    assert body["error"]["details"][0] == {
        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
        "reason": "API_KEY_INVALID",
        "domain": "googleapis.com",
        "metadata": {"service": "generativelanguage.googleapis.com"},
    }


async def test_missing_api_key_and_key_query_parameter():
    """No key at all gets 403 PERMISSION_DENIED; ?key= is accepted like the header."""
    async with GeminiStandIn(ScriptedResponder(["ok"])) as gemini:
        no_key = await _post(gemini, {"contents": [{"role": "user", "parts": [{"text": "x"}]}]})
        url = f"{gemini.base_url}/v1beta/models/{MODEL}:generateContent?key={KEY}"
        async with aiohttp.ClientSession() as session:
            body = {"contents": [{"parts": [{"text": "x"}]}]}
            async with session.post(url, json=body) as response:
                with_query = response.status, await response.json()

    assert no_key[0] == 403
    assert no_key[1]["error"]["status"] == "PERMISSION_DENIED"
    assert with_query[0] == 200
    assert with_query[1]["candidates"][0]["content"]["parts"] == [{"text": "ok"}]


async def test_unknown_model_is_not_found(make_llm):
    """A model the stand-in does not serve gets 404 NOT_FOUND."""
    async with GeminiStandIn(ScriptedResponder(), models=["gemini-3.8-pro"]) as gemini:
        llm = make_llm(gemini)
        with pytest.raises(GoogleModelNotFoundError, match="is not found for API version v1"):
            await llm.ainvoke("hi")


@pytest.mark.parametrize(
    ("contents", "message"),
    [
        ([], "contents is not specified"),
        ([{"role": "user", "parts": []}], "contents.parts must not be empty"),
        ([{"role": "system", "parts": [{"text": "x"}]}], "Please use a valid role: user, model."),
        (
            [
                {"role": "user", "parts": [{"text": "x"}]},
                {"role": "user", "parts": [{"functionResponse": {"name": "f", "response": {}}}]},
            ],
            "function response turn comes immediately after a function call turn",
        ),
        (
            [
                {"role": "user", "parts": [{"text": "x"}]},
                {"role": "model", "parts": [{"text": "thinking"}]},
                {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {}}}]},
                {"role": "user", "parts": [{"functionResponse": {"name": "f", "response": {}}}]},
            ],
            "function call turn comes immediately after a user turn",
        ),
        (
            [
                {"role": "user", "parts": [{"text": "x"}]},
                {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {}}}]},
            ],
            "number of function response parts is equal to the number of function call parts",
        ),
        (
            [
                {"role": "user", "parts": [{"text": "x"}]},
                {"role": "model", "parts": [{"text": ""}]},
                {"role": "user", "parts": [{"text": "y"}]},
            ],
            "contents[1].parts[0].data: required oneof field 'data' must have one initialized field",
        ),
    ],
    ids=[
        "empty",
        "no-parts",
        "bad-role",
        "orphan-response",
        "call-after-model",
        "unanswered-call",
        "empty-text-part",
    ],
)
async def test_history_validation(contents, message):
    """Broken histories posted directly get the real API's 400 INVALID_ARGUMENT."""
    async with GeminiStandIn(ScriptedResponder(default="ok")) as gemini:
        status, body = await _post(gemini, {"contents": contents}, **{"x-goog-api-key": KEY})

    assert status == 400
    assert body["error"]["code"] == 400
    assert body["error"]["status"] == "INVALID_ARGUMENT"
    assert message in body["error"]["message"]


async def test_503_then_success_with_fast_retry_options(make_llm):
    """Per-request HttpRetryOptions via .bind(http_options=...) retry a 503 in milliseconds."""
    async with GeminiStandIn(ScriptedResponder(["recovered"])) as gemini:
        gemini.fail_next(1, status=503)
        llm = make_llm(gemini).bind(http_options=FAST_RETRIES)
        started = time.monotonic()
        reply = await llm.ainvoke("hi")
        elapsed = time.monotonic() - started

    assert reply.text == "recovered"
    assert [r.status_code for r in gemini.requests] == [503, 200]
    assert elapsed < 1.0


async def test_503_then_success_with_max_retries(make_llm):
    """max_retries alone also retries, but with the SDK's 1 s initial backoff plus jitter."""
    async with GeminiStandIn(ScriptedResponder(["recovered"])) as gemini:
        gemini.fail_next(1, status=503)
        llm = make_llm(gemini, max_retries=2)
        started = time.monotonic()
        reply = await llm.ainvoke("hi")
        elapsed = time.monotonic() - started

    assert reply.text == "recovered"
    assert [r.status_code for r in gemini.requests] == [503, 200]
    assert 0.9 < elapsed < 5.0


async def test_429_exhausted_raises_rate_limit_error(make_llm):
    """429 on every attempt ends in GoogleRateLimitError after the configured attempts."""
    async with GeminiStandIn(ScriptedResponder(default="never")) as gemini:
        gemini.fail_next(5, status=429)
        llm = make_llm(gemini).bind(http_options=FAST_RETRIES)
        with pytest.raises(GoogleRateLimitError, match="RESOURCE_EXHAUSTED") as exc_info:
            await llm.ainvoke("hi")

    assert isinstance(exc_info.value, ChatGoogleGenerativeAIError)
    assert [r.status_code for r in gemini.requests] == [429, 429, 429]


@pytest.mark.parametrize("status", [500, 503])
async def test_5xx_exhausted_raises_google_api_error(make_llm, status):
    """5xx on every attempt ends in GoogleAPIError, which is NOT a ChatGoogleGenerativeAIError."""
    async with GeminiStandIn(ScriptedResponder(default="never")) as gemini:
        gemini.fail_next(3, status=status)
        llm = make_llm(gemini).bind(http_options=FAST_RETRIES)
        with pytest.raises(GoogleAPIError) as exc_info:
            await llm.ainvoke("hi")

    assert exc_info.value.code == status
    assert not isinstance(exc_info.value, ChatGoogleGenerativeAIError)
    assert len(gemini.requests) == 3
    # Collect the unawaited ClientResponse.json() coroutine while its warning is ignored.
    del exc_info
    gc.collect()


async def test_streaming_errors_are_classified(make_llm):
    """Streaming raises the same classified errors as ainvoke."""
    async with GeminiStandIn(ScriptedResponder()) as gemini:
        gemini.fail_next(1, status=429)
        llm = make_llm(gemini)
        with pytest.raises(GoogleRateLimitError):
            async for _ in llm.astream("hi"):
                pass

    assert gemini.requests[0].stream


async def test_streaming_function_call(make_llm):
    """A streamed reply with text and a call yields the text and one complete tool call."""
    reply = parts(
        [
            {"text": "Let me look."},
            {"functionCall": {"name": "lookup_user", "args": {"name": "ada"}}},
        ]
    )
    async with GeminiStandIn(ScriptedResponder([reply])) as gemini:
        llm = make_llm(gemini).bind_tools([lookup_user])
        merged = None
        async for chunk in llm.astream("who is ada?"):
            merged = chunk if merged is None else merged + chunk

    assert merged is not None
    assert merged.text == "Let me look."
    assert [(c["name"], c["args"]) for c in merged.tool_calls] == [("lookup_user", {"name": "ada"})]


async def test_error_helper_and_responder_errors(make_llm):
    """error() replies reach the client; an exhausted script answers 500 and re-raises on exit."""
    responder = ScriptedResponder([error(400, message="custom refusal")])
    stand_ins: list[GeminiStandIn] = []

    async def scenario() -> None:
        async with GeminiStandIn(responder) as gemini:
            stand_ins.append(gemini)
            llm = make_llm(gemini)
            with pytest.raises(GoogleInvalidRequestError, match="custom refusal"):
                await llm.ainvoke("first")
            with pytest.raises(GoogleAPIError):
                await llm.ainvoke("second")

    with pytest.raises(ScriptExhaustedError):
        await scenario()

    [gemini] = stand_ins
    assert [r.status_code for r in gemini.requests] == [400, 500]
    assert len(gemini.errors) == 1
    gc.collect()


async def test_undeclared_function_call_is_a_responder_error(make_llm):
    """Calling a function the request did not declare is flagged unless allowed."""
    async with GeminiStandIn(ScriptedResponder([call("nope", {})]), raise_responder_errors=False) as gemini:
        llm = make_llm(gemini).bind_tools([lookup_user])
        with pytest.raises(GoogleAPIError):
            await llm.ainvoke("hi")
    assert "undeclared function" in str(gemini.errors[0])
    gc.collect()

    async with GeminiStandIn(ScriptedResponder([call("nope", {})]), allow_undeclared_calls=True) as gemini:
        reply = await make_llm(gemini).bind_tools([lookup_user]).ainvoke("hi")
    assert reply.tool_calls[0]["name"] == "nope"


async def test_strict_schemas_flags_object_without_properties(make_llm):
    """strict_schemas refuses the OBJECT-without-properties that dict[str, str] produces."""
    async with GeminiStandIn(ScriptedResponder(["ok"]), strict_schemas=True) as gemini:
        with pytest.raises(GoogleInvalidRequestError) as exc_info:
            await make_llm(gemini).bind_tools([http_request]).ainvoke("hi")
        reply = await make_llm(gemini).bind_tools([lookup_user]).ainvoke("hi")

    assert "parameters.properties[headers].properties: should be non-empty for OBJECT type" in str(exc_info.value)
    assert reply.text == "ok"


async def test_delay_and_wait_for_requests(make_llm):
    """delay_seconds slows answers; wait_for_requests sees requests as they arrive."""
    async with GeminiStandIn(ScriptedResponder(default="late"), delay_seconds=0.2) as gemini:
        llm = make_llm(gemini)
        task = asyncio.create_task(llm.ainvoke("hi"))
        [request] = await gemini.wait_for_requests(1, timeout=5)
        assert request.status_code is None
        reply = await task
        assert request.status_code == 200
        with pytest.raises(TimeoutError):
            await gemini.wait_for_requests(2, timeout=0.05)

    assert reply.text == "late"


async def test_async_responder_function():
    """A plain async function works as the responder and may return a str."""

    async def responder(request: GeminiRequest) -> str:
        await asyncio.sleep(0)
        return f"echo: {request.last_user_text}"

    async with GeminiStandIn(responder) as gemini:
        status, body = await _post(
            gemini,
            {"contents": [{"role": "user", "parts": [{"text": "ping"}]}]},
            **{"x-goog-api-key": KEY},
        )

    assert status == 200
    candidate = body["candidates"][0]
    assert candidate["content"] == {"role": "model", "parts": [{"text": "echo: ping"}]}
    assert candidate["finishReason"] == "STOP"
    assert set(body["usageMetadata"]) == {
        "promptTokenCount",
        "candidatesTokenCount",
        "totalTokenCount",
    }
    assert body["modelVersion"] == MODEL
    assert body["responseId"]


_CHILD = """
import json, os
from langchain_google_genai import ChatGoogleGenerativeAI
llm = ChatGoogleGenerativeAI(
    model="gemini-3.8-flash", base_url=os.environ["GEMINI_BASE_URL"], max_retries=1
)
print(json.dumps({"text": llm.invoke("from the child").text}))
llm.client.close()
"""


async def test_subprocess_reaches_stand_in_through_env():
    """A child process pointed at GEMINI_BASE_URL talks to the stand-in in the test process."""
    async with GeminiStandIn(ScriptedResponder(["hi child"])) as gemini:
        env = {k: v for k, v in os.environ.items() if k not in {"GOOGLE_API_KEY", "GEMINI_API_KEY"}}
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            _CHILD,
            env={**env, **gemini.env},
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        stdout, stderr = await asyncio.wait_for(process.communicate(), timeout=60)

    assert process.returncode == 0, stderr.decode()
    assert json.loads(stdout) == {"text": "hi child"}
    assert gemini.requests[0].last_user_text == "from the child"


# --- answers without text ------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["invoke", "stream"])
async def test_answers_without_text_reach_the_client_with_their_reason(make_llm, stream):
    """Empty part, blocked prompt, malformed call, safety stop: no text, and the reason is in the metadata."""
    replies = [empty(), blocked("PROHIBITED_CONTENT"), malformed_call(), stopped("SAFETY")]
    async with GeminiStandIn(ScriptedResponder(replies)) as gemini:
        llm = make_llm(gemini).bind_tools([lookup_user])
        got = []
        for _ in replies:
            if stream:
                merged = None
                async for chunk in llm.astream("hi"):
                    merged = chunk if merged is None else merged + chunk
                got.append(merged)
            else:
                got.append(await llm.ainvoke("hi"))

    assert all(m is not None and not m.text and not m.tool_calls for m in got)
    assert got[0].response_metadata.get("finish_reason") == "STOP"
    assert str(got[1].response_metadata["prompt_feedback"]["block_reason"].value) == "PROHIBITED_CONTENT"
    assert got[2].response_metadata["finish_reason"] == "MALFORMED_FUNCTION_CALL"
    assert got[3].response_metadata["finish_reason"] == "SAFETY"
    assert [r.status_code for r in gemini.requests] == [200] * 4


async def test_an_empty_ai_message_in_the_history_is_refused(make_llm):
    """The client sends an AIMessage without content as an empty text part, which the API refuses."""
    async with GeminiStandIn(ScriptedResponder(default="ok")) as gemini:
        with pytest.raises(GoogleInvalidRequestError, match="required oneof field 'data'"):
            await make_llm(gemini).ainvoke([HumanMessage("x"), AIMessage(content=[]), HumanMessage("y")])


# --- thought signatures --------------------------------------------------------------------


def _turn(*calls_and_signatures: tuple[str, str | None]) -> dict[str, Any]:
    parts_ = []
    for name, signature in calls_and_signatures:
        part: dict[str, Any] = {"functionCall": {"name": name, "args": {}}}
        if signature is not None:
            part["thoughtSignature"] = signature
        parts_.append(part)
    return {"role": "model", "parts": parts_}


def _answers(*names: str) -> dict[str, Any]:
    return {"role": "user", "parts": [{"functionResponse": {"name": n, "response": {}}} for n in names]}


def _calls_then_done() -> ScriptedResponder:
    return ScriptedResponder([call("lookup_user", {})], default="done")


async def _issued_signature(gemini: GeminiStandIn) -> str:
    """Ask for one call and return the signature the stand-in gave it."""
    status, body = await _post(
        gemini,
        {
            "contents": [{"role": "user", "parts": [{"text": "go"}]}],
            "tools": [{"functionDeclarations": [{"name": "lookup_user"}]}],
        },
        **{"x-goog-api-key": KEY},
    )
    assert status == 200
    return body["candidates"][0]["content"]["parts"][0]["thoughtSignature"]


async def _replay(gemini: GeminiStandIn, contents: list[dict[str, Any]]) -> tuple[int, Any]:
    body = {"contents": contents, "tools": [{"functionDeclarations": [{"name": "lookup_user"}, {"name": "other"}]}]}
    return await _post(gemini, body, **{"x-goog-api-key": KEY})


async def test_a_call_of_the_current_turn_must_come_back_with_its_signature():
    """Signed and answered: accepted; the same call without its signature: 400 naming the function."""
    async with GeminiStandIn(_calls_then_done()) as gemini:
        signature = await _issued_signature(gemini)
        user = {"role": "user", "parts": [{"text": "go"}]}
        ok = await _replay(gemini, [user, _turn(("lookup_user", signature)), _answers("lookup_user")])
        missing = await _replay(gemini, [user, _turn(("lookup_user", None)), _answers("lookup_user")])

    assert ok[0] == 200
    assert missing[0] == 400
    assert "missing a thought_signature" in missing[1]["error"]["message"]
    assert "default_api:lookup_user" in missing[1]["error"]["message"]


async def test_only_the_first_of_parallel_calls_carries_the_signature():
    """Parallel calls: a signature on the first call is enough; earlier turns are not validated."""
    async with GeminiStandIn(_calls_then_done()) as gemini:
        signature = await _issued_signature(gemini)
        history = [
            {"role": "user", "parts": [{"text": "earlier"}]},
            _turn(("other", None)),
            _answers("other"),
            {"role": "model", "parts": [{"text": "earlier answer"}]},
            {"role": "user", "parts": [{"text": "now"}]},
            _turn(("lookup_user", signature), ("lookup_user", None)),
            _answers("lookup_user", "lookup_user"),
        ]
        status, _ = await _replay(gemini, history)

    assert status == 200


async def test_placeholder_signatures_are_accepted_unless_the_test_refuses_them():
    """The documented placeholder passes as on the real API; with placeholders refused it counts as missing."""
    history = [
        {"role": "user", "parts": [{"text": "go"}]},
        _turn(("lookup_user", "skip_thought_signature_validator")),
        _answers("lookup_user"),
    ]
    async with GeminiStandIn(ScriptedResponder(default="done")) as lenient:
        accepted = await _replay(lenient, history)
    async with GeminiStandIn(ScriptedResponder(default="done"), allow_signature_placeholders=False) as strict:
        refused = await _replay(strict, history)

    assert accepted[0] == 200
    assert refused[0] == 400
    assert "missing a thought_signature" in refused[1]["error"]["message"]


async def test_a_foreign_or_moved_signature_is_corrupted():
    """A signature never issued, or one sent back on a call of another function, is refused."""
    async with GeminiStandIn(_calls_then_done()) as gemini:
        signature = await _issued_signature(gemini)
        user = {"role": "user", "parts": [{"text": "go"}]}
        foreign = await _replay(gemini, [user, _turn(("lookup_user", "Zm9yZWlnbg==")), _answers("lookup_user")])
        moved = await _replay(gemini, [user, _turn(("other", signature)), _answers("other")])

    assert (foreign[0], foreign[1]["error"]["message"]) == (400, "Corrupted thought signature.")
    assert (moved[0], moved[1]["error"]["message"]) == (400, "Corrupted thought signature.")


async def test_the_real_client_sends_signatures_back_through_a_tool_loop(make_llm):
    """Two sequential calls and the final answer: every step is signed and accepted, placeholders refused."""
    responder = ScriptedResponder([call("lookup_user", {"name": "ada"}), call("lookup_user", {"name": "bob"}), "done"])
    async with GeminiStandIn(responder, allow_signature_placeholders=False) as gemini:
        llm = make_llm(gemini).bind_tools([lookup_user])
        history: list[Any] = [HumanMessage("who?")]
        for _ in range(2):
            reply = await llm.ainvoke(history)
            history += [reply, ToolMessage("found", tool_call_id=reply.tool_calls[0]["id"])]
        final = await llm.ainvoke(history)

    assert final.text == "done"
    signatures = [signature for _, signature in gemini.requests[-1].signed_calls]
    assert len(signatures) == 2 and all(s and s != "skip_thought_signature_validator" for s in signatures)


# --- function declarations -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("declaration", "message"),
    [
        ({"name": "bad name"}, "Invalid function name"),
        ({"name": "1st"}, "Invalid function name"),
        ({"name": "f", "parametersJsonSchema": {"type": "array"}}, "the schema must describe an object"),
        ({"name": "f", "parameters_json_schema": {"type": "array"}}, "the schema must describe an object"),
        (
            {"name": "f", "parameters": {"type": "OBJECT"}, "parametersJsonSchema": {"type": "object"}},
            "mutually exclusive",
        ),
        (
            {"name": "f", "parametersJsonSchema": {"type": "object", "properties": {"a-b": {}}}},
            "Invalid parameter name",
        ),
    ],
    ids=["space", "digit-first", "not-object", "not-object-snake-case", "both-schemas", "parameter-name"],
)
async def test_function_declarations_are_checked_as_documented(declaration, message):
    """Declarations the API reference rules out get 400 INVALID_ARGUMENT naming the declaration."""
    body = {
        "contents": [{"role": "user", "parts": [{"text": "x"}]}],
        "tools": [{"functionDeclarations": [declaration]}],
    }
    async with GeminiStandIn(ScriptedResponder(default="ok")) as gemini:
        status, answer = await _post(gemini, body, **{"x-goog-api-key": KEY})

    assert status == 400
    assert "tools[0].function_declarations[0]" in answer["error"]["message"]
    assert message in answer["error"]["message"]


def _object(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


@pytest.mark.parametrize(
    ("declaration", "message"),
    [
        ({"name": "f" * 65}, "maximum length of 64"),
        (
            {"name": "f", "parametersJsonSchema": {**_object(), "$schema": "http://json-schema.org/draft-07/schema#"}},
            "Unknown name \"$schema\" at 'tools[0].function_declarations[0].parameters_json_schema'",
        ),
        (
            {"name": "f", "parametersJsonSchema": _object(a={"type": "object", "properties": {"b": {"$schema": "x"}}})},
            'Unknown name "$schema" at \'tools[0].function_declarations[0].parameters_json_schema.properties[a]'
            ".properties[b]'",
        ),
        (
            {
                "name": "f",
                "parametersJsonSchema": {
                    **_object(a={"$ref": "#/$defs/A", "minLength": 1}),
                    "$defs": {"A": {"type": "string"}},
                },
            },
            "only description and default can be set alongside it",
        ),
        (
            {
                "name": "f",
                "parametersJsonSchema": _object(a={"anyOf": [{"$ref": "#/$defs/Missing"}, {"type": "null"}]}),
            },
            "reference to undefined schema at",
        ),
        (
            {"name": "f", "parametersJsonSchema": _object(a={"$ref": "https://example.com/a.json"})},
            "reference to undefined schema at",
        ),
        (
            {"name": "f", "parametersJsonSchema": _object(a={"type": "integer", "enum": [1, 2]})},
            "Invalid value at 'tools[0].function_declarations[0].parameters_json_schema.properties[a].enum[0]' "
            "(TYPE_STRING), 1",
        ),
        (
            {
                "name": "f",
                "parameters": {"type": "OBJECT", "properties": {"a": {"type": "STRING", "enum": ["x", True]}}},
            },
            "parameters.properties[a].enum[1]' (TYPE_STRING), true",
        ),
        (
            {"name": "f", "parametersJsonSchema": _object(a={"type": "array"})},
            "parameters_json_schema.properties[a].items: missing field",
        ),
        (
            {"name": "f", "parametersJsonSchema": _object(a={"type": "array", "items": {"type": "array"}})},
            "parameters_json_schema.properties[a].items.items: missing field",
        ),
    ],
    ids=[
        "name-over-64",
        "dollar-schema",
        "nested-dollar-schema",
        "ref-with-siblings",
        "ref-undefined",
        "ref-external",
        "integer-enum",
        "boolean-enum-in-parameters",
        "array-without-items",
        "nested-array-without-items",
    ],
)
async def test_schemas_google_refuses_fail_the_whole_request(declaration, message):
    """What Google is known to refuse in a declaration's schema gets 400 INVALID_ARGUMENT for the whole request."""
    body = {
        "contents": [{"role": "user", "parts": [{"text": "x"}]}],
        "tools": [{"functionDeclarations": [{"name": "fine", "parametersJsonSchema": _object()}, declaration]}],
    }
    body["tools"][0]["functionDeclarations"].reverse()  # the bad one first: its path is [0]
    async with GeminiStandIn(ScriptedResponder(default="ok")) as gemini:
        status, answer = await _post(gemini, body, **{"x-goog-api-key": KEY})

    assert status == 400
    assert answer["error"]["status"] == "INVALID_ARGUMENT"
    assert message in answer["error"]["message"]


async def test_schemas_google_takes_pass():
    """A 64-character name, $defs with a plain $ref, string enums, arrays with items and anyOf with null pass."""
    schema = {
        **_object(
            a={"$ref": "#/$defs/A", "description": "an A", "default": "x"},
            b={"type": "string", "enum": ["x", "y"]},
            c={"type": "array", "items": {}},
            d={"anyOf": [{"type": "object", "additionalProperties": {"type": "string"}}, {"type": "null"}]},
            e={"type": "array", "prefixItems": [{"type": "integer"}]},
        ),
        "$defs": {"A": {"type": "string"}},
    }
    body = {
        "contents": [{"role": "user", "parts": [{"text": "x"}]}],
        "tools": [{"functionDeclarations": [{"name": "f" * 64, "parametersJsonSchema": schema}]}],
    }
    async with GeminiStandIn(ScriptedResponder(default="ok")) as gemini:
        status, _ = await _post(gemini, body, **{"x-goog-api-key": KEY})

    assert status == 200


@pytest.mark.parametrize(("count", "status"), [(512, 200), (513, 400)])
async def test_more_than_512_function_declarations_fail_the_whole_request(count, status):
    """Google takes at most 512 function declarations in a request, and refuses more with its own words."""
    declarations = [{"name": f"tool_{index}", "parametersJsonSchema": _object()} for index in range(count)]
    body = {"contents": [{"role": "user", "parts": [{"text": "x"}]}], "tools": [{"functionDeclarations": declarations}]}
    async with GeminiStandIn(ScriptedResponder(default="ok")) as gemini:
        answer_status, answer = await _post(gemini, body, **{"x-goog-api-key": KEY})

    assert answer_status == status
    if status == 400:
        assert answer["error"]["status"] == "INVALID_ARGUMENT"
        assert answer["error"]["message"] == (
            "* GenerateContentRequest.tools[0].function_declarations: [FIELD_INVALID] At most 512 function "
            "declarations can be specified.\n"
        )

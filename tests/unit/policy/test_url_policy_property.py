"""Property: no spelling of a URL changes the mode an admin's condition gives an http_request call.

docs/decisions/0010: `review when args.url.startsWith('https://internal.example')` must hold for
`HTTPS://Internal.Example:443/x` as it does for `https://internal.example/x`. The calls are
judged by the real `ConfiguredPolicy` over the real `http_request` tool (whose canonical form
the policy applies); the oracle is the same policy judging the base URL the spelling was
generated from, which is canonical by construction.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

import httpx
from hypothesis import example, given, settings
from hypothesis import strategies as st

from bot.base.errors import InvalidArgumentsError
from bot.base.mode import Mode
from bot.policy.conditions import compile_condition
from bot.policy.config import ALL, ToolRule, WorkspaceConfig
from bot.policy.review import ConfiguredPolicy, PolicyContext
from bot.settings import ToolSettings
from bot.tools.builtin import builtin_tools
from bot.tools.http_url import canonical_url
from bot.tools.registry import ToolRegistry
from tests.support.scripted_model import tool_call
from tests.support.url_spellings import BASE_URLS, spellings

CONTEXT = PolicyContext(thread_id="test:W1:C1", platform="test", workspace_id="W1", channel_id="C1")

URL_CONDITIONS = [
    None,  # the built-in default: review unless GET or HEAD
    "args.url.startsWith('https://internal.example')",
    "args.url.startsWith('https://internal.example/')",
    "!args.url.startsWith('https://internal.example/')",
    "args.url == 'https://internal.example/'",
    "args.url.contains('internal.example')",
    "args.url.matches('^https://internal[.]example/deploy/')",
    "args.url.endsWith('/katalog')",
    "args.url.startsWith('https://xn--bcher-kva.example/')",
    "args.url.startsWith('http://127.0.0.1:9000/')",
    "args.url.startsWith('https://[::1]/')",
    "args.method != 'GET' || args.url.contains('/deploy/')",
    "args.url == 'never'",  # never holds: the call runs without review when judged at all
    "url(args.url).getHostname() == 'internal.example'",
    "url(args.url).getHost() != 'internal.example'",
    "url(args.url).getEscapedPath().startsWith('/deploy/')",
    "url(args.url).getQuery()['env'] == ['prod']",  # fails (review) where there is no `env`
    "url(args.url).getPort() == '9000' && url(args.url).getScheme() == 'http'",
]
for _text in URL_CONDITIONS:  # compiled (and cached) up front: cel-python raises the recursion limit once
    if _text is not None:
        compile_condition(_text)

REGISTRY = ToolRegistry(builtin_tools(ToolSettings(http_allowed_hosts=("internal.example",))))


def _policy(condition: str | None) -> ConfiguredPolicy:
    config = WorkspaceConfig(platform="test", workspace_id="W1")
    if condition is not None:
        config.rules[(ALL, "http_request")] = ToolRule(tool_name="http_request", mode=Mode.REVIEW, condition=condition)

    async def load(platform: str, workspace_id: str) -> WorkspaceConfig:
        return config

    return ConfiguredPolicy(REGISTRY, load)


def _methods(method: str) -> st.SearchStrategy[str]:
    return st.lists(st.booleans(), min_size=len(method), max_size=len(method)).map(
        lambda flips: "".join(c.lower() if flip else c for c, flip in zip(method, flips, strict=True))
    )


@settings(max_examples=400, deadline=None)
@given(
    data=st.data(),
    base=st.sampled_from(BASE_URLS),
    condition=st.sampled_from(URL_CONDITIONS),
    method=st.sampled_from(["GET", "POST", "DELETE"]),
)
async def test_property_no_spelling_of_a_url_changes_the_mode(data, base, condition, method):
    """A spelling of the URL (and of the method) gets exactly the mode of the canonical request."""
    written = data.draw(spellings(base))
    spelled_method = data.draw(_methods(method))
    policy = _policy(condition)

    expected = await policy.mode_for(tool_call("http_request", {"method": method, "url": base}), CONTEXT)
    got = await policy.mode_for(tool_call("http_request", {"method": spelled_method, "url": written}), CONTEXT)

    assert got is expected, (written, spelled_method)


def _with_userinfo(written: str, userinfo: str) -> str:
    head, _, tail = written.partition("://")
    return f"{head}://{userinfo}@{tail.removeprefix('@')}"


def _with_encoded_dot(written: str, userinfo: str) -> str:
    head, _, tail = written.partition("://")
    return f"{head}://{tail.replace('.', '%2E', 1)}"


REFUSALS = [
    (_with_userinfo, "user"),
    (_with_userinfo, "user:secret"),
    (_with_userinfo, "internal.example\\"),  # `https://internal.example\@host/`: httpx reads userinfo
    (_with_encoded_dot, ""),  # `internal%2Eexample`
]


@settings(max_examples=200, deadline=None)
@given(
    data=st.data(),
    base=st.sampled_from([url for url in BASE_URLS if "." in url.split("/")[2]]),
    condition=st.sampled_from([c for c in URL_CONDITIONS if c is not None]),
    refusal=st.sampled_from(REFUSALS),
)
async def test_property_a_url_the_tool_refuses_is_always_reviewed_under_a_condition(data, base, condition, refusal):
    """A URL without a canonical form (userinfo, an encoded host) never runs unreviewed, whatever the condition says."""
    spoil, part = refusal
    written = spoil(data.draw(spellings(base)), part)

    mode = await _policy(condition).mode_for(tool_call("http_request", {"method": "GET", "url": written}), CONTEXT)

    assert mode is Mode.REVIEW, written


_PATH_PIECES = ["/", "public", "admin", "reset", ".", "..", "%2e%2e", ";", ";x", "%2F", "%5c", "\\", "%61dmin"]
_ADMIN_RULE = "url(args.url).getEscapedPath().startsWith('/admin')"


def _as_a_lenient_server_reads_it(path: str) -> str:
    """The path as the most forgiving of common servers resolves it: backslashes and encoded
    separators are `/`, `;params` are dropped per segment (Tomcat), `//` is merged (nginx), then
    the dot segments are removed."""
    path = re.sub("%2f|%5c", "/", path.replace("\\", "/"), flags=re.IGNORECASE)
    segments = [unquote(segment.partition(";")[0]) for segment in path.split("/")]
    resolved: list[str] = []
    for segment in segments:
        if segment in ("", "."):
            continue
        if segment == "..":
            resolved = resolved[:-1]
            continue
        resolved.append(segment)
    return "/" + "/".join(resolved)


@settings(max_examples=400, deadline=None)
@given(pieces=st.lists(st.sampled_from(_PATH_PIECES), max_size=8))
@example(pieces=["admin", "%2F", "public", "/", ".."])  # `..` drops the `%2F` segment: `/` is sent
async def test_property_no_path_a_server_resolves_to_admin_escapes_a_prefix_rule(pieces):
    """`review when url(args.url).getEscapedPath().startsWith('/admin')`: any request that a forgiving
    server would serve from under /admin is reviewed (its URL is refused, or the canonical path the tool
    sends starts there)."""
    path = "/" + "".join(pieces)
    url = f"https://internal.example{path}"
    mode = await _policy(_ADMIN_RULE).mode_for(tool_call("http_request", {"method": "GET", "url": url}), CONTEXT)
    try:
        sent = httpx.URL(canonical_url(url)).raw_path.decode("ascii")
    except InvalidArgumentsError:
        sent = path  # refused: never sent, and the policy must not let it out either
    if _as_a_lenient_server_reads_it(sent).startswith("/admin"):
        assert mode is Mode.REVIEW, path

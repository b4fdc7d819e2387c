"""Kubernetes-style URL helpers in admin conditions read the request the tool would send."""

from __future__ import annotations

import pytest

from bot.policy.conditions import ConditionEvaluationError, compile_condition

HTTP_ARGS = ["method", "url", "headers", "body"]
SAMPLE = {"method": "", "url": "", "headers": {}, "body": None}


@pytest.mark.parametrize(
    ("condition", "url", "holds"),
    [
        ("url(args.url).getHostname() == 'internal.example'", "HTTPS://Internal.Example.:443/a", True),
        ("url(args.url).getHostname() == 'internal.example'", "https://internal.example.evil.example/", False),
        ("url(args.url).getHostname() == 'xn--bcher-kva.example'", "https://bücher.example/", True),
        ("url(args.url).getHostname() == '::1'", "https://[0:0::1]/", True),
        ("url(args.url).getHost() == '[::1]:8443'", "https://[::1]:8443/a", True),
        ("url(args.url).getHost() == 'internal.example'", "https://internal.example:443/", True),
        ("url(args.url).getPort() == ''", "https://internal.example:443/", True),
        ("url(args.url).getPort() == '8443'", "https://internal.example:8443/", True),
        ("url(args.url).getScheme() == 'https'", "HTTPS://internal.example/", True),
        ("url(args.url).getEscapedPath() == '/admin/y'", "https://h/x/%2e%2e/admin/y?q=1#z", True),
        ("url(args.url).getEscapedPath() == '/a%3Ab'", "https://h/a%3ab", True),
        ("url(args.url).getQuery()['env'] == ['prod', 'dev']", "https://h/?env=prod&env=dev", True),
        ("'env' in url(args.url).getQuery()", "https://h/?x=1", False),
        ("isURL(args.url)", "https://h/", True),
        ("isURL(args.url)", "https://user@h/", False),
        ("isURL(args.url)", "ftp://h/", False),
    ],
)
def test_url_helpers_read_the_canonical_request(condition, url, holds):
    """Each helper answers for the URL as the tool would send it, whatever its spelling."""
    assert compile_condition(condition, HTTP_ARGS, SAMPLE).holds({"method": "GET", "url": url}) is holds


@pytest.mark.parametrize(
    ("condition", "url"),
    [
        ("url(args.url).getHostname() == 'h'", "https://user@h/"),
        ("url(args.url).getHostname() == 'h'", "http://127.1/"),
        ("url(args.url).getHostname() == 'h'", "not a url"),
        ("args.url.getHostname() == 'h'", "https://h/"),  # a helper of url(), not of text
        ("url(args.method).getHostname() == 'h'", "https://h/"),
        ("url(args.url).getEscapedPath().startsWith('/admin')", "https://h//admin"),
        ("!url(args.url).getEscapedPath().startsWith('/public/')", "https://h/public/..;/admin"),
        ("!url(args.url).getEscapedPath().startsWith('/public/')", "https://h/public/..%2Fadmin"),
    ],
)
def test_a_url_the_tool_would_refuse_makes_the_condition_fail(condition, url):
    """No spelling the tool refuses is judged: the condition fails, so the call needs review."""
    with pytest.raises(ConditionEvaluationError):
        compile_condition(condition, HTTP_ARGS, SAMPLE).holds({"method": "GET", "url": url})


def test_a_helper_result_that_is_not_a_boolean_is_refused_when_saved():
    """`url(args.url).getHostname()` alone is text, not a condition: the schema's samples catch it."""
    from langchain_core.utils.json_schema import dereference_refs

    from bot.policy.conditions import InvalidConditionError, sample_arguments
    from bot.settings import ToolSettings
    from bot.tools.http_request import make_http_request_tool

    schema = make_http_request_tool(ToolSettings()).tool_call_schema
    samples = sample_arguments(dereference_refs(schema.model_json_schema()))  # type: ignore[union-attr]
    with pytest.raises(InvalidConditionError, match="must be true or false, but it gives text"):
        compile_condition("url(args.url).getHostname()", HTTP_ARGS, samples)
    assert compile_condition("url(args.url).getHostname() == 'h'", HTTP_ARGS, samples).arguments == {"url"}

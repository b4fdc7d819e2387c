"""Slack message links naming the thread of `/countersign context [reset] <link>`."""

from __future__ import annotations

import pytest

from adapters.slack.thread_links import LinkProblem, ThreadLinkError, take_thread_link, thread_of_link

ROOT = "https://acme.slack.com/archives/C1/p1700000000123456"
REPLY = "https://acme.slack.com/archives/C1/p1700000099000200?thread_ts=1700000000.123456&cid=C1"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"context <{ROOT}>", ("context", ROOT)),
        (f"context reset <{ROOT}|the thread>", ("context reset", ROOT)),
        (f"context <{REPLY.replace('&', '&amp;')}> reset", ("context reset", REPLY.replace("&", "&amp;"))),
        (f"Context {ROOT}", ("Context", ROOT)),
        ("context reset", ("context reset", None)),
    ],
)
def test_the_link_is_taken_out_of_a_context_command(text, expected):
    """A link token (with or without a label) or a bare URL anywhere after `context` is split off."""
    rest, link = take_thread_link(text)
    assert (" ".join(rest.split()), link) == expected


@pytest.mark.parametrize(
    "text",
    [
        f"policy http_request review when args.url == '<{ROOT}>'",
        f"contexts <{ROOT}>",
        f"show <{ROOT}>",
    ],
)
def test_other_commands_keep_their_links(text):
    """Only `context` takes a link: a condition's URL stays in the text as typed."""
    assert take_thread_link(text) == (text, None)


@pytest.mark.parametrize(
    ("url", "thread"),
    [
        (ROOT, "1700000000.123456"),
        (REPLY, "1700000000.123456"),
        (REPLY.replace("&", "&amp;"), "1700000000.123456"),
        ("https://ACME.slack.com/archives/C1/p1700000000123456/", "1700000000.123456"),
        ("https://acme.enterprise.slack.com/archives/C1/p1700000000123456", "1700000000.123456"),
    ],
)
def test_a_message_link_names_its_thread(url, thread):
    """The root's link names its own ts; a reply's names its `thread_ts`; `&amp;` and case do not matter."""
    assert thread_of_link(url, channel_id="C1", team_domain="acme") == thread


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("https://evil.example/archives/C1/p1700000000123456", LinkProblem.NOT_A_MESSAGE),
        ("https://acme.slack.com.evil.example/archives/C1/p1700000000123456", LinkProblem.NOT_A_MESSAGE),
        ("https://acme.slack.com/archives/C1", LinkProblem.NOT_A_MESSAGE),
        ("https://app.slack.com/client/T1/C1", LinkProblem.NOT_A_MESSAGE),
        ("ftp://acme.slack.com/archives/C1/p1700000000123456", LinkProblem.NOT_A_MESSAGE),
        (ROOT + "?thread_ts=tomorrow", LinkProblem.NOT_A_MESSAGE),
        ("https://other.slack.com/archives/C1/p1700000000123456", LinkProblem.OTHER_WORKSPACE),
        ("https://acme.slack.com/archives/C2/p1700000000123456", LinkProblem.OTHER_CHANNEL),
        (ROOT + "?thread_ts=1700000000.123456&cid=C2", LinkProblem.OTHER_CHANNEL),
    ],
)
def test_links_elsewhere_are_refused(url, problem):
    """Not a Slack message link, another workspace, another channel: refused, naming which."""
    with pytest.raises(ThreadLinkError) as refused:
        thread_of_link(url, channel_id="C1", team_domain="acme")
    assert refused.value.problem is problem


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"stop <{ROOT}>", ("stop", ROOT)),
        (f"Stop <{REPLY.replace('&', '&amp;')}|a reply>", ("Stop", REPLY.replace("&", "&amp;"))),
        ("stop", ("stop", None)),
    ],
)
def test_the_link_is_taken_out_of_a_stop_command(text, expected):
    """`stop` names its thread the way `context` does."""
    rest, link = take_thread_link(text)
    assert (" ".join(rest.split()), link) == expected
    assert take_thread_link(f"stops <{ROOT}>") == (f"stops <{ROOT}>", None)

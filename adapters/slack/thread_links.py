"""Slack message links in `/countersign context [reset] [<link>]` and `stop [<link>]`: which thread.

A slash command's payload names its workspace and channel but never a thread: Slack sends no
`thread_ts` for commands, even when one is typed in a thread. In a channel whose conversations
are per thread (the default), `context` and `stop` therefore take the thread's link, as *Copy link*
gives it: `https://<workspace>.slack.com/archives/<channel>/p<ts without the dot>` for a
message, with `?thread_ts=<root ts>&cid=<channel>` for a reply. With the manifest's
`should_escape`, it arrives as a link token (`<https://...>` or `<https://...|label>`), its `&`
escaped as `&amp;`.

The link only names a thread inside the command's own channel: the conversation key is still
built from the signed payload's team and channel ids, so a link can never reach another
channel's or workspace's state; one that points elsewhere is refused so that nobody is misled.
"""

from __future__ import annotations

import re
from enum import StrEnum
from urllib.parse import parse_qs, urlsplit

from adapters.slack.text import unescape
from bot.base.errors import CountersignError

_CONTEXT = re.compile(r"\s*(?:context|stop)(?=\s|$)", re.IGNORECASE)
_LINK_TOKEN = re.compile(r"<(https?://[^|>\s]+)(?:\|[^>]*)?>|(?<!\S)(https?://\S+)")
"""A link token (`<url>` or `<url|label>`), or a bare URL (escaping off, or typed without one)."""
_ARCHIVES = re.compile(r"/archives/([A-Z0-9]+)/p(\d{7,20})/?")
_TS = re.compile(r"\d{1,14}\.\d{1,9}")


class LinkProblem(StrEnum):
    """Why a link names no thread of the command's channel."""

    NOT_A_MESSAGE = "not_a_message"
    OTHER_WORKSPACE = "other_workspace"
    OTHER_CHANNEL = "other_channel"


class ThreadLinkError(CountersignError):
    """A link in `context` that names no thread of the command's channel; nothing was done.

    Args:
        problem: what is wrong with it.
    """

    def __init__(self, problem: LinkProblem) -> None:
        super().__init__(f"unusable thread link: {problem}")
        self.problem = problem


def take_thread_link(text: str) -> tuple[str, str | None]:
    """Split the link off a `context` or `stop` command's text; any other command's text is left as it is.

    Only `context` and `stop` take a link: elsewhere a link is part of what was typed (a
    `policy` condition may well hold one).

    Args:
        text: the slash command's text as Slack sent it.

    Returns:
        The text without the first link, and that link's URL (still escaped), or None.
    """
    head = _CONTEXT.match(text)
    if head is None:
        return text, None
    found = _LINK_TOKEN.search(text, head.end())
    if found is None:
        return text, None
    url = found.group(1) or found.group(2)
    return text[: found.start()] + " " + text[found.end() :], url


def thread_of_link(url: str, *, channel_id: str, team_domain: str | None) -> str:
    """The `thread_ts` of the thread a message link points into, checked against the command.

    Args:
        url: the link (`take_thread_link`), escaped or not.
        channel_id: the channel the command was typed in; the link must point there.
        team_domain: the workspace's subdomain from the payload (`team_domain`), if given; the
            link's host must be `<team_domain>.slack.com` (or an Enterprise Grid
            `*.enterprise.slack.com` address, where the channel id alone tells).

    Returns:
        The thread's root ts: the link's `thread_ts` for a reply, else the message's own ts
        (the first message of a thread).

    Raises:
        ThreadLinkError: not a Slack message link, or one into another workspace or channel.
    """
    parts = urlsplit(unescape(url.strip()))
    host = (parts.hostname or "").lower()
    path = _ARCHIVES.fullmatch(parts.path)
    if parts.scheme not in {"https", "http"} or not (host == "slack.com" or host.endswith(".slack.com")) or not path:
        raise ThreadLinkError(LinkProblem.NOT_A_MESSAGE)
    workspace = host.removesuffix("slack.com").rstrip(".")
    if team_domain and workspace and workspace != team_domain.lower() and not workspace.endswith(".enterprise"):
        raise ThreadLinkError(LinkProblem.OTHER_WORKSPACE)
    query = parse_qs(parts.query)
    linked_channel, digits = path.group(1), path.group(2)
    if linked_channel != channel_id or any(cid != channel_id for cid in query.get("cid", [])):
        raise ThreadLinkError(LinkProblem.OTHER_CHANNEL)
    thread_ts = query.get("thread_ts", [None])[0]
    if thread_ts is not None:
        if not _TS.fullmatch(thread_ts):
            raise ThreadLinkError(LinkProblem.NOT_A_MESSAGE)
        return thread_ts
    return f"{digits[:-6]}.{digits[-6:]}"

"""Showing untrusted text (model-written arguments and reasons) so what people read is what runs.

`reveal_invisible` lives in the core (`bot.reviews.shown`), which measures what approvers are shown.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from bot.base.errors import ModelErrorKind, NoAnswerReason
from bot.ports import Activity, ModelFailed, ResumeGivenUp
from bot.reviews.shown import reveal_invisible as reveal_invisible

_NOTHING_TO_READ = {"Cc", "Cf", "Zs", "Zl", "Zp"}


EXCERPT_CHARS = 60
"""Characters of a message quoted back to its sender (`excerpt`)."""


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """`text` on one line, cut to `limit` characters with "…", its invisible characters shown (`reveal_invisible`).

    For quoting a person's message back to them ("could not answer your message “…”").
    """
    line = " ".join(text.split())
    if len(line) > limit:
        line = line[: limit - 1].rstrip() + "…"
    return reveal_invisible(line)  # after the cut, so that no escape is cut in half


def is_blank(text: str) -> bool:
    """Whether `text` holds nothing a person can read.

    Empty, or only whitespace, control characters and invisible format characters (zero-width
    spaces and joiners, direction marks, a byte-order mark): `str.strip` keeps the latter, so a
    message of them would reach the model as if it said something.
    """
    return all(unicodedata.category(ch) in _NOTHING_TO_READ for ch in text)


def who_is_working(subagents: tuple[str, ...]) -> tuple[str, bool]:
    """Subagents as words, and whether they are more than one.

    `("researcher", "operator", "researcher")` reads "researcher (2 tasks) and operator": one name per
    subagent, in the order they started, with a count when it runs more than once.
    """
    counts: dict[str, int] = {}
    for name in subagents:
        counts[name] = counts.get(name, 0) + 1
    labels = [f"{name} ({count} tasks)" if count > 1 else name for name, count in counts.items()]
    text = labels[0] if len(labels) == 1 else ", ".join(labels[:-1]) + " and " + labels[-1]
    return text, len(subagents) > 1


@dataclass(frozen=True, slots=True, kw_only=True)
class ProgressWords:
    """One platform's sentences for the progress indicator (each with a `{names}` slot)."""

    working_one: str
    working_many: str
    waiting_one: str
    waiting_many: str
    agent: str
    """When no subagent works or waits any more (the supervisor writes the answer)."""
    retrying: Mapping[ModelErrorKind, str]
    """A model call waits to be tried again, by why it failed; each with a `{wait}` slot."""
    busy: str
    """A run that delegated nothing and has gone on for a while (its indicator offers Stop)."""
    stopping: str
    """The turn was stopped and ends at its next step; with a `{name}` slot (who stopped it)."""
    joiner: str = " · "


def progress_line(activity: Activity, words: ProgressWords, escape: Callable[[str], str]) -> str:
    """The indicator's text for `activity`: who works, then who waits for a card, then a model retry.

    Once the turn is stopped, only that: it ends at its next step.
    """
    if activity.stopping is not None:
        return words.stopping.format(name=escape(activity.stopping))
    parts = []
    for names, one, many in (
        (activity.subagents, words.working_one, words.working_many),
        (activity.waiting, words.waiting_one, words.waiting_many),
    ):
        if names:
            text, plural = who_is_working(names)
            parts.append((many if plural else one).format(names=escape(text)))
    if activity.retrying is not None:
        retry = activity.retrying
        sentence = words.retrying.get(retry.kind, words.retrying[ModelErrorKind.UNAVAILABLE])
        parts.append(sentence.format(wait=duration_words(retry.wait_s)))
    if parts:
        return words.joiner.join(parts)
    return words.agent if activity.delegated else words.busy


def shows_something(activity: Activity) -> bool:
    """Whether `activity` is worth a progress message of its own (a quick plain turn posts none).

    Subagents at work or waiting, a model retry, or a run that has gone on for a while (so
    that its Stop button shows). A stop alone is not: it only updates a message shown already.
    """
    return bool(activity.subagents or activity.waiting or activity.retrying or activity.long_running)


def offers_stop(activity: Activity) -> bool:
    """Whether the indicator for `activity` carries a Stop button (a turn to name, not stopping yet)."""
    return activity.turn_id is not None and activity.stopping is None


def model_failed_text(
    notice: ModelFailed,
    *,
    by_kind: Mapping[ModelErrorKind, str],
    no_answer: Mapping[NoAnswerReason, str],
    busy_for: str,
) -> str:
    """One platform's sentence for a `ModelFailed` notice.

    Args:
        notice: the notice.
        by_kind: the sentence for each kind of failure (all but `NO_ANSWER`).
        no_answer: the sentence for each reason the model gave no answer.
        busy_for: the rate-limit sentence with a `{wait}` slot, used when Google said how long to wait.
    """
    if notice.kind is ModelErrorKind.NO_ANSWER:
        return no_answer[notice.reason or NoAnswerReason.EMPTY]
    if notice.kind is ModelErrorKind.BUSY and notice.retry_after_s:
        return busy_for.format(wait=duration_words(notice.retry_after_s))
    return by_kind[notice.kind]


def given_up_calls(notice: ResumeGivenUp) -> tuple[list[str], list[str]]:
    """The decided calls of a given-up pause: (those that did not run, those that may have), by name.

    A subagent's call is named as its card names it, `subagent: tool`; a name appears once.
    """
    not_run: dict[str, None] = {}
    unknown: dict[str, None] = {}
    for approval in notice.approvals:
        name = f"{approval.source}: {approval.tool_name}" if approval.source else approval.tool_name
        if approval.not_run:
            not_run[name] = None
        elif approval.outcome_unknown:
            unknown[name] = None
    return list(not_run), list(unknown)


def duration_words(seconds: float) -> str:
    """`seconds` rounded up for people: "40 seconds", "3 minutes", "2 hours"."""
    whole = max(1, math.ceil(seconds))
    for unit, size in (("hour", 3600), ("minute", 60)):
        if whole >= size * 2 or (unit == "minute" and whole >= 90):
            count = math.ceil(whole / size)
            return f"{count} {unit}s"
    return f"{whole} second" if whole == 1 else f"{whole} seconds"

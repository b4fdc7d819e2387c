"""What `GET /metrics` shows: the life of approvals, turns, model calls, platform calls and MCP calls.

The metrics are prometheus-client's, defined once here (the library's idiom:
module-level metrics on its default registry) and served by `render`. Labels are only names the
bot or its admin chose (tool names, outcome names, error kinds, Web API method names, MCP
servers' keys in `COUNTERSIGN_MCP_CONFIG`): never a person's text, a tool's arguments, a user id
or a secret. MCP metrics are by server only (docs/decisions/0044-mcp-operations.md).

With `PROMETHEUS_MULTIPROC_DIR` set (several worker processes), prometheus-client writes each
process's values to files in that directory and `render` sums them (the library's multiprocess
mode); its documentation asks that the directory be empty when the processes start.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable, Iterable

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)
from prometheus_client.multiprocess import MultiProcessCollector

from bot.reviews.lifecycle import ApprovalStatus
from bot.reviews.records import ApprovalRecord

__all__ = ["CONTENT_TYPE_LATEST", "render"]

log = logging.getLogger(__name__)

DECISION_BUCKETS_S = (5, 15, 30, 60, 120, 300, 600, 1800, 3600, 4 * 3600, 24 * 3600, float("inf"))
"""Seconds from a card to its decision: people take seconds to hours."""

TURN_BUCKETS_S = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, float("inf"))
"""Seconds of one run of a conversation's graph, from its start to its outcome out."""

APPROVALS_REQUESTED = Counter(
    "countersign_approvals_requested", "Tool calls that got a card (an approval was opened).", ["tool"]
)
APPROVALS_DECIDED = Counter(
    "countersign_approvals_decided",
    "Approvals decided by people, by outcome (approved, edited, rejected, stopped: the turn was stopped).",
    ["tool", "outcome"],
)
APPROVALS_EXPIRED = Counter("countersign_approvals_expired", "Approvals that expired without a decision.", ["tool"])
TURNS_STOPPED = Counter(
    "countersign_turns_stopped",
    "Turns stopped by a person (Stop), by what the turn was doing: running, or paused for a card.",
    ["state"],
)
STOPS_REFUSED = Counter(
    "countersign_stops_refused",
    "Stop requests refused, by reason (not_permitted, already_stopped).",
    ["reason"],
)
DECISIONS_REFUSED = Counter(
    "countersign_decisions_refused",
    "Clicks or commands refused before they became a decision, by reason (not_permitted, "
    "already_decided, already_voted, invalid, stale_card, forged).",
    ["tool", "reason"],
)
DECISION_SECONDS = Histogram(
    "countersign_decision_seconds",
    "Seconds from an approval's card to its decision by people.",
    ["tool"],
    buckets=DECISION_BUCKETS_S,
)
TURN_SECONDS = Histogram(
    "countersign_turn_seconds",
    "Seconds of a run of a conversation's graph, to its answer, cards or failure out, by outcome "
    "(delivered; failed: a failure was told; undelivered: the outcome could not be posted yet).",
    ["outcome"],
    buckets=TURN_BUCKETS_S,
)
TURNS_RUNNING = Gauge(
    "countersign_turns_running", "Runs of conversations' graphs under way.", multiprocess_mode="livesum"
)
PENDING_APPROVALS = Gauge(
    "countersign_pending_approvals",
    "Approvals waiting for a decision (read from the database when scraped).",
    multiprocess_mode="mostrecent",
)
MODEL_CALLS = Counter("countersign_model_calls", "Model calls, each counted once however many attempts.", ["outcome"])
MODEL_ERRORS = Counter("countersign_model_errors", "Failed model attempts, by kind.", ["kind"])
MODEL_RETRIES = Counter("countersign_model_retries", "Model attempts retried after a failure, by kind.", ["kind"])
ACK_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5, float("inf"))
"""Seconds to acknowledge a platform's request: Slack wants its answer within 3 s."""

PLATFORM_ACKS = Histogram(
    "countersign_platform_ack_seconds",
    "Seconds from a platform's request reaching the bot to its acknowledgement, by platform and kind "
    "(Slack: event, interaction, command or other; Slack shows the clicker an error after 3 s).",
    ["platform", "kind"],
    buckets=ACK_BUCKETS_S,
)
PLATFORM_API_ERRORS = Counter(
    "countersign_platform_api_errors",
    "Failed calls to a platform's API (refused or not answered), by platform and method.",
    ["platform", "method"],
)

MCP_CALL_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, float("inf"))
"""Seconds of one MCP tool call, from sending it to its answer: a local server answers in
milliseconds, a remote one or a slow tool in seconds, a timeout at `COUNTERSIGN_MCP_TIMEOUT`."""

MCP_CALLS = Counter(
    "countersign_mcp_calls",
    "MCP tool calls sent to a server (or refused at once because it was not connected), by server key.",
    ["server"],
)
MCP_CALL_ERRORS = Counter(
    "countersign_mcp_call_errors",
    "MCP tool calls that did not answer a result, by server key and kind: not_connected (nothing "
    "sent), refused (the server refused the request: nothing ran), is_error (the tool answered an "
    "error), timeout and outcome_unknown (sent, no answer: it may have run), input_required (the "
    "server asked for input mid-call: not sent again, it may have run), cancelled (a Stop).",
    ["server", "kind"],
)
MCP_CALL_SECONDS = Histogram(
    "countersign_mcp_call_seconds",
    "Seconds of MCP tool calls sent to a server, from sending to the answer (or the failure), by server key.",
    ["server"],
    buckets=MCP_CALL_BUCKETS_S,
)
MCP_SERVER_CONNECTED = Gauge(
    "countersign_mcp_server_connected",
    "1 while the MCP server's session is live, 0 while it connects or retries, by server key. With "
    "several workers each holds its own session: the minimum over the live workers.",
    ["server"],
    multiprocess_mode="livemin",
)


def approvals_opened(tool_names: Iterable[str]) -> None:
    """Count the approvals of a review just stored (once per approval, not per card posted)."""
    for name in tool_names:
        APPROVALS_REQUESTED.labels(tool=name).inc()


def approval_closed(approval: ApprovalRecord) -> None:
    """Count an approval the store just decided or expired (after its transaction committed).

    Args:
        approval: the approval as now stored: a final status and `decided_at`.
    """
    if approval.status is ApprovalStatus.EXPIRED:
        APPROVALS_EXPIRED.labels(tool=approval.tool_name).inc()
        return
    APPROVALS_DECIDED.labels(tool=approval.tool_name, outcome=approval.status.value).inc()
    if approval.decided_at is not None:
        seconds = (approval.decided_at - approval.created_at).total_seconds()
        DECISION_SECONDS.labels(tool=approval.tool_name).observe(max(seconds, 0.0))


def forget_process(pid: int, directory: str) -> None:
    """Drop a dead worker's live gauges (e.g. turns running) from the multiprocess files.

    Args:
        pid: the worker that exited.
        directory: the workers' `PROMETHEUS_MULTIPROC_DIR`. Counters and histograms of the dead
            process keep counting in the sums, as prometheus-client's multiprocess mode intends.
    """
    multiprocess.mark_process_dead(pid, directory)  # type: ignore[no-untyped-call]


def _registry() -> CollectorRegistry:
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        return registry
    return REGISTRY


async def render(count_pending: Callable[[], Awaitable[int]] | None = None) -> bytes:
    """The metrics in Prometheus' text format (`CONTENT_TYPE_LATEST`).

    Args:
        count_pending: reads the number of pending approvals (from the database, so every
            replica shows the same figure); None, or a failure (logged), leaves the last value.
    """
    if count_pending is not None:
        try:
            PENDING_APPROVALS.set(await count_pending())
        except Exception as exc:
            log.warning("metrics: pending approvals not counted: %s: %s", type(exc).__name__, exc)
    return generate_latest(_registry())

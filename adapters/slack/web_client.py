"""The Slack Web API client the adapter uses: slack_sdk's, counting the calls that fail."""

from __future__ import annotations

from typing import Any

from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse

from bot import metrics


class CountedWebClient(AsyncWebClient):
    """`AsyncWebClient` whose failed calls count in `countersign_platform_api_errors`.

    Every Web API method of slack_sdk goes through `api_call`, so this is the one place: a call
    Slack refused (`SlackApiError`, after the retry handlers gave up) or that got no answer
    (a connection error, a timeout) counts once, labelled with its method name
    (`chat.postMessage`), then raises as before.
    """

    async def api_call(self, api_method: str, **kwargs: Any) -> AsyncSlackResponse:
        """slack_sdk's `api_call` (same arguments, same errors), counted when it raises."""
        try:
            return await super().api_call(api_method, **kwargs)
        except Exception:
            metrics.PLATFORM_API_ERRORS.labels(platform="slack", method=api_method).inc()
            raise

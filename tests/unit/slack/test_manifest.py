"""The Slack manifest asks for exactly the scopes and events the adapter uses."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[3]
MANIFEST = yaml.safe_load((ROOT / "adapters/slack/manifest.yml").read_text())

# Web API method (as slack_sdk spells it) -> the bot scope Slack's docs list for it (None: none).
METHOD_SCOPES = {
    "chat_postMessage": "chat:write",
    "chat_update": "chat:write",
    "chat_delete": "chat:write",
    "chat_postEphemeral": "chat:write",
    "chat_getPermalink": None,
    "views_open": None,
    "users_info": "users:read",
    "reactions_add": "reactions:write",
    "reactions_remove": "reactions:write",
    "usergroups_users_list": "usergroups:read",
    "auth_test": None,
    "apps_connections_open": None,  # the app-level token's connections:write, not a bot scope
}
# Event subscription -> the scope it requires.
EVENT_SCOPES = {
    "app_mention": "app_mentions:read",
    "message.channels": "channels:history",
    "message.groups": "groups:history",
    "message.im": "im:history",
    "message.mpim": "mpim:history",
    "app_uninstalled": None,  # Slack's event reference: no scope
    "tokens_revoked": None,
}


# Methods of slack_sdk's Socket Mode client (`client.is_connected()`), not Web API calls.
SOCKET_CLIENT_METHODS = {"is_connected"}


def called_methods() -> set[str]:
    source = "\n".join(p.read_text() for p in (ROOT / "adapters/slack").glob("*.py"))
    direct = set(re.findall(r"client\.([a-z]+(?:_[a-zA-Z]+)+)\(", source)) - SOCKET_CLIENT_METHODS
    indirect = set(re.findall(r'_react\((?:client, )?"([a-z]+_[a-zA-Z]+)"', source))
    return direct | indirect


def test_every_called_method_is_known():
    """Each Web API method the adapter calls has a scope entry here (so none is forgotten)."""
    assert called_methods() <= set(METHOD_SCOPES), called_methods() - set(METHOD_SCOPES)
    assert {"chat_postMessage", "users_info", "views_open", "reactions_add"} <= called_methods()


def test_scopes_are_exactly_those_used():
    """The manifest's bot scopes equal the scopes of the called methods and subscribed events."""
    events = MANIFEST["settings"]["event_subscriptions"]["bot_events"]
    commands = {"commands"} if MANIFEST["features"].get("slash_commands") else set()
    needed = {METHOD_SCOPES[m] for m in called_methods()} | {EVENT_SCOPES[e] for e in events} | commands
    needed.discard(None)
    assert set(MANIFEST["oauth_config"]["scopes"]["bot"]) == needed


def test_events_match_the_listeners():
    """Subscribed events are the ones the listeners handle (Bolt answers 404 to others)."""
    events = set(MANIFEST["settings"]["event_subscriptions"]["bot_events"])
    assert events == set(EVENT_SCOPES)
    listeners = (ROOT / "adapters/slack/listeners.py").read_text()
    assert 'app.event("app_mention"' in listeners and 'app.event("message"' in listeners
    # slack-bolt's built-in listeners handle these two in OAuth mode (adapters/slack/app.py)
    assert "enable_token_revocation_listeners()" in (ROOT / "adapters/slack/app.py").read_text()


def test_oauth_installs_ask_for_the_manifest_scopes():
    """An OAuth install asks for exactly the manifest's bot scopes and comes back to our redirect path."""
    from adapters.slack.app import BOT_SCOPES, REDIRECT_PATH

    assert list(BOT_SCOPES) == MANIFEST["oauth_config"]["scopes"]["bot"]
    assert [url.endswith(REDIRECT_PATH) for url in MANIFEST["oauth_config"]["redirect_urls"]] == [True]


def test_interactivity_and_events_use_the_same_endpoint():
    """Events and interactivity both point at /slack/events, which the adapter serves."""
    settings = MANIFEST["settings"]
    assert settings["interactivity"]["is_enabled"] is True
    assert settings["interactivity"]["request_url"].endswith("/slack/events")
    assert settings["event_subscriptions"]["request_url"].endswith("/slack/events")


def test_the_slash_command_is_declared_and_handled():
    """/countersign is in the manifest with escaping on, and the adapter listens for it."""
    [command] = MANIFEST["features"]["slash_commands"]
    assert command["command"] == "/countersign" and command["should_escape"] is True
    assert command["url"].endswith("/slack/events")
    assert 'COMMAND = "/countersign"' in (ROOT / "adapters/slack/commands.py").read_text()

"""Settings built from the environment (the environment is the input under test here)."""

from __future__ import annotations

import pytest
from pydantic import SecretStr, ValidationError

from bot.settings import (
    DEFAULT_DISCORD_API_URL,
    DEFAULT_GEMINI_MODEL,
    DEFAULT_SLACK_API_URL,
    AgentSettings,
    DatabaseSettings,
    DiscordSettings,
    GeminiSettings,
    RetentionSettings,
    ServerSettings,
    Settings,
    SlackSettings,
    ToolSettings,
)

ENV_NAMES = (
    "DATABASE_URL",
    "COUNTERSIGN_DATA_DIR",
    "DATABASE_POOL_SIZE",
    "GOOGLE_API_KEY",
    "GEMINI_MODEL",
    "GEMINI_BASE_URL",
    "GEMINI_MAX_ATTEMPTS",
    "GEMINI_RETRY_INITIAL_DELAY",
    "GEMINI_RETRY_MAX_WAIT",
    "GEMINI_TIMEOUT",
    "COUNTERSIGN_RECURSION_LIMIT",
    "COUNTERSIGN_HISTORY_WINDOW",
    "COUNTERSIGN_SYSTEM_PROMPT",
    "COUNTERSIGN_TOOLS_MODULE",
    "HTTP_REQUEST_ALLOWED_HOSTS",
    "COUNTERSIGN_ADMIN_CHANNELS",
    "HTTP_REQUEST_TIMEOUT",
    "HTTP_REQUEST_MAX_RESPONSE_CHARS",
    "SMTP_URL",
    "SMTP_FROM",
    "SLACK_BOT_TOKEN",
    "SLACK_SIGNING_SECRET",
    "SLACK_APP_TOKEN",
    "SLACK_API_URL",
    "SLACK_CLIENT_ID",
    "SLACK_CLIENT_SECRET",
    "SLACK_REDIRECT_URI",
    "SLACK_AUTHORIZE_URL",
    "DISCORD_TOKEN",
    "DISCORD_API_URL",
    "DISCORD_GUILD_READY_TIMEOUT",
    "DISCORD_SHARD_COUNT",
    "DISCORD_SHARD_IDS",
    "COUNTERSIGN_AGENT",
    "COUNTERSIGN_SUBAGENTS_FILE",
    "HOST",
    "PORT",
    "LOG_LEVEL",
    "LOG_FORMAT",
    "SHUTDOWN_GRACE_S",
    "START_RETRY_S",
    "METRICS_PORT",
    "METRICS_HOST",
    "COUNTERSIGN_ENCRYPTION_KEY",
    "COUNTERSIGN_WORKERS",
    "COUNTERSIGN_WORKER_INDEX",
    "COUNTERSIGN_EVENT_LOOP",
    "COUNTERSIGN_CONTEXT_TOKENS",
    "COUNTERSIGN_HISTORY_WINDOW",
    "COUNTERSIGN_RETENTION_DAYS",
    "AUDIT_RETENTION_DAYS",
)

SECRETS = {
    "DATABASE_URL": "postgresql://bot:pg-pass-1234@db.example:5432/countersign",
    "GOOGLE_API_KEY": "AIza-google-key-5678",
    "SMTP_URL": "smtp://mailer:smtp-pass-9012@mail.example:2525",
    "SLACK_BOT_TOKEN": "xoxb-slack-bot-3456",
    "SLACK_SIGNING_SECRET": "slack-signing-7890",
    "SLACK_APP_TOKEN": "xapp-slack-app-1357",
    "DISCORD_TOKEN": "discord-token-2468",
}


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path) -> pytest.MonkeyPatch:
    """No inherited settings: every known variable unset, and no `.env` file in reach."""
    for name in ENV_NAMES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    return monkeypatch


def test_defaults_without_environment():
    """With nothing set, every section has its documented default and no secret."""
    settings = Settings()
    assert settings.database.url is None
    assert str(settings.database.data_dir) == ".countersign"
    assert settings.gemini.api_key is None
    assert settings.gemini.model == DEFAULT_GEMINI_MODEL
    assert settings.gemini.base_url is None
    assert settings.tools.http_allowed_hosts == ()
    assert settings.tools.smtp_url is None
    assert settings.slack.api_url == DEFAULT_SLACK_API_URL
    assert settings.slack.enabled is False
    assert settings.discord.api_url == DEFAULT_DISCORD_API_URL
    assert settings.discord.enabled is False
    assert settings.server.port == 3000
    assert settings.agent.recursion_limit == 25


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("example.com", ("example.com",)),
        ("Example.COM, API.example.com:8443", ("example.com", "api.example.com:8443")),
        (" a.example ,, ,b.example, ", ("a.example", "b.example")),
        ("", ()),
        (" , ,", ()),
        ("[::1]:8080,localhost", ("[::1]:8080", "localhost")),
    ],
)
def test_allowed_hosts_are_split_trimmed_lowercased(clean_env, raw, expected):
    """HTTP_REQUEST_ALLOWED_HOSTS is split on commas, trimmed, lowercased; blanks dropped."""
    clean_env.setenv("HTTP_REQUEST_ALLOWED_HOSTS", raw)
    assert ToolSettings().http_allowed_hosts == expected


def test_admin_channels_are_split_and_each_names_platform_workspace_and_channel(clean_env):
    """COUNTERSIGN_ADMIN_CHANNELS is split on commas; an entry without its three parts is refused, naming it."""
    clean_env.setenv("COUNTERSIGN_ADMIN_CHANNELS", " slack:T1:C1 , discord:81:91,")
    assert ToolSettings().admin_channels == ("slack:T1:C1", "discord:81:91")
    clean_env.setenv("COUNTERSIGN_ADMIN_CHANNELS", "slack:C1")
    with pytest.raises(ValidationError, match="'slack:C1' is not <platform>:<workspace id>:<channel id>"):
        ToolSettings()


def test_allowed_hosts_accept_a_tuple_in_code():
    """Built in code, the hosts tuple is kept as given."""
    assert ToolSettings(http_allowed_hosts=("x.example",)).http_allowed_hosts == ("x.example",)


@pytest.mark.parametrize(
    ("section", "env", "field"),
    [
        (DatabaseSettings, "DATABASE_URL", "url"),
        (GeminiSettings, "GOOGLE_API_KEY", "api_key"),
        (GeminiSettings, "GEMINI_BASE_URL", "base_url"),
        (ToolSettings, "SMTP_URL", "smtp_url"),
        (SlackSettings, "SLACK_BOT_TOKEN", "bot_token"),
        (SlackSettings, "SLACK_SIGNING_SECRET", "signing_secret"),
        (SlackSettings, "SLACK_APP_TOKEN", "app_token"),
        (DiscordSettings, "DISCORD_TOKEN", "token"),
    ],
)
def test_empty_string_is_unset(clean_env, section, env, field):
    """A secret (or optional URL) set to the empty string counts as not set."""
    clean_env.setenv(env, "")
    assert getattr(section(), field) is None


@pytest.mark.parametrize(
    ("section", "env", "field"),
    [
        (DatabaseSettings, "DATABASE_URL", "url"),
        (GeminiSettings, "GOOGLE_API_KEY", "api_key"),
        (ToolSettings, "SMTP_URL", "smtp_url"),
        (SlackSettings, "SLACK_BOT_TOKEN", "bot_token"),
        (SlackSettings, "SLACK_SIGNING_SECRET", "signing_secret"),
        (SlackSettings, "SLACK_APP_TOKEN", "app_token"),
        (DiscordSettings, "DISCORD_TOKEN", "token"),
    ],
)
def test_secrets_are_read_as_secret_strings(clean_env, section, env, field):
    """Each secret is read from its variable into a SecretStr with the exact value."""
    clean_env.setenv(env, SECRETS[env])
    value = getattr(section(), field)
    assert isinstance(value, SecretStr)
    assert value.get_secret_value() == SECRETS[env]


def test_secrets_never_appear_in_repr_or_str(clean_env):
    """No secret value shows in repr() or str() of the settings or any section."""
    for name, value in SECRETS.items():
        clean_env.setenv(name, value)
    settings = Settings()
    sections = [
        settings,
        settings.database,
        settings.gemini,
        settings.tools,
        settings.slack,
        settings.discord,
    ]
    shown = " ".join(repr(s) + str(s) for s in sections) + repr(settings.model_dump())
    for value in SECRETS.values():
        assert value not in shown
    for fragment in ("pg-pass-1234", "smtp-pass-9012", "xoxb-", "xapp-"):
        assert fragment not in shown
    assert settings.slack.bot_token is not None
    assert settings.slack.bot_token.get_secret_value() == SECRETS["SLACK_BOT_TOKEN"]


def test_validation_error_does_not_echo_secrets(clean_env):
    """A settings error elsewhere does not print the secrets that were set."""
    for name, value in SECRETS.items():
        clean_env.setenv(name, value)
    clean_env.setenv("PORT", "not-a-port")
    with pytest.raises(ValidationError) as info:
        Settings()
    for value in SECRETS.values():
        assert value not in str(info.value)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("http://127.0.0.1:9999/api", "http://127.0.0.1:9999/api/"),
        ("http://127.0.0.1:9999/api/", "http://127.0.0.1:9999/api/"),
        ("https://slack.example", "https://slack.example/"),
    ],
)
def test_slack_api_url_gets_a_trailing_slash(clean_env, raw, expected):
    """SLACK_API_URL always ends with exactly one added `/` (slack_sdk joins method names)."""
    clean_env.setenv("SLACK_API_URL", raw)
    assert SlackSettings().api_url == expected


def test_slack_api_url_trailing_slash_applies_in_code_too():
    """The trailing slash is added when the section is built in code as well."""
    assert SlackSettings(api_url="http://localhost:1/api").api_url == "http://localhost:1/api/"


@pytest.mark.parametrize(
    ("section", "env", "field", "default"),
    [
        (SlackSettings, "SLACK_API_URL", "api_url", DEFAULT_SLACK_API_URL),
        (DiscordSettings, "DISCORD_API_URL", "api_url", DEFAULT_DISCORD_API_URL),
        (GeminiSettings, "GEMINI_MODEL", "model", DEFAULT_GEMINI_MODEL),
    ],
)
def test_empty_override_falls_back_to_default(clean_env, section, env, field, default):
    """An override variable set to the empty string means "use the default"."""
    clean_env.setenv(env, "")
    assert getattr(section(), field) == default


@pytest.mark.parametrize(
    ("env", "enabled"),
    [
        ({}, False),
        ({"SLACK_BOT_TOKEN": "xoxb-1"}, False),
        ({"SLACK_SIGNING_SECRET": "s"}, False),
        ({"SLACK_APP_TOKEN": "xapp-1"}, False),
        ({"SLACK_SIGNING_SECRET": "s", "SLACK_APP_TOKEN": "xapp-1"}, False),
        ({"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_SIGNING_SECRET": "s"}, True),
        ({"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_APP_TOKEN": "xapp-1"}, True),
        ({"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_SIGNING_SECRET": "s", "SLACK_APP_TOKEN": "x"}, True),
        ({"SLACK_BOT_TOKEN": "", "SLACK_SIGNING_SECRET": "s"}, False),
        ({"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_SIGNING_SECRET": ""}, False),
    ],
)
def test_slack_enabled(clean_env, env, enabled):
    """Slack runs with a bot token plus a signing secret (HTTP) or an app token (Socket Mode)."""
    for name, value in env.items():
        clean_env.setenv(name, value)
    assert SlackSettings().enabled is enabled


def test_discord_enabled_with_token(clean_env):
    """Discord runs when DISCORD_TOKEN is set, not when it is empty."""
    assert DiscordSettings().enabled is False
    clean_env.setenv("DISCORD_TOKEN", "")
    assert DiscordSettings().enabled is False
    clean_env.setenv("DISCORD_TOKEN", "t")
    assert DiscordSettings().enabled is True


def test_port_is_read(clean_env):
    """PORT sets the listener's port."""
    clean_env.setenv("PORT", "8080")
    assert ServerSettings().port == 8080


def test_the_context_budget_defaults_to_the_agents_default(clean_env):
    """COUNTERSIGN_CONTEXT_TOKENS: the agents' own default when unset, read when set, at least 2000."""
    from bot.turns.context.window import DEFAULT_CONTEXT_TOKENS

    assert AgentSettings().context_tokens == DEFAULT_CONTEXT_TOKENS
    clean_env.setenv("COUNTERSIGN_CONTEXT_TOKENS", "50000")
    assert AgentSettings().context_tokens == 50_000
    clean_env.setenv("COUNTERSIGN_CONTEXT_TOKENS", "100")
    with pytest.raises(ValidationError, match="COUNTERSIGN_CONTEXT_TOKENS"):
        AgentSettings()


def test_shutdown_grace_is_read_and_bounded(clean_env):
    """SHUTDOWN_GRACE_S sets the grace after SIGTERM (30 s by default); a negative one is refused."""
    assert ServerSettings().shutdown_grace_s == 30.0
    clean_env.setenv("SHUTDOWN_GRACE_S", "5.5")
    assert ServerSettings().shutdown_grace_s == 5.5
    clean_env.setenv("SHUTDOWN_GRACE_S", "-1")
    with pytest.raises(ValidationError, match="SHUTDOWN_GRACE_S"):
        ServerSettings()


def test_start_retry_is_read_and_bounded(clean_env):
    """START_RETRY_S bounds the tries after an outage at start (300 s by default; 0 allowed); a negative one is refused."""
    assert ServerSettings().start_retry_s == 300.0
    clean_env.setenv("START_RETRY_S", "0")
    assert ServerSettings().start_retry_s == 0.0
    clean_env.setenv("START_RETRY_S", "-1")
    with pytest.raises(ValidationError, match="START_RETRY_S"):
        ServerSettings()


def test_metrics_port_is_optional_and_apart_from_port(clean_env):
    """METRICS_PORT unset (or blank) serves the probes on PORT; set, on its own port and METRICS_HOST (else HOST); never PORT itself."""
    clean_env.setenv("METRICS_PORT", "")
    assert ServerSettings().metrics_port is None
    clean_env.setenv("HOST", "10.0.0.5")
    clean_env.setenv("METRICS_PORT", "9100")
    assert (ServerSettings().metrics_port, ServerSettings().probes_host) == (9100, "10.0.0.5")
    clean_env.setenv("METRICS_HOST", "127.0.0.1")
    assert ServerSettings().probes_host == "127.0.0.1"
    clean_env.setenv("METRICS_PORT", "3000")
    with pytest.raises(ValidationError, match="must differ from PORT"):
        ServerSettings()


def test_encryption_keys_are_split_and_a_bad_one_is_refused_without_echo(clean_env):
    """COUNTERSIGN_ENCRYPTION_KEY: unset or blank means none; comma-separated Fernet keys in order; a bad one is refused, unshown."""
    from cryptography.fernet import Fernet

    assert Settings().encryption.keys == ()
    clean_env.setenv("COUNTERSIGN_ENCRYPTION_KEY", " ")
    assert Settings().encryption.keys == ()
    new, old = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    clean_env.setenv("COUNTERSIGN_ENCRYPTION_KEY", f" {new} , {old},")
    assert [key.get_secret_value() for key in Settings().encryption.keys] == [new, old]
    assert new not in repr(Settings())
    clean_env.setenv("COUNTERSIGN_ENCRYPTION_KEY", f"{new},not-a-fernet-key-but-secret")
    with pytest.raises(ValidationError, match="must be Fernet keys") as info:
        Settings()
    assert "not-a-fernet-key-but-secret" not in str(info.value) and new not in str(info.value)


def test_retention_keeps_everything_unless_set(clean_env):
    """Both retentions are off by default (and when blank); set, they are whole days of at least 1."""
    assert Settings().retention.conversation_days is None and Settings().retention.audit_days is None
    clean_env.setenv("COUNTERSIGN_RETENTION_DAYS", "30")
    clean_env.setenv("AUDIT_RETENTION_DAYS", "")
    assert (RetentionSettings().conversation_days, RetentionSettings().audit_days) == (30, None)
    clean_env.setenv("AUDIT_RETENTION_DAYS", "365")
    assert RetentionSettings().audit_days == 365
    for wrong in ("0", "-3", "1.5", "forever"):
        clean_env.setenv("COUNTERSIGN_RETENTION_DAYS", wrong)
        with pytest.raises(ValidationError, match="COUNTERSIGN_RETENTION_DAYS"):
            RetentionSettings()


@pytest.mark.parametrize("port", ["abc", "-1", "65536", "80.5", ""])
def test_invalid_port_is_refused(clean_env, port):
    """A PORT that is not an integer in 0..65535 is refused with a ValidationError naming it."""
    clean_env.setenv("PORT", port)
    with pytest.raises(ValidationError, match="PORT"):
        ServerSettings()


def test_invalid_port_fails_the_whole_settings(clean_env):
    """Building Settings() with a bad PORT fails instead of silently using the default."""
    clean_env.setenv("PORT", "http")
    with pytest.raises(ValidationError):
        Settings()


def test_dotenv_file_is_read_and_environment_wins(clean_env, tmp_path):
    """A `.env` file in the working directory is read; the real environment overrides it."""
    (tmp_path / ".env").write_text("GEMINI_MODEL=from-dotenv\nPORT=4000\n")
    assert GeminiSettings().model == "from-dotenv"
    clean_env.setenv("PORT", "5000")
    assert ServerSettings().port == 5000


def test_sections_are_frozen():
    """Settings cannot be changed after they are built."""
    settings = Settings(slack=SlackSettings(bot_token="xoxb-1"))
    with pytest.raises(ValidationError):
        settings.slack.api_url = "http://elsewhere/"  # type: ignore[misc]


def test_gemini_retry_settings_make_the_retry_policy(clean_env):
    """GEMINI_MAX_ATTEMPTS, GEMINI_RETRY_INITIAL_DELAY and GEMINI_RETRY_MAX_WAIT bound the model's retries."""
    from bot.agents.model_retry import RetryPolicy

    clean_env.setenv("GEMINI_MAX_ATTEMPTS", "5")
    clean_env.setenv("GEMINI_RETRY_INITIAL_DELAY", "0.5")
    clean_env.setenv("GEMINI_RETRY_MAX_WAIT", "90")
    policy = RetryPolicy.from_settings(GeminiSettings())
    assert (policy.attempts, policy.initial_delay_s, policy.max_wait_s, policy.announce_after_s) == (5, 0.5, 90.0, 5.0)


def test_log_format_is_text_by_default_json_on_request_and_nothing_else(clean_env):
    """LOG_FORMAT: `text` unless set; `JSON` in any case means json; another value is refused."""
    from bot.settings import ServerSettings

    assert ServerSettings().log_format == "text"
    clean_env.setenv("LOG_FORMAT", " JSON ")
    assert ServerSettings().log_format == "json"
    clean_env.setenv("LOG_FORMAT", "xml")
    with pytest.raises(ValidationError):
        ServerSettings()


def test_slack_oauth_mode_from_the_environment(clean_env):
    """SLACK_CLIENT_ID, SLACK_CLIENT_SECRET and a signing secret, without a bot token: OAuth mode runs."""
    clean_env.setenv("SLACK_CLIENT_ID", "1111.2222")
    clean_env.setenv("SLACK_CLIENT_SECRET", "slack-client-secret-8642")
    clean_env.setenv("SLACK_SIGNING_SECRET", "slack-signing-7890")
    slack = SlackSettings()
    assert slack.oauth and slack.enabled and slack.problem is None
    assert slack.authorize_url == "https://slack.com/oauth/v2/authorize"
    assert "slack-client-secret-8642" not in repr(slack)


@pytest.mark.parametrize(
    ("env", "problem"),
    [
        ({"SLACK_CLIENT_ID": "1.2", "SLACK_SIGNING_SECRET": "s"}, "set SLACK_CLIENT_SECRET too"),
        ({"SLACK_CLIENT_SECRET": "c", "SLACK_SIGNING_SECRET": "s"}, "set SLACK_CLIENT_ID too"),
        (
            {"SLACK_CLIENT_ID": "1.2", "SLACK_CLIENT_SECRET": "c", "SLACK_SIGNING_SECRET": "s", "SLACK_BOT_TOKEN": "x"},
            "not both",
        ),
        ({"SLACK_CLIENT_ID": "1.2", "SLACK_CLIENT_SECRET": "c", "SLACK_APP_TOKEN": "xapp-1"}, "unset SLACK_APP_TOKEN"),
        ({"SLACK_CLIENT_ID": "1.2", "SLACK_CLIENT_SECRET": "c"}, "need SLACK_SIGNING_SECRET"),
    ],
)
def test_partial_or_mixed_slack_oauth_settings_name_the_problem(clean_env, env, problem):
    """Half an OAuth setup, or OAuth mixed with a bot token or Socket Mode, is refused in one line."""
    for name, value in env.items():
        clean_env.setenv(name, value)
    slack = SlackSettings()
    assert slack.enabled is False
    assert slack.problem is not None and problem in slack.problem and "\n" not in slack.problem


def test_the_event_loop_setting_is_read_case_insensitively(clean_env):
    """COUNTERSIGN_EVENT_LOOP=AsyncIO selects asyncio's loop; an unknown name is refused."""
    clean_env.setenv("COUNTERSIGN_EVENT_LOOP", " AsyncIO ")
    assert ServerSettings().event_loop == "asyncio"
    clean_env.setenv("COUNTERSIGN_EVENT_LOOP", "trio")
    with pytest.raises(ValueError, match="COUNTERSIGN_EVENT_LOOP"):
        ServerSettings()

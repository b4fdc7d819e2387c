"""Typed settings, read from the environment (and an optional `.env` file).

One `Settings` object is built at the entry point and passed down (docs/development.md, convention 5); no
module reads the environment on import. The environment variable names are fixed by DESIGN.md
("Fixed interface"), so each section maps its fields to those names explicitly. Secrets are
`SecretStr`: they never appear in a repr, a log line or an error message.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from cryptography.fernet import Fernet
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from bot.base.agent_kind import AgentKind
from bot.storage.urls import normalise

DEFAULT_GEMINI_MODEL = "gemini-3.8-flash"
DEFAULT_SLACK_API_URL = "https://slack.com/api/"
DEFAULT_SLACK_AUTHORIZE_URL = "https://slack.com/oauth/v2/authorize"
DEFAULT_DISCORD_API_URL = "https://discord.com/api/v10"


def _section() -> SettingsConfigDict:
    """Config shared by every section: environment first, then `.env`, unknown keys ignored."""
    return SettingsConfigDict(env_file=".env", extra="ignore", populate_by_name=True, frozen=True)


class DatabaseSettings(BaseSettings):
    """Where state lives: an external PostgreSQL, or the embedded one under `data_dir`."""

    model_config = _section()

    url: SecretStr | None = Field(
        description="`postgresql://` (or `postgres://`) `user:pass@host:port/db`; the database must exist",
        json_schema_extra={"doc_default": "unset: the embedded server"},
        default=None,
        validation_alias="DATABASE_URL",
    )
    """`postgresql://user:pass@host:port/db`; unset means "start the embedded server"."""
    data_dir: Path = Field(
        description="data directory of the embedded server (its files are under `<dir>/pgdata`)",
        json_schema_extra={"doc_default": "`./.countersign`"},
        default=Path(".countersign"),
        validation_alias="COUNTERSIGN_DATA_DIR",
    )
    """Data directory; the embedded server keeps its files in `<data_dir>/pgdata`."""
    pool_max_size: int = Field(
        description="connections per pool (each process opens three); also the most turns running at once",
        default=10,
        ge=2,
        le=200,
        validation_alias="DATABASE_POOL_SIZE",
    )
    """Connections per pool (three: asyncpg for our tables, asyncpg for the conversation locks,
    psycopg for the saver)."""
    connect_timeout_s: float = Field(
        description="seconds a connection to PostgreSQL may take to open", default=10.0, gt=0
    )
    prepared_statements: bool = Field(
        description=(
            "`false` behind a transaction-mode connection pooler (PgBouncer before 1.21, or without "
            "`max_prepared_statements`)"
        ),
        default=True,
        validation_alias="DATABASE_PREPARED_STATEMENTS",
    )
    """False behind a transaction-mode connection pooler (PgBouncer before 1.21, or without
    `max_prepared_statements`): no statement is prepared on a server connection, since the
    next statement may run on another one."""

    @field_validator("url", mode="before")
    @classmethod
    def _blank_is_unset(cls, value: object) -> object:
        return None if value == "" else value

    @field_validator("url")
    @classmethod
    def _postgresql_url(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None:
            normalise(value.get_secret_value())  # a wrong scheme or port is a setting error, not "unreachable"
        return value


class GeminiSettings(BaseSettings):
    """The model: Google Gemini through langchain-google-genai."""

    model_config = _section()

    api_key: SecretStr | None = Field(
        description="Gemini API key (required)", default=None, validation_alias="GOOGLE_API_KEY"
    )
    model: str = Field(description="model name", default=DEFAULT_GEMINI_MODEL, validation_alias="GEMINI_MODEL")
    base_url: str | None = Field(
        description="Gemini API base URL override",
        json_schema_extra={"doc_default": "Google's"},
        default=None,
        validation_alias="GEMINI_BASE_URL",
    )
    """API base URL override (a local stand-in in tests); unset means Google's endpoint."""
    max_attempts: int = Field(
        description="attempts per model call on 408, 429, 5xx, timeouts and connection failures (the first included)",
        default=4,
        ge=1,
        le=10,
        validation_alias="GEMINI_MAX_ATTEMPTS",
    )
    """Attempts per model call, the first included; retried on 408, 429, 5xx, timeouts and
    connection failures only (`bot.agents.model_retry`)."""
    retry_initial_delay_s: float = Field(
        description=(
            "seconds before the first retry when Google gives no advice (doubled per retry, each wait drawn between "
            "half and all of it)"
        ),
        default=1.0,
        ge=0,
        validation_alias="GEMINI_RETRY_INITIAL_DELAY",
    )
    """The first wait before a retry when Google gives no advice; doubled per attempt."""
    retry_max_delay_s: float = Field(
        description="the longest single wait in seconds before a retry when Google gives no advice", default=20.0, ge=0
    )
    """The longest single wait without advice."""
    retry_max_wait_s: float = Field(
        description=(
            "most seconds one model call waits between its attempts; a rate limit asking for a longer wait is "
            "reported at once, with Google's wait"
        ),
        default=60.0,
        ge=0,
        le=3600,
        validation_alias="GEMINI_RETRY_MAX_WAIT",
    )
    """The most seconds one model call spends waiting between attempts; a 429 asking for a
    longer wait (`retryDelay`) fails at once and the user is told how long Google asks to wait."""
    retry_announce_after_s: float = Field(
        description="seconds from which a wait before a retry is shown in the conversation", default=5.0, ge=0
    )
    """A wait before a retry at least this long is shown in the progress indicator."""
    timeout_s: float = Field(
        description="seconds one attempt of a model call may take",
        default=60.0,
        gt=0,
        validation_alias="GEMINI_TIMEOUT",
    )
    """Seconds one attempt may take."""

    @field_validator("model", mode="before")
    @classmethod
    def _blank_is_default_model(cls, value: object) -> object:
        return DEFAULT_GEMINI_MODEL if value == "" else value

    @field_validator("api_key", "base_url", mode="before")
    @classmethod
    def _blank_is_unset(cls, value: object) -> object:
        return None if value == "" else value


class AgentSettings(BaseSettings):
    """How a chat turn runs."""

    model_config = _section()

    recursion_limit: int = Field(
        description="LangGraph steps per turn (the agent answers before hitting it)",
        default=25,
        ge=4,
        le=200,
        validation_alias="COUNTERSIGN_RECURSION_LIMIT",
    )
    """LangGraph steps per turn (the template's 25, docs/DESIGN.md). The step guard answers before it is reached."""
    context_tokens: int = Field(
        description=(
            "tokens of conversation history (estimated) sent to the model per call; older turns are folded into a "
            "running summary the model writes (`/countersign context` shows it; "
            "[agents.md](agents.md#long-conversations))"
        ),
        default=4_000,
        ge=2_000,
        le=1_000_000,
        validation_alias="COUNTERSIGN_CONTEXT_TOKENS",
    )
    """Tokens of conversation history sent to the model per call; older turns are folded into a
    running summary the model writes (`bot.turns.context.window`, whose
    `DEFAULT_CONTEXT_TOKENS` is this default: the settings cannot import it, the agents import
    the tools, which import the settings)."""
    system_prompt: str | None = Field(
        description="replaces the built-in system prompt",
        json_schema_extra={"doc_default": "the built-in prompt"},
        default=None,
        validation_alias="COUNTERSIGN_SYSTEM_PROMPT",
    )
    """Replaces the built-in system prompt when set."""
    tools_module: str | None = Field(
        description="a Python module with your own tools ([tools-and-mcp.md](tools-and-mcp.md#your-own-tools))",
        json_schema_extra={"doc_default": "none"},
        default=None,
        validation_alias="COUNTERSIGN_TOOLS_MODULE",
    )
    """Dotted name of an operator module with a `TOOLS` list (see `bot.tools.operator`)."""
    agent: AgentKind = Field(
        description="`react` or `subagents`: the agent of every channel without its own `/countersign agent` setting",
        default=AgentKind.REACT,
        validation_alias="COUNTERSIGN_AGENT",
    )
    """The agent of every channel without its own `/countersign agent` setting."""
    subagents_file: Path | None = Field(
        description="a TOML file defining the subagents ([agents.md](agents.md#subagents))",
        json_schema_extra={"doc_default": "the shipped `researcher` and `operator`"},
        default=None,
        validation_alias="COUNTERSIGN_SUBAGENTS_FILE",
    )
    """A TOML file defining the subagents (`bot.agents.subagent_specs`); unset = the default set."""

    @field_validator("agent", mode="before")
    @classmethod
    def _agent_word(cls, value: object) -> object:
        if value == "" or value is None:
            return AgentKind.REACT
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("subagents_file", "system_prompt", "tools_module", mode="before")
    @classmethod
    def _blank_is_unset(cls, value: object) -> object:
        return None if value == "" else value


class ToolSettings(BaseSettings):
    """Built-in tools: which hosts `http_request` may call, how email is sent; the MCP servers."""

    model_config = _section()

    http_allowed_hosts: Annotated[tuple[str, ...], NoDecode] = Field(
        description=(
            "comma-separated `host` or `host:port` the `http_request` tool may call; `host` alone allows its "
            "scheme's default port only (443 for https, 80 for http; `example.com` does not allow `:8443`), "
            "`host:port` that port. A name whose DNS answer is a loopback, private, link-local or other non-public "
            "address (`localhost`, an internal name, a public name rebound to `10.x`) is refused unless the list "
            "also names that address itself, e.g. `127.0.0.1:8080` (the start logs a warning for a `localhost` entry "
            "listed without it); the request connects to the address that was checked (an internationalised name is "
            "resolved, and its certificate checked, in its `xn--` form)"
        ),
        json_schema_extra={"doc_default": "none"},
        default=(),
        validation_alias="HTTP_REQUEST_ALLOWED_HOSTS",
    )
    """Lower-case `host` or `host:port` entries; empty means `http_request` may call nothing."""
    http_timeout_s: float = Field(
        description="seconds per request of `http_request`", default=10.0, gt=0, validation_alias="HTTP_REQUEST_TIMEOUT"
    )
    http_max_response_chars: int = Field(
        description="response characters of `http_request` the model sees",
        default=4000,
        ge=100,
        validation_alias="HTTP_REQUEST_MAX_RESPONSE_CHARS",
    )
    smtp_url: SecretStr | None = Field(
        description=(
            "`smtp://user:pass@host:587` (STARTTLS when offered) or `smtps://...` (implicit TLS); enables `send_email`"
        ),
        json_schema_extra={"doc_default": "none"},
        default=None,
        validation_alias="SMTP_URL",
    )
    """`smtp://user:pass@host:port` (STARTTLS when offered) or `smtps://...` (implicit TLS)."""
    smtp_from: str = Field(
        description="the sender address of `send_email`", default="countersign@localhost", validation_alias="SMTP_FROM"
    )
    smtp_timeout_s: float = Field(description="seconds one exchange with the SMTP server may take", default=15.0, gt=0)
    mcp_config: Path | None = Field(
        description=(
            "a JSON file listing your MCP servers ([tools-and-mcp.md](tools-and-mcp.md#connecting-mcp-servers))"
        ),
        json_schema_extra={"doc_default": "none"},
        default=None,
        validation_alias="COUNTERSIGN_MCP_CONFIG",
    )
    """A JSON file listing the team's MCP servers (`bot.tools.mcp.config`); unset = none."""
    mcp_timeout_s: float = Field(
        description="seconds one MCP tool call may take, unless its server's entry sets `timeout`",
        default=60.0,
        gt=0,
        le=3600,
        validation_alias="COUNTERSIGN_MCP_TIMEOUT",
    )
    """Seconds an MCP tool call may take, unless its server's entry sets its own `timeout`."""
    mcp_max_answer_mb: float = Field(
        description=(
            "megabytes (10^6 bytes) one MCP answer may have, unless its server's entry sets `maxAnswerMB`; a larger "
            "one is refused as it arrives"
        ),
        default=4.0,
        gt=0,
        le=1024,
        validation_alias="COUNTERSIGN_MCP_MAX_ANSWER_MB",
    )
    """Megabytes (10^6 bytes) one MCP answer may have, unless its server's entry sets its own
    `maxAnswerMB`; a larger answer is refused as it arrives (`bot.tools.mcp.connection`)."""
    max_tools: int = Field(
        description=(
            "tools the model is offered at most, built-in, operator and MCP ones together (Gemini refuses a whole "
            "request with more than 512); MCP tools past it are left out "
            "([tools-and-mcp.md](tools-and-mcp.md#connecting-mcp-servers)); the built-in and operator tools must "
            "fit, or the start stops"
        ),
        default=512,
        ge=1,
        le=100_000,
        validation_alias="COUNTERSIGN_MAX_TOOLS",
    )
    """Tools the model is offered at most, built-in, operator and MCP ones together (Gemini refuses a
    request declaring more than 512: `bot.tools.registry.MAX_TOOLS`); MCP tools past it are left out."""
    admin_channels: Annotated[tuple[str, ...], NoDecode] = Field(
        description=(
            "where the admins are told that an MCP server changed or added tools, as `<platform>:<workspace "
            "id>:<channel id>`, comma-separated (e.g. `slack:T0123:C0456,discord:81234:91234`); when set, only the "
            "admins of those workspaces may `/countersign mcp accept` "
            "([tools-and-mcp.md](tools-and-mcp.md#pinned-definitions))"
        ),
        json_schema_extra={"doc_default": "none: the message is only logged"},
        default=(),
        validation_alias="COUNTERSIGN_ADMIN_CHANNELS",
    )
    """Where the bot tells its admins of held MCP tools, as `<platform>:<workspace id>:<channel id>`
    entries (`slack:T0123:C0456`, `discord:<guild id>:<channel id>`), comma-separated; their
    workspaces' admins are the ones who may accept held definitions (`bot.admin.notices`).
    Empty: the message is logged, and any workspace's admins may accept."""

    @field_validator("admin_channels", mode="before")
    @classmethod
    def _split_channels(cls, value: object) -> object:
        if isinstance(value, str):
            value = tuple(entry.strip() for entry in value.split(",") if entry.strip())
        if isinstance(value, tuple | list):
            for entry in value:
                parts = str(entry).split(":")
                if len(parts) != 3 or not all(parts):
                    raise ValueError(f"{entry!r} is not <platform>:<workspace id>:<channel id>, e.g. slack:T0123:C0456")
        return value

    @field_validator("http_allowed_hosts", mode="before")
    @classmethod
    def _split_hosts(cls, value: object) -> object:
        if isinstance(value, str):
            return tuple(h.strip().lower() for h in value.split(",") if h.strip())
        return value

    @field_validator("smtp_url", "mcp_config", mode="before")
    @classmethod
    def _blank_is_unset(cls, value: object) -> object:
        return None if value == "" else value


class SlackSettings(BaseSettings):
    """Slack credentials; the adapter runs when `bot_token` and `signing_secret` are set.

    Or, to install into many workspaces (OAuth mode, docs/decisions/0019): `client_id` and
    `client_secret` with `signing_secret`, and no `bot_token`. The names are the ones slack-bolt
    itself reads (`SLACK_CLIENT_ID`, `SLACK_CLIENT_SECRET`).
    """

    model_config = _section()

    bot_token: SecretStr | None = Field(
        description="`xoxb-...` bot token (one workspace)", default=None, validation_alias="SLACK_BOT_TOKEN"
    )
    signing_secret: SecretStr | None = Field(
        description="signing secret (HTTP events)", default=None, validation_alias="SLACK_SIGNING_SECRET"
    )
    app_token: SecretStr | None = Field(
        description="`xapp-...` app-level token; when set, Socket Mode instead of HTTP",
        default=None,
        validation_alias="SLACK_APP_TOKEN",
    )
    """`xapp-...`: when set, Socket Mode is used instead of HTTP events."""
    api_url: str = Field(
        description="Slack Web API base URL override", default=DEFAULT_SLACK_API_URL, validation_alias="SLACK_API_URL"
    )
    client_id: str | None = Field(
        description=(
            "the app's client id (*Basic Information*, *App Credentials*); with `SLACK_CLIENT_SECRET` and "
            "`SLACK_SIGNING_SECRET`, and without `SLACK_BOT_TOKEN`: [install into many "
            "workspaces](slack.md#installing-into-many-workspaces)"
        ),
        default=None,
        validation_alias="SLACK_CLIENT_ID",
    )
    """The app's client id (Basic Information, App Credentials): with `client_secret`, OAuth mode."""
    client_secret: SecretStr | None = Field(
        description="the app's client secret; see `SLACK_CLIENT_ID`",
        default=None,
        validation_alias="SLACK_CLIENT_SECRET",
    )
    redirect_uri: str | None = Field(
        description="OAuth redirect URL sent to Slack, `https://YOUR-HOST/slack/oauth_redirect`",
        json_schema_extra={"doc_default": "unset: Slack uses the app's configured one"},
        default=None,
        validation_alias="SLACK_REDIRECT_URI",
    )
    """The OAuth redirect URL (`https://HOST/slack/oauth_redirect`); Slack uses the app's
    configured one when unset."""
    authorize_url: str = Field(
        description="where `/slack/install` sends the browser (override for tests)",
        default=DEFAULT_SLACK_AUTHORIZE_URL,
        validation_alias="SLACK_AUTHORIZE_URL",
    )
    """Where `/slack/install` sends the browser (Slack's; tests point it at the stand-in)."""

    @field_validator("client_id", "redirect_uri", mode="before")
    @classmethod
    def _blank_is_no_text(cls, value: object) -> object:
        return None if value == "" else value

    @field_validator("authorize_url", mode="before")
    @classmethod
    def _blank_is_slack(cls, value: object) -> object:
        return DEFAULT_SLACK_AUTHORIZE_URL if value == "" else value

    @field_validator("bot_token", "signing_secret", "app_token", "client_secret", mode="before")
    @classmethod
    def _blank_is_unset(cls, value: object) -> object:
        return None if value == "" else value

    @field_validator("api_url", mode="before")
    @classmethod
    def _blank_is_default_url(cls, value: object) -> object:
        return DEFAULT_SLACK_API_URL if value == "" else value

    @field_validator("api_url")
    @classmethod
    def _trailing_slash(cls, value: str) -> str:
        # slack_sdk joins method names onto the base URL, which must end with "/".
        return value if value.endswith("/") else value + "/"

    @property
    def oauth(self) -> bool:
        """Whether OAuth settings are given (`SLACK_CLIENT_ID` or `SLACK_CLIENT_SECRET`)."""
        return self.client_id is not None or self.client_secret is not None

    @property
    def enabled(self) -> bool:
        """Whether Slack can run.

        A bot token plus a signing secret (HTTP) or an app token; or OAuth mode: client id
        and secret plus a signing secret (see `problem`).
        """
        if self.oauth:
            return self.problem is None
        return self.bot_token is not None and (self.signing_secret is not None or self.app_token is not None)

    @property
    def problem(self) -> str | None:
        """What is wrong with the OAuth settings, in one line; None when they are fine or absent."""
        if not self.oauth:
            return None
        if self.client_id is None or self.client_secret is None:
            missing = "SLACK_CLIENT_ID" if self.client_id is None else "SLACK_CLIENT_SECRET"
            return (
                f"Slack OAuth is only half configured: set {missing} too (see README, Installing into many workspaces)"
            )
        if self.bot_token is not None:
            return (
                "set either SLACK_BOT_TOKEN (one workspace) or SLACK_CLIENT_ID and SLACK_CLIENT_SECRET (many), not both"
            )
        if self.app_token is not None:
            return "Slack OAuth installs need HTTP events: unset SLACK_APP_TOKEN (Socket Mode)"
        if self.signing_secret is None:
            return "Slack OAuth installs need SLACK_SIGNING_SECRET (HTTP events) too"
        return None


class DiscordSettings(BaseSettings):
    """Discord credentials; the adapter runs when `token` is set."""

    model_config = _section()

    token: SecretStr | None = Field(description="Discord bot token", default=None, validation_alias="DISCORD_TOKEN")
    api_url: str = Field(
        description="Discord REST base URL, with the version path; the gateway URL is asked from it",
        default=DEFAULT_DISCORD_API_URL,
        validation_alias="DISCORD_API_URL",
    )
    guild_ready_timeout_s: float = Field(
        description=(
            "seconds discord.py waits after the last server arrives before it reports ready (raise it for a bot in "
            "thousands of servers)"
        ),
        default=2.0,
        ge=0,
        le=60,
        validation_alias="DISCORD_GUILD_READY_TIMEOUT",
    )
    """Seconds discord.py waits after the last GUILD_CREATE before it reports ready (its
    `guild_ready_timeout`): at start it cannot know how many servers are still streaming in.
    A bot in thousands of servers may need more; a small one (or a test) can use less."""
    shard_count: int | None = Field(
        description='shards of the whole bot, over every machine (Discord\'s "Sharding")',
        json_schema_extra={"doc_default": "what `GET /gateway/bot` recommends (with workers: at least one per worker)"},
        default=None,
        ge=1,
        le=65536,
        validation_alias="DISCORD_SHARD_COUNT",
    )
    """How many shards the whole bot runs, over every process and machine (Discord's Gateway
    docs, "Sharding"). Unset: what `GET /gateway/bot` recommends (at least the worker count
    under `countersign run --workers`)."""
    shard_ids: Annotated[tuple[int, ...] | None, NoDecode] = Field(
        description=(
            "the shards this machine runs, comma-separated (`0,1`), each in `0..DISCORD_SHARD_COUNT-1` and listed "
            "once; needs `DISCORD_SHARD_COUNT`; `none` (no count needed): no gateway session here, only posting "
            "([operations.md](operations.md#running-several-replicas))"
        ),
        json_schema_extra={"doc_default": "all"},
        default=None,
        validation_alias="DISCORD_SHARD_IDS",
    )
    """The shards this process (or these workers) run, comma-separated (`0,1`); each within
    `0..DISCORD_SHARD_COUNT-1`, no repeats; needs `DISCORD_SHARD_COUNT`. `none` (no count
    needed): this process opens no gateway session and only posts (REST). Unset: every shard."""

    @field_validator("token", "shard_count", mode="before")
    @classmethod
    def _blank_is_unset(cls, value: object) -> object:
        return None if value == "" else value

    @field_validator("shard_ids", mode="before")
    @classmethod
    def _split_shard_ids(cls, value: object) -> object:
        if not isinstance(value, str):
            return value
        text = value.strip().lower()
        if text == "":
            return None
        if text == "none":
            return ()
        return tuple(part.strip() for part in text.split(","))

    @field_validator("shard_ids")
    @classmethod
    def _shard_ids_fit_the_count(cls, value: tuple[int, ...] | None, info: ValidationInfo) -> tuple[int, ...] | None:
        # Discord's Gateway docs, "Sharding": shard ids are 0..num_shards-1, each run once.
        if value is None or value == ():
            return value  # `none` opens no gateway session: it needs no shard count
        count = info.data.get("shard_count")
        if count is None:
            raise ValueError("needs DISCORD_SHARD_COUNT (the shard count of the whole bot)")
        outside = [i for i in value if not 0 <= i < count]
        if outside:
            raise ValueError(f"shard ids must be within 0..{count - 1} (DISCORD_SHARD_COUNT={count}), not {outside}")
        if len(set(value)) != len(value):
            raise ValueError("a shard id is listed twice")
        return tuple(sorted(value))

    @field_validator("api_url", mode="before")
    @classmethod
    def _blank_is_default_url(cls, value: object) -> object:
        return DEFAULT_DISCORD_API_URL if value == "" else value

    @property
    def enabled(self) -> bool:
        """Whether a Discord token is present."""
        return self.token is not None


class ServerSettings(BaseSettings):
    """The HTTP listeners (Slack's events; `/healthz`, `/readyz`, `/metrics`), logs, workers, start and stop."""

    model_config = _section()

    host: str = Field(description="the address `PORT` listens on", default="0.0.0.0", validation_alias="HOST")  # noqa: S104 - a server
    port: int = Field(
        description=(
            "listener for `POST /slack/events` (and `GET /slack/install`, `GET /slack/oauth_redirect` with OAuth "
            "installs), and `GET /healthz`, `GET /readyz` and `GET /metrics` unless `METRICS_PORT` is set"
        ),
        default=3000,
        ge=0,
        le=65535,
        validation_alias="PORT",
    )
    metrics_port: int | None = Field(
        description=(
            "a listener of their own for `GET /healthz`, `GET /readyz` and `GET /metrics` (then no longer on "
            "`PORT`), open from the first moment of `countersign run`, so that they can stay inside your network and "
            "answer while the start waits out an outage; must differ from `PORT`; `0` picks a free port"
        ),
        json_schema_extra={"doc_default": "unset (on `PORT`)"},
        default=None,
        ge=0,
        le=65535,
        validation_alias="METRICS_PORT",
    )
    """When set, `/healthz`, `/readyz` and `/metrics` are served on this port only (not on
    `PORT`), from the start of `countersign run`, so that they can stay inside the network and
    answer while the start waits out an outage; 0 picks a free port. Unset: on `PORT`, once
    started."""
    metrics_host: str | None = Field(
        description="the address `METRICS_PORT` listens on",
        json_schema_extra={"doc_default": "`HOST`"},
        default=None,
        validation_alias="METRICS_HOST",
    )
    """The address `METRICS_PORT` listens on; unset: `HOST`."""
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = Field(
        description="`DEBUG`, `INFO`, `WARNING`, `ERROR` or `CRITICAL`", default="INFO", validation_alias="LOG_LEVEL"
    )
    log_format: Literal["text", "json"] = Field(
        description=(
            "`text`, or `json` for one JSON object per line ([operations.md](operations.md#logs-and-tracing))"
        ),
        default="text",
        validation_alias="LOG_FORMAT",
    )
    """`text` for people, `json` for a log collector (one object per line, ids as fields)."""
    shutdown_grace_s: float = Field(
        description=(
            "seconds running turns may go on after SIGTERM before they are cut (the upkeep finishes a cut turn "
            "later); give the orchestrator's stop timeout a few seconds more"
        ),
        default=30.0,
        ge=0,
        le=3600,
        validation_alias="SHUTDOWN_GRACE_S",
    )
    """Seconds in-flight turns may run on after SIGTERM before they are cancelled (a cancelled
    turn is finished by the upkeep of a live replica or of the next start)."""
    start_retry_s: float = Field(
        description=(
            "seconds after a failed start during which `countersign run` (each worker, and their supervisor) tries "
            "again while PostgreSQL, Slack or Discord cannot be reached (waits of about 1 s doubling to 30 s, each "
            "drawn at random between half and all of that); then it exits with status 75; `0`: no second attempt"
        ),
        default=300.0,
        ge=0,
        le=86400,
        validation_alias="START_RETRY_S",
    )
    """Seconds after its start first failed for which `countersign run` (each worker, and the
    supervisor) keeps trying again while PostgreSQL, Slack or Discord cannot be reached (an
    outage, not a refusal), waiting 1 s and doubling up to 30 s between attempts; then it exits
    with status 75. 0: no second attempt (docs/decisions/0037-outages-probes-and-tokens-at-rest.md)."""
    workers: int = Field(
        description=(
            "worker processes `countersign run` starts on this machine, sharing `PORT` and the database and "
            "splitting Discord's shards (`countersign run --workers N` wins over it; "
            "[operations.md](operations.md#workers-on-one-machine))"
        ),
        default=1,
        ge=1,
        le=64,
        validation_alias="COUNTERSIGN_WORKERS",
    )
    """Worker processes `countersign run` starts on this machine (`--workers`); more than one
    runs them under a supervisor sharing the port (countersign.workers)."""
    worker_index: int | None = Field(
        description="set by the supervisor in each worker it starts (0-based); not for operators",
        json_schema_extra={"doc_default": "unset"},
        default=None,
        ge=0,
        validation_alias="COUNTERSIGN_WORKER_INDEX",
    )
    """Set by the supervisor in each worker it starts (0-based); not for operators."""
    event_loop: Literal["auto", "uvloop", "asyncio"] = Field(
        description=(
            "`auto`: uvloop where it is installed (everywhere but Windows), which costs the bot markedly less CPU "
            "per message than asyncio's own loop; `asyncio` forces the standard loop (e.g. under a debugger); "
            "`uvloop` insists on uvloop (the start stops where it is not installed)"
        ),
        default="auto",
        validation_alias="COUNTERSIGN_EVENT_LOOP",
    )
    """The event loop of every `countersign` command: `auto` is uvloop where it is installed
    (not on Windows), else asyncio's own (`countersign.event_loop`)."""

    @field_validator("metrics_port", "metrics_host", mode="before")
    @classmethod
    def _blank_is_unset(cls, value: object) -> object:
        return None if value == "" else value

    @field_validator("metrics_port")
    @classmethod
    def _apart_from_port(cls, value: int | None, info: ValidationInfo) -> int | None:
        if value is not None and value != 0 and value == info.data.get("port"):
            raise ValueError("must differ from PORT (unset it to serve the probes on PORT)")
        return value

    @property
    def probes_host(self) -> str:
        """Where `METRICS_PORT` listens: `METRICS_HOST`, else `HOST`."""
        return self.metrics_host if self.metrics_host is not None else self.host

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper_level(cls, value: object) -> object:
        return value.strip().upper() if isinstance(value, str) else value

    @field_validator("log_format", "event_loop", mode="before")
    @classmethod
    def _lower_format(cls, value: object) -> object:
        return value.strip().lower() if isinstance(value, str) else value


class RetentionSettings(BaseSettings):
    """How long stored conversations and audit rows are kept (docs/decisions/0012).

    Old checkpoints of every conversation are pruned whatever these say; these delete whole
    conversations and audit rows. Unset (or blank) keeps them forever.
    """

    model_config = _section()

    conversation_days: int | None = Field(
        description=(
            "delete a conversation after this many days without a message or a decision there "
            "([operations.md](operations.md#storage-and-retention)); a waiting card is expired first"
        ),
        json_schema_extra={"doc_default": "keep forever"},
        default=None,
        ge=1,
        le=36500,
        validation_alias="COUNTERSIGN_RETENTION_DAYS",
    )
    """Days without a message or a decision after which a conversation is deleted (its graph
    state, reviews, approvals, votes and tool runs; not its audit rows). One with a pending card
    has the card expired first; one with unfinished work waits until it is finished."""
    audit_days: int | None = Field(
        description="delete audit log rows older than this many days",
        json_schema_extra={"doc_default": "keep forever"},
        default=None,
        ge=1,
        le=36500,
        validation_alias="AUDIT_RETENTION_DAYS",
    )
    """Days after which an audit row is deleted."""

    @field_validator("conversation_days", "audit_days", mode="before")
    @classmethod
    def _blank_is_unset(cls, value: object) -> object:
        return None if value == "" else value


class EncryptionSettings(BaseSettings):
    """How the secrets the bot stores are encrypted at rest (`bot.storage.secret_box`).

    Today these are the Slack bot tokens of OAuth installs (docs/decisions/0019).
    """

    model_config = SettingsConfigDict(**_section(), hide_input_in_errors=True)

    keys: Annotated[tuple[SecretStr, ...], NoDecode] = Field(
        description=(
            "one or more Fernet keys, comma-separated: with [OAuth "
            "installs](slack.md#installing-into-many-workspaces), each workspace's Slack bot token is stored "
            "encrypted with the first, and read with any of them (to rotate, put a new key first); make one with `uv "
            'run --frozen python -c "from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())"`'
        ),
        json_schema_extra={"doc_default": "unset: tokens stored unencrypted (the start says so)"},
        default=(),
        validation_alias="COUNTERSIGN_ENCRYPTION_KEY",
    )
    """Fernet keys, comma-separated: the first encrypts, every one decrypts (to rotate, put a new
    key first and keep the old ones until a start has encrypted everything again). Unset or
    blank: secrets are stored unencrypted, and the start says so."""

    @field_validator("keys", mode="before")
    @classmethod
    def _split_keys(cls, value: object) -> object:
        if isinstance(value, str):
            return tuple(key.strip() for key in value.split(",") if key.strip())
        return value

    @field_validator("keys")
    @classmethod
    def _fernet_keys(cls, value: tuple[SecretStr, ...]) -> tuple[SecretStr, ...]:
        for key in value:
            try:
                Fernet(key.get_secret_value())
            except ValueError:
                # Said after the setting's name ("invalid setting COUNTERSIGN_ENCRYPTION_KEY: ..."):
                # not named again. The key itself is never shown (`hide_input_in_errors`).
                raise ValueError(
                    "must be Fernet keys (32 url-safe base64-encoded bytes each, comma-separated); make one with: "
                    'uv run --frozen python -c "from cryptography.fernet import Fernet; '
                    'print(Fernet.generate_key().decode())"'
                ) from None
        return value


class Settings(BaseModel):
    """Everything the bot can be told, one section per concern.

    Build it with `Settings()` at the entry point (each section reads the environment) or with
    explicit sections in tests: `Settings(database=DatabaseSettings(url=...))`.
    """

    model_config = ConfigDict(frozen=True)

    database: DatabaseSettings = Field(default_factory=DatabaseSettings)
    gemini: GeminiSettings = Field(default_factory=GeminiSettings)
    agent: AgentSettings = Field(default_factory=AgentSettings)
    tools: ToolSettings = Field(default_factory=ToolSettings)
    slack: SlackSettings = Field(default_factory=SlackSettings)
    discord: DiscordSettings = Field(default_factory=DiscordSettings)
    server: ServerSettings = Field(default_factory=ServerSettings)
    retention: RetentionSettings = Field(default_factory=RetentionSettings)
    encryption: EncryptionSettings = Field(default_factory=EncryptionSettings)

"""Opens the core for one process: settings, model, tools, database; the graph of objects is `countersign.wiring`'s."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from langchain_core.language_models import BaseChatModel

from bot.admin.notices import AdminChannels
from bot.admin.service import AdminService
from bot.agents.model import build_chat_model, call_options
from bot.agents.prompts import SYSTEM_PROMPT
from bot.agents.subagent_specs import load_subagents
from bot.ports import Platform
from bot.service import Countersign
from bot.settings import Settings, ToolSettings
from bot.storage.database import Database, open_database
from bot.tools.mcp.config import load_mcp_config, mcp_environment
from bot.tools.mcp.servers import McpServers
from bot.tools.operator import build_registry
from bot.tools.registry import ToolRegistry
from countersign.wiring import assemble_core

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Runtime:
    """The opened core.

    Attributes:
        service: the use cases adapters call.
        admin: the `/countersign` commands.
        platforms: adapters register their `Platform` here by name before traffic starts.
        database: pools and savers.
        registry: the tools.
        admin_channels: where the admins are told of held MCP tools (`countersign chat` adds
            the terminal's conversation).
        mcp: the MCP servers of `COUNTERSIGN_MCP_CONFIG`, None without it.
    """

    settings: Settings
    service: Countersign
    admin: AdminService
    platforms: dict[str, Platform]
    database: Database
    registry: ToolRegistry
    admin_channels: AdminChannels
    mcp: McpServers | None = None


def check_configuration(settings: Settings) -> None:
    """Build the model client, the tools and the subagents once, to raise what `open_runtime` would.

    For `countersign run` to report a broken tools module, subagents file or SMTP URL before
    it says there is nothing to serve (no platform, no terminal) or starts its workers.

    Raises:
        ConfigurationError: as `open_runtime` does for these.
    """
    build_chat_model(settings.gemini)
    registry = build_registry(settings.tools, settings.agent.tools_module)
    mcp_servers(settings.tools, registry)
    load_subagents(settings.agent.subagents_file, registry)


def mcp_servers(settings: ToolSettings, registry: ToolRegistry) -> McpServers | None:
    """The MCP servers of `COUNTERSIGN_MCP_CONFIG`, their tools offered by `registry`; None when it is unset.

    Nothing is connected yet (`McpServers.start`).

    Raises:
        ConfigurationError: the file cannot be used, or a server's key makes the name of one of
            `registry`'s tools (one line, `bot.tools.mcp.config`).
    """
    if settings.mcp_config is None:
        return None
    config = load_mcp_config(settings.mcp_config, mcp_environment(os.environ))
    servers = McpServers(
        config,
        fixed_names=registry.names(),
        default_timeout_s=settings.mcp_timeout_s,
        default_max_answer_mb=settings.mcp_max_answer_mb,
    )
    registry.add_source(servers)
    return servers


@asynccontextmanager
async def open_runtime(settings: Settings, *, announce: bool = True) -> AsyncIterator[Runtime]:
    """Open everything the core needs, in order, and close it in reverse.

    The model and the tools are built before the database is touched, so a missing
    `GOOGLE_API_KEY`, a broken tools module or MCP servers file fails in one line without
    starting PostgreSQL. The MCP servers (`COUNTERSIGN_MCP_CONFIG`) connect in the background
    once the service starts, the platforms registered (one that cannot be reached stops
    nothing), and are closed after the service, within what is left of `SHUTDOWN_GRACE_S`.

    Args:
        settings: everything.
        announce: log which agent, subagents and tools run (False: a start attempt after the
            first, which said so already).

    Raises:
        ConfigurationError: missing key, unloadable tools module, unusable MCP servers file, ...
        DatabaseUnreachableError: PostgreSQL cannot be reached now (an outage: `countersign run`
            tries again, `countersign.starting`).
        DatabaseUnavailableError: PostgreSQL refused us (a wrong password, a missing database).
    """
    model = build_chat_model(settings.gemini)
    registry = build_registry(settings.tools, settings.agent.tools_module)
    servers = mcp_servers(settings.tools, registry)
    subagents = load_subagents(settings.agent.subagents_file, registry)
    if announce and servers is not None:
        log.info("MCP servers: %s (connecting)", ", ".join(servers.statuses()))
    if announce and settings.tools.smtp_url is None:
        # Said here, once: `check_configuration` builds the tools before this too.
        log.info("send_email is off: SMTP_URL is not set")
    if announce:
        log.info(
            "agent for channels without a setting: %s; subagents: %s",
            settings.agent.agent.value,
            ", ".join(f"{spec.name} ({', '.join(spec.tools) or 'no tools'})" for spec in subagents),
        )

    def model_named(name: str) -> BaseChatModel:
        return build_chat_model(settings.gemini.model_copy(update={"model": name}))

    async with open_database(settings.database) as database:
        platforms: dict[str, Platform] = {}
        core = assemble_core(
            database,
            model,
            registry,
            platforms,
            recursion_limit=settings.agent.recursion_limit,
            system_prompt=settings.agent.system_prompt or SYSTEM_PROMPT,
            context_tokens=settings.agent.context_tokens,
            model_kwargs=call_options(settings.gemini),
            subagents=subagents,
            model_named=model_named,
            default_agent=settings.agent.agent,
            retention_days=settings.retention.conversation_days,
            audit_retention_days=settings.retention.audit_days,
            mcp=servers,
            admin_channels=settings.tools.admin_channels,
        )
        service, admin = core.service, core.admin
        try:
            yield Runtime(
                settings=settings,
                service=service,
                admin=admin,
                platforms=platforms,
                database=database,
                registry=registry,
                admin_channels=core.admin_channels,
                mcp=servers,
            )
        finally:
            loop = asyncio.get_running_loop()
            began = loop.time()
            await service.aclose(settings.server.shutdown_grace_s)
            if servers is not None:  # after the turns, which may still be calling them
                await servers.aclose(max(settings.server.shutdown_grace_s - (loop.time() - began), 1.0))

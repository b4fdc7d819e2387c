"""Builds the core for one process: database, tools, model, graphs, service."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from langchain_core.language_models import BaseChatModel

from bot.admin.service import AdminService
from bot.agents.model import build_chat_model, call_options
from bot.agents.pool import AgentPool
from bot.agents.prompts import SYSTEM_PROMPT
from bot.agents.review_agent import build_review_agent
from bot.approvals.policy import ConfiguredPolicy
from bot.deciding import Decider
from bot.ports import Platform
from bot.service import Countersign
from bot.settings import Settings
from bot.storage.approval_store import ApprovalStore
from bot.storage.audit_store import AuditStore
from bot.storage.config_store import ConfigStore
from bot.storage.conversation_store import ConversationStore
from bot.storage.database import Database, open_database
from bot.storage.ledger import PostgresLedger
from bot.storage.locks import ThreadLocks
from bot.tools.operator import build_registry
from bot.tools.registry import ToolRegistry
from bot.turns import TurnRunner


@dataclass(slots=True)
class Runtime:
    """The opened core.

    Attributes:
        service: the use cases adapters call.
        admin: the `/countersign` commands.
        platforms: adapters register their `Platform` here by name before traffic starts.
        database: pools and savers.
        registry: the tools.
    """

    settings: Settings
    service: Countersign
    admin: AdminService
    platforms: dict[str, Platform]
    database: Database
    registry: ToolRegistry


@dataclass(slots=True)
class Core:
    """The core's parts on one database: what `open_runtime` and the test harness share."""

    service: Countersign
    admin: AdminService
    approvals: ApprovalStore
    audit: AuditStore
    config: ConfigStore
    ledger: PostgresLedger
    agents: AgentPool


def assemble_core(
    database: Database,
    model: BaseChatModel,
    registry: ToolRegistry,
    platforms: dict[str, Platform],
    *,
    recursion_limit: int,
    system_prompt: str = SYSTEM_PROMPT,
    history_window: int = 60,
    model_kwargs: dict[str, Any] | None = None,
) -> Core:
    """Wire stores, policy, one review agent per checkpoint saver, runner, decider and service.

    Args:
        database: open pools and savers.
        model: the chat model (Gemini in production, a scripted one in tests).
        registry: the tools.
        platforms: adapters' `Platform`s by name; may be filled after this returns, before
            traffic starts.
        recursion_limit: LangGraph steps per turn (seed 000).
        system_prompt: prepended to every model call.
        history_window: most stored messages sent per model call.
        model_kwargs: call options bound with the tools (Gemini's retries, ...).
    """
    audit = AuditStore(database.pool)
    approvals = ApprovalStore(database.pool, audit)
    config = ConfigStore(database.pool, audit)
    ledger = PostgresLedger(database.pool, approvals)
    policy = ConfiguredPolicy(registry, config.load, config.denied_in_any_workspace)
    agents = AgentPool(
        [
            build_review_agent(
                model=model,
                tools=registry.tools(),
                policy=policy,
                checkpointer=saver,
                ledger=ledger,
                system_prompt=system_prompt,
                history_window=history_window,
                model_kwargs=model_kwargs,
            )
            for saver in database.savers
        ]
    )
    runner = TurnRunner(
        agents=agents,
        approvals=approvals,
        platforms=platforms,
        tools={tool.name: tool for tool in registry.tools()},
        recursion_limit=recursion_limit,
        config=config,
    )
    decider = Decider(
        approvals=approvals,
        audit=audit,
        config=config,
        registry=registry,
        directory_for=lambda name: platforms[name],
    )
    admin = AdminService(config=config, audit=audit, registry=registry, directory_for=lambda name: platforms[name])
    service = Countersign(
        runner=runner,
        decider=decider,
        approvals=approvals,
        conversations=ConversationStore(database.pool),
        locks=ThreadLocks(database.lock_pool),
    )
    return Core(
        service=service, admin=admin, approvals=approvals, audit=audit, config=config, ledger=ledger, agents=agents
    )


@asynccontextmanager
async def open_runtime(settings: Settings) -> AsyncIterator[Runtime]:
    """Open everything the core needs, in order, and close it in reverse.

    The model and the tools are built before the database is touched, so a missing
    `GOOGLE_API_KEY` or a broken tools module fails in one line without starting PostgreSQL.

    Raises:
        ConfigurationError: missing key, unloadable tools module, ...
        DatabaseUnavailableError: PostgreSQL cannot be reached.
    """
    model = build_chat_model(settings.gemini)
    registry = build_registry(settings.tools, settings.agent.tools_module)
    async with open_database(settings.database) as database:
        platforms: dict[str, Platform] = {}
        core = assemble_core(
            database,
            model,
            registry,
            platforms,
            recursion_limit=settings.agent.recursion_limit,
            system_prompt=settings.agent.system_prompt or SYSTEM_PROMPT,
            history_window=settings.agent.history_window,
            model_kwargs=call_options(settings.gemini),
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
            )
        finally:
            await service.aclose(settings.server.shutdown_grace_s)

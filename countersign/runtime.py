"""Builds the core for one process: database, tools, model, graphs, service."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any

from langchain_core.language_models import BaseChatModel

from bot.admin.notices import AdminChannels, channel_ref
from bot.admin.service import AdminService
from bot.agents.model import build_chat_model, call_options
from bot.agents.pool import AgentPool
from bot.agents.prompts import SYSTEM_PROMPT
from bot.agents.review_agent import build_review_agent
from bot.agents.subagent_specs import SubagentSpec, default_subagents, load_subagents
from bot.agents.supervisor import build_subagent, build_supervisor_agent
from bot.audit.store import AuditStore
from bot.base.agent_kind import AgentKind
from bot.base.tasks import TaskTracker
from bot.policy.dm_rules import SharedServerRules
from bot.policy.review import ConfiguredPolicy
from bot.policy.store import ConfigStore
from bot.ports import Platform
from bot.reviews.cards import CardDesk
from bot.reviews.decide import Decider
from bot.reviews.escalation.sweep import EscalationSweeper
from bot.reviews.store import ApprovalStore
from bot.reviews.trust.check import TrustGate
from bot.reviews.trust.store import TrustStore
from bot.service import Countersign
from bot.settings import Settings, ToolSettings
from bot.storage.database import Database, open_database
from bot.storage.locks import ThreadLocks
from bot.tools.ledger.postgres import PostgresLedger
from bot.tools.mcp.config import load_mcp_config, mcp_environment
from bot.tools.mcp.elicitation.desk import QuestionDesk
from bot.tools.mcp.elicitation.store import PostgresQuestionStore
from bot.tools.mcp.pins import PostgresPinStore
from bot.tools.mcp.servers import McpServers
from bot.tools.operator import build_registry
from bot.tools.registry import ToolRegistry
from bot.turns.context.keeper import ContextKeeper
from bot.turns.context.window import DEFAULT_CONTEXT_TOKENS
from bot.turns.conversations import PRUNE_EVERY_RUNS
from bot.turns.conversations_postgres import PostgresConversationStore
from bot.turns.inbox_postgres import PostgresInbox
from bot.turns.runner import TurnRunner
from bot.turns.stop.postgres import PostgresStopStore
from bot.turns.stop.stopper import TurnStopper
from bot.turns.stop.watch import StopWatch
from bot.upkeep.retention import Housekeeping
from bot.upkeep.retention_postgres import PostgresRetentionStore
from bot.upkeep.unfinished_postgres import PostgresUpkeepStore

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
    grants: TrustStore
    admin_channels: AdminChannels


def assemble_core(
    database: Database,
    model: BaseChatModel,
    registry: ToolRegistry,
    platforms: dict[str, Platform],
    *,
    recursion_limit: int,
    system_prompt: str = SYSTEM_PROMPT,
    context_tokens: int = DEFAULT_CONTEXT_TOKENS,
    model_kwargs: dict[str, Any] | None = None,
    subagents: Sequence[SubagentSpec] | None = None,
    model_named: Callable[[str], BaseChatModel] | None = None,
    default_agent: AgentKind = AgentKind.REACT,
    retention_days: int | None = None,
    audit_retention_days: int | None = None,
    prune_every_runs: int = PRUNE_EVERY_RUNS,
    mcp: McpServers | None = None,
    admin_channels: Sequence[str] = (),
) -> Core:
    """Wire stores, policy, both agents per checkpoint saver, runner, decider and service.

    Args:
        database: open pools and savers.
        model: the chat model (Gemini in production, a scripted one in tests); the ReAct
            agent's, the supervisor's, and every subagent's without a model of its own.
        registry: the tools.
        platforms: adapters' `Platform`s by name; may be filled after this returns, before
            traffic starts.
        recursion_limit: LangGraph steps per turn (docs/DESIGN.md, Agents).
        system_prompt: prepended to every model call of the ReAct agent and the supervisor.
        context_tokens: tokens of history sent per model call (`bot.turns.context.window`);
            `/countersign context` shows each conversation against it.
        model_kwargs: call options bound with the tools (Gemini's retries, ...).
        subagents: the checked subagent definitions; None = the default set.
        model_named: builds the model a subagent names (`SubagentSpec.model`); None = every
            subagent uses `model`.
        default_agent: the agent of channels without their own setting.
        retention_days: delete conversations idle this many days (`COUNTERSIGN_RETENTION_DAYS`;
            None keeps them).
        audit_retention_days: delete audit rows older than this many days
            (`AUDIT_RETENTION_DAYS`; None keeps them).
        prune_every_runs: a conversation's old checkpoints are pruned every this many runs
            (`bot.turns.conversations.PRUNE_EVERY_RUNS`; tests use 1).
        mcp: the MCP servers (their tools already a source of `registry`): started with the
            service, their definitions pinned in this database, `/countersign mcp` on them.
        admin_channels: `COUNTERSIGN_ADMIN_CHANNELS` entries (`<platform>:<workspace>:<channel>`).
    """
    audit = AuditStore(database.pool)
    approvals = ApprovalStore(database.pool, audit)
    config = ConfigStore(database.pool, audit)
    channels = AdminChannels(platforms, [channel_ref(entry) for entry in admin_channels], config.load)
    tasks = TaskTracker()
    cards = CardDesk(approvals, config, platforms, tasks, key_order=registry.argument_order, origin_of=registry.origin)
    ledger = PostgresLedger(database.pool, approvals, on_marked=cards.redraw, audit=audit)
    dms = SharedServerRules(config=config, registry=registry, directory_for=lambda name: platforms[name])
    policy = ConfiguredPolicy(registry, config.load, dms)
    grants = TrustStore(database.pool, audit)
    trust = TrustGate(
        grants=grants, config=config, registry=registry, directory_for=lambda name: platforms[name], dms=dms
    )
    tools = registry.view()
    specs = default_subagents(registry) if subagents is None else subagents
    compiled = [
        build_subagent(
            spec,
            model=model_named(spec.model) if spec.model and model_named else model,
            tools=registry.view(spec.tools),
            policy=policy,
            ledger=ledger,
            context_tokens=context_tokens,
            model_kwargs=model_kwargs,
            trust=trust,
        )
        for spec in specs
    ]
    agents = AgentPool(
        {
            AgentKind.REACT: [
                build_review_agent(
                    model=model,
                    tools=tools,
                    policy=policy,
                    checkpointer=saver,
                    ledger=ledger,
                    system_prompt=system_prompt,
                    context_tokens=context_tokens,
                    model_kwargs=model_kwargs,
                    trust=trust,
                )
                for saver in database.savers
            ],
            AgentKind.SUBAGENTS: [
                build_supervisor_agent(
                    model=model,
                    subagents=compiled,
                    checkpointer=saver,
                    system_prompt=system_prompt,
                    context_tokens=context_tokens,
                    model_kwargs=model_kwargs,
                )
                for saver in database.savers
            ],
        }
    )
    conversations = PostgresConversationStore(database.pool, prune_every_runs=prune_every_runs)
    inbox = PostgresInbox(database.pool)
    locks = ThreadLocks(database.lock_pool)
    stop_store = PostgresStopStore(database.pool, approvals, audit)
    stop_watch = StopWatch(stop_store)
    runner = TurnRunner(
        agents=agents,
        approvals=approvals,
        conversations=conversations,
        cards=cards,
        tools=tools,
        recursion_limit=recursion_limit,
        config=config,
        stops=stop_watch,
        default_agent=default_agent,
        questions=QuestionDesk(PostgresQuestionStore(database.pool), audit, config, platforms),
    )
    stopper = TurnStopper(
        store=stop_store, watch=stop_watch, config=config, audit=audit, directory_for=lambda name: platforms[name]
    )
    decider = Decider(
        approvals=approvals,
        audit=audit,
        config=config,
        registry=registry,
        directory_for=lambda name: platforms[name],
        subagent_tools={spec.name: frozenset(spec.tools) for spec in specs},
        viewer_for=lambda name: platforms[name],
        dms=dms,
    )
    admin = AdminService(
        config=config,
        audit=audit,
        grants=grants,
        registry=registry,
        directory_for=lambda name: platforms[name],
        default_agent=default_agent,
        subagents=tuple(spec.name for spec in specs),
        contexts=ContextKeeper(
            runner=runner,
            approvals=approvals,
            conversations=conversations,
            inbox=inbox,
            locks=locks,
            budget_tokens=context_tokens,
        ),
        stops=stopper,
        mcp=mcp,
        admin_channels=channels,
    )
    housekeeping = Housekeeping(
        PostgresRetentionStore(database.pool, database.pruning_saver),
        locks,
        retention_days=retention_days,
        audit_retention_days=audit_retention_days,
    )
    service = Countersign(
        tasks=tasks,
        platforms=platforms,
        runner=runner,
        decider=decider,
        approvals=approvals,
        conversations=conversations,
        inbox=inbox,
        upkeep_store=PostgresUpkeepStore(database.pool),
        locks=locks,
        stopper=stopper,
        escalation=EscalationSweeper(approvals, config, cards, platforms=platforms),
        housekeeping=housekeeping,
        also_start=(
            ()
            if mcp is None
            else (partial(mcp.start, pins=PostgresPinStore(database.pool, audit), on_notice=channels.tools_held),)
        ),
    )
    return Core(
        service=service,
        admin=admin,
        approvals=approvals,
        audit=audit,
        config=config,
        ledger=ledger,
        agents=agents,
        grants=grants,
        admin_channels=channels,
    )


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

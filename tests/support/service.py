"""The core service wired for integration tests: real PostgreSQL, a scripted model."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from langchain_core.language_models import BaseChatModel

from bot.admin.notices import AdminChannels
from bot.admin.service import AdminService
from bot.agents.pool import AgentPool
from bot.agents.review_agent import ReviewAgent
from bot.agents.subagent_specs import SubagentSpec
from bot.audit.store import AuditStore
from bot.base.agent_kind import AgentKind
from bot.base.conversation import Actor, ConversationRef, IncomingMessage
from bot.policy.store import ConfigStore
from bot.reviews.postgres import PostgresApprovalStore
from bot.reviews.trust.store import TrustStore
from bot.service import Countersign
from bot.settings import DatabaseSettings
from bot.storage.database import Database, open_database
from bot.tools.ledger.postgres import PostgresLedger
from bot.tools.mcp.servers import McpServers
from bot.tools.registry import ToolRegistry
from bot.turns.context.window import DEFAULT_CONTEXT_TOKENS
from bot.turns.conversations import PRUNE_EVERY_RUNS
from bot.turns.messages import Messages
from countersign.wiring import assemble_core
from tests.support.recording_platform import RecordingPlatform

WORKSPACE = "W1"


@dataclass
class Harness:
    service: Countersign
    approvals: PostgresApprovalStore
    audit: AuditStore
    database: Database
    platform: RecordingPlatform
    agents: AgentPool
    ledger: PostgresLedger
    config: ConfigStore
    admin: AdminService
    """The `/countersign` use case as `countersign run` wires it (default agent, subagent names)."""
    grants: TrustStore | None = None
    """The trust grants table."""
    admin_channels: AdminChannels | None = None
    """Where the admins are told of held MCP tools."""
    messages: Messages | None = None
    """Message handling and the tending of unfinished work (what the upkeep calls)."""

    def graph(self, conversation: ConversationRef, kind: AgentKind = AgentKind.REACT) -> ReviewAgent:
        return self.agents.for_thread(conversation.thread_id, kind)


def conversation(channel: str = "C1", thread: str | None = None) -> ConversationRef:
    return ConversationRef(platform="test", workspace_id=WORKSPACE, channel_id=channel, thread=thread)


def actor(user: str = "alice", *, is_admin: bool | None = None) -> Actor:
    return Actor(platform="test", workspace_id=WORKSPACE, user_id=user, display_name=user, is_admin=is_admin)


def message(
    text: str,
    *,
    user: str = "alice",
    conv: ConversationRef | None = None,
    message_id: str | None = None,
) -> IncomingMessage:
    return IncomingMessage(actor=actor(user), conversation=conv or conversation(), text=text, message_id=message_id)


@asynccontextmanager
async def open_service(
    db_url: str,
    model: BaseChatModel,
    registry: ToolRegistry,
    platform: RecordingPlatform | None = None,
    *,
    recursion_limit: int = 25,
    pool_size: int = 8,
    prepared_statements: bool = True,
    subagents: Sequence[SubagentSpec] | None = None,
    models: Mapping[str, BaseChatModel] | None = None,
    default_agent: AgentKind = AgentKind.REACT,
    model_kwargs: dict[str, Any] | None = None,
    context_tokens: int = DEFAULT_CONTEXT_TOKENS,
    retention_days: int | None = None,
    audit_retention_days: int | None = None,
    prune_every_runs: int = PRUNE_EVERY_RUNS,
    mcp: McpServers | None = None,
    admin_channels: Sequence[str] = (),
) -> AsyncIterator[Harness]:
    """The core as `countersign run` wires it, on `db_url`, with `model` as every agent's model.

    `models` maps the model names subagents ask for (`SubagentSpec.model`) to their models;
    `model_kwargs` are the call options bound with the tools (`bot.agents.model.call_options`);
    `retention_days` and `audit_retention_days` are `COUNTERSIGN_RETENTION_DAYS` and
    `AUDIT_RETENTION_DAYS`; `prune_every_runs` is how often a conversation is due for pruning
    (1: after every run). `mcp` are MCP servers (a source of `registry`) started with the
    service on this database's pins and closed after it; `admin_channels` are
    `COUNTERSIGN_ADMIN_CHANNELS` entries.
    """
    platform = platform or RecordingPlatform()
    settings = DatabaseSettings(url=db_url, pool_max_size=pool_size, prepared_statements=prepared_statements)
    async with open_database(settings, run_migrations=False) as database:
        core = assemble_core(
            database,
            model,
            registry,
            {platform.name: platform},
            recursion_limit=recursion_limit,
            subagents=subagents,
            model_named=(lambda name: models[name]) if models is not None else None,
            default_agent=default_agent,
            model_kwargs=model_kwargs,
            context_tokens=context_tokens,
            retention_days=retention_days,
            audit_retention_days=audit_retention_days,
            prune_every_runs=prune_every_runs,
            mcp=mcp,
            admin_channels=admin_channels,
        )
        service = core.service
        service.start()
        try:
            yield Harness(
                service,
                core.approvals,
                core.audit,
                database,
                platform,
                core.agents,
                core.ledger,
                core.config,
                core.admin,
                core.grants,
                core.admin_channels,
                core.messages,
            )
        finally:
            await service.aclose(5)
            if mcp is not None:
                await mcp.aclose(5)

"""The composition root: builds the core's whole graph of objects, once, on one database.

Every dependency is a constructor argument; where construction has a cycle (what posts a card
with an expiry is built before the sweeper that expires it, whose follow-up needs the runner),
the publisher gets a `bot.base.events.Subscribers` and the sweeper subscribes here
(docs/decisions/0062-one-composition-root.md). `countersign.runtime.open_runtime` and the test
harness (`tests.support.service`) both build the core through `assemble_core`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from langchain_core.language_models import BaseChatModel

from bot.admin.notices import AdminChannels, channel_ref
from bot.admin.service import AdminService
from bot.agents.pool import AgentPool
from bot.agents.prompts import SYSTEM_PROMPT
from bot.agents.review_agent import build_review_agent
from bot.agents.subagent_specs import SubagentSpec, default_subagents
from bot.agents.supervisor import build_subagent, build_supervisor_agent
from bot.audit.postgres import PostgresAuditStore
from bot.audit.store import AuditStore
from bot.base.agent_kind import AgentKind
from bot.base.events import ApprovalsExpiring, QuestionsExpiring, Subscribers
from bot.base.tasks import TaskTracker
from bot.policy.dm_rules import SharedServerRules
from bot.policy.postgres import PostgresConfigStore
from bot.policy.review import ConfiguredPolicy
from bot.policy.store import ConfigStore
from bot.ports import Platform
from bot.reviews.cards import CardDesk
from bot.reviews.decide import Decider
from bot.reviews.escalation.sweep import EscalationSweeper
from bot.reviews.expiry import ExpirySweeper
from bot.reviews.postgres import PostgresApprovalStore
from bot.reviews.trust.check import TrustGate
from bot.reviews.trust.postgres import PostgresTrustStore
from bot.reviews.trust.store import TrustStore
from bot.service import Countersign
from bot.storage.database import Database
from bot.storage.locks import ThreadLocks
from bot.tools.ledger.postgres import PostgresLedger
from bot.tools.mcp.elicitation.desk import QuestionDesk
from bot.tools.mcp.elicitation.expiry import QuestionExpiry
from bot.tools.mcp.elicitation.store import PostgresQuestionStore
from bot.tools.mcp.pins import PostgresPinStore
from bot.tools.mcp.servers import McpServers
from bot.tools.registry import ToolRegistry
from bot.turns.context.keeper import ContextKeeper
from bot.turns.context.window import DEFAULT_CONTEXT_TOKENS
from bot.turns.conversations import PRUNE_EVERY_RUNS
from bot.turns.conversations_postgres import PostgresConversationStore
from bot.turns.inbox_postgres import PostgresInbox
from bot.turns.messages import Messages
from bot.turns.resumes import Resumes
from bot.turns.runner import TurnRunner
from bot.turns.stop.postgres import PostgresStopStore
from bot.turns.stop.stopper import TurnStopper
from bot.turns.stop.watch import StopWatch
from bot.upkeep.retention import Housekeeping
from bot.upkeep.retention_postgres import PostgresRetentionStore
from bot.upkeep.unfinished_postgres import PostgresUpkeepStore
from bot.upkeep.unfinished_work import Upkeep


@dataclass(slots=True)
class Core:
    """The core's parts on one database: what `open_runtime` and the test harness share."""

    service: Countersign
    messages: Messages
    admin: AdminService
    approvals: PostgresApprovalStore
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
    audit = PostgresAuditStore(database.pool)
    approvals = PostgresApprovalStore(database.pool, audit)
    config = PostgresConfigStore(database.pool, audit)
    channels = AdminChannels(platforms, [channel_ref(entry) for entry in admin_channels], config.load)
    tasks = TaskTracker()
    cards = CardDesk(approvals, config, platforms, tasks, key_order=registry.argument_order, origin_of=registry.origin)
    ledger = PostgresLedger(database.pool, approvals, on_marked=cards.redraw, audit=audit)
    dms = SharedServerRules(config=config, registry=registry, directory_for=lambda name: platforms[name])
    policy = ConfiguredPolicy(registry, config.load, dms)
    grants = PostgresTrustStore(database.pool, audit)
    trust = TrustGate(
        grants=grants, config=config, registry=registry, directory_for=lambda name: platforms[name], dms=dms
    )
    tools = registry.view()
    specs = default_subagents(registry) if subagents is None else subagents
    agents = _agents(
        database,
        model,
        registry,
        specs,
        model_named=model_named,
        policy=policy,
        ledger=ledger,
        trust=trust,
        system_prompt=system_prompt,
        context_tokens=context_tokens,
        model_kwargs=model_kwargs,
    )
    conversations = PostgresConversationStore(database.pool, prune_every_runs=prune_every_runs)
    inbox = PostgresInbox(database.pool)
    locks = ThreadLocks(database.lock_pool)
    upkeep_store = PostgresUpkeepStore(database.pool)
    stop_store = PostgresStopStore(database.pool, approvals, audit)
    stop_watch = StopWatch(stop_store)
    # The two sweepers that expire things are built after what posts them (the resume they
    # follow with needs the runner): what posts them tells them through an event.
    approvals_expiring: Subscribers[ApprovalsExpiring] = Subscribers()
    questions_expiring: Subscribers[QuestionsExpiring] = Subscribers()
    questions = QuestionDesk(
        PostgresQuestionStore(database.pool), audit, config, platforms, expiring=questions_expiring
    )
    escalation = EscalationSweeper(approvals, config, cards, platforms=platforms)
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
        questions=questions,
        expiring=approvals_expiring,
        on_new_escalation=escalation.wake,
    )
    resumes = Resumes(runner=runner, locks=locks, tasks=tasks, questions=questions)
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
    expiry = ExpirySweeper(approvals, resumes.after_expiry, platforms=platforms)
    approvals_expiring.subscribe(lambda _: expiry.wake())
    question_expiry = QuestionExpiry(questions, resumes.after_question, platforms=platforms)
    questions_expiring.subscribe(lambda _: question_expiry.wake())
    stopper = TurnStopper(
        store=stop_store,
        watch=stop_watch,
        config=config,
        audit=audit,
        directory_for=lambda name: platforms[name],
        on_stopped=resumes.after_stop,
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
        # Retention expires idle conversations' cards through the usual expiry path.
        on_cards_expiring=expiry.wake,
    )
    messages = Messages(
        runner=runner, conversations=conversations, inbox=inbox, upkeep_store=upkeep_store, locks=locks, tasks=tasks
    )
    upkeep = Upkeep(upkeep_store, inbox, messages.tend, tasks, platforms=platforms, housekeeping=housekeeping)
    service = Countersign(
        messages=messages,
        resumes=resumes,
        runner=runner,
        decider=decider,
        approvals=approvals,
        conversations=conversations,
        config=config,
        stopper=stopper,
        questions=questions,
        expiry=expiry,
        question_expiry=question_expiry,
        escalation=escalation,
        upkeep=upkeep,
        tasks=tasks,
        platforms=platforms,
        housekeeping=housekeeping,
        also_start=(
            ()
            if mcp is None
            else (partial(mcp.start, pins=PostgresPinStore(database.pool, audit), on_notice=channels.tools_held),)
        ),
    )
    return Core(
        service=service,
        messages=messages,
        admin=admin,
        approvals=approvals,
        audit=audit,
        config=config,
        ledger=ledger,
        agents=agents,
        grants=grants,
        admin_channels=channels,
    )


def _agents(
    database: Database,
    model: BaseChatModel,
    registry: ToolRegistry,
    specs: Sequence[SubagentSpec],
    *,
    model_named: Callable[[str], BaseChatModel] | None,
    policy: ConfiguredPolicy,
    ledger: PostgresLedger,
    trust: TrustGate,
    system_prompt: str,
    context_tokens: int,
    model_kwargs: dict[str, Any] | None,
) -> AgentPool:
    """Both agents, compiled once per checkpoint saver of `database` (see `assemble_core`)."""
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
    return AgentPool(
        {
            AgentKind.REACT: [
                build_review_agent(
                    model=model,
                    tools=registry.view(),
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

"""Whether a live trust grant covers a call exactly, judged at the moment of the call (docs/decisions/0022).

Asked by the graph for a call the policy sends to review, before its card would open
(`llm_call`), and again just before the call runs (`tool_node`); the ledger then claims the run
under the grant, atomically with the grant still being live (`bot.tools.ledger.postgres`). A grant
covers a call only when all of this holds now:

- the grant is live (not expired, not revoked), for the same conversation (thread_id), tool
  and requester, and the call's canonical arguments give the values it binds
  (`bot.reviews.trust.grants.trust_key`: every argument, or those the setting named), and for an MCP
  tool its definition is the one the grant's card was made under (`key_digest`: a definition
  accepted since covers nothing the old grant approved);
- a trust setting for the tool is in force in the conversation's channel and still allows the
  grant (`still_fits`: trust never widens when an admin narrows or removes the setting);
- the grant's approver could still approve this call alone under the current policy: the
  tool is not denied, it needs one approval (the current quorum), and the approver is still
  permitted (approver lists, admins, self-approval off for a requester who granted to
  themselves: `bot.reviews.authorization.ensure_may_decide`, with their standing now); in a
  Discord DM, the call is not refused by the servers its requester shares with the bot either
  (`bot.policy.dm_rules`).

Anything else, or any failure while checking, brings a card: the answer is never an error.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from langchain_core.messages import ToolCall

from bot.base.conversation import DM_WORKSPACE
from bot.base.errors import InvalidArgumentsError, NotPermittedError
from bot.base.mode import Mode
from bot.policy.review import DmRules, PolicyContext, effective_mode, rule_here
from bot.policy.store import ConfigStore
from bot.reviews.authorization import MemberDirectory, ensure_may_decide
from bot.reviews.trust.grants import TrustGrant, key_digest, still_fits
from bot.reviews.trust.store import TrustStore
from bot.tools.canonical import canonical_args
from bot.tools.registry import ToolRegistry, definition_of

log = logging.getLogger(__name__)


class TrustGate:
    """The trust check of `bot.reviews.trust.grants.TrustCheck`, over PostgreSQL and the platforms.

    Args:
        grants: the trust grants table.
        config: the admin configuration (trust settings, policy, quorum, approvers).
        registry: the tools (their built-in policy and canonical forms).
        directory_for: the platform directory by platform name (who the approver is now).
        dms: in a Discord DM, what the servers its requester shares with the bot require
            (`bot.policy.dm_rules`): a call refused there, or needing someone else's decision, is
            covered by no grant; None: a DM follows the defaults alone.
    """

    def __init__(
        self,
        *,
        grants: TrustStore,
        config: ConfigStore,
        registry: ToolRegistry,
        directory_for: Callable[[str], MemberDirectory],
        dms: DmRules | None = None,
    ) -> None:
        self._grants = grants
        self._dms = dms
        self._config = config
        self._registry = registry
        self._directory_for = directory_for

    async def covering(self, call: ToolCall, context: PolicyContext) -> TrustGrant | None:
        """The live grant that covers `call` exactly now (see the module docstring), else None.

        Never raises: a failure is logged and counts as "not covered" (a card).
        """
        if not context.requester_id or not context.workspace_id:
            return None
        try:
            return await self._covering(call, context)
        except Exception:
            log.exception("trust check for %s failed; a card decides (thread_id=%s)", call["name"], context.thread_id)
            return None

    async def _covering(self, call: ToolCall, context: PolicyContext) -> TrustGrant | None:
        name = call["name"]
        spec = self._registry.get(name)
        if spec is None:
            return None
        try:
            args = canonical_args(spec.tool, call.get("args") or {})
        except InvalidArgumentsError:
            return None  # the tool would refuse them: nothing to trust
        definition = definition_of(spec.tool)  # a grant covers only the definition it was made under
        # The grants first: one indexed read, and for most calls the end of it.
        grants, now = await self._grants.live_for(context.thread_id, name, context.requester_id)
        if not grants:
            return None
        config = await self._config.load(context.platform, context.workspace_id)
        setting = config.trust_for(name, context.channel_id)
        rule = rule_here(config, spec, name, context.channel_id)
        mode = effective_mode(spec, rule, args, where=context.thread_id)
        if context.workspace_id == DM_WORKSPACE and self._dms is not None:
            # As `ConfiguredPolicy`: a DM is never laxer than its requester's servers.
            mode = (await self._dms.ruling(name, args, context, mode)).mode
        if mode is Mode.DENY or (mode is Mode.REVIEW and config.quorum(name) != 1):
            return None  # no single approval could let it run now
        directory = self._directory_for(context.platform)
        for grant in grants:
            if not still_fits(grant, setting, now):
                continue
            if key_digest(args, grant.matching, definition) != grant.matched_digest:
                continue
            approver = await directory.member(context.workspace_id, grant.granted_by_id)
            if approver is None:
                continue
            try:
                await ensure_may_decide(
                    approver,
                    requester_id=context.requester_id,
                    workspace_id=context.workspace_id,
                    tool_name=name,
                    decision_type="approve",
                    config=config,
                    directory=directory,
                )
            except NotPermittedError as exc:
                log.info(
                    "trust %s not used: its approver may no longer approve %s (%s) (thread_id=%s)",
                    grant.id,
                    name,
                    exc.reason,
                    context.thread_id,
                )
                continue
            return grant
        return None

"""A `Platform` for service tests: keeps what the core asked it to show, in memory.

It is a complete implementation of the port (like the console one), not a mock: nothing the
service's behaviour depends on is faked.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from bot.base.conversation import Actor, ConversationRef
from bot.ports import Activity, ApprovalCard, CardTarget, Notice
from bot.reviews.shown import Arguments, Shortfall, Unshowable
from bot.tools.mcp.elicitation.store import QuestionRecord

_ids = itertools.count(1)


@dataclass
class RecordingPlatform:
    name: str = "test"
    admins: set[str] = field(default_factory=set)
    answers: list[tuple[str, str]] = field(default_factory=list)
    cards: dict[str, ApprovalCard] = field(default_factory=dict)
    updates: list[ApprovalCard] = field(default_factory=list)
    notices: list[tuple[str, Notice, str | None]] = field(default_factory=list)
    progress: list[str | None] = field(default_factory=list)
    activities: list[tuple[str, Activity]] = field(default_factory=list)
    """Every progress update, with the thread id it was shown in."""

    async def post_answer(self, conversation: ConversationRef, text: str) -> None:
        self.answers.append((conversation.thread_id, text))

    targets: dict[str, CardTarget] = field(default_factory=dict)

    async def post_card(self, target: CardTarget, card: ApprovalCard) -> str:
        ref = f"card-{next(_ids)}"
        self.cards[ref] = card
        self.targets[ref] = target
        return ref

    async def update_card(self, conversation: ConversationRef, card_ref: str, card: ApprovalCard) -> None:
        self.cards[card_ref] = card
        self.updates.append(card)

    questions: dict[str, QuestionRecord] = field(default_factory=dict)
    """MCP servers' questions shown, by id (`post_question`); redrawn ones as last redrawn."""
    asks_questions: bool = True
    """False: like a platform that cannot take answers (`post_question` returns None)."""

    async def post_question(self, conversation: ConversationRef, question: QuestionRecord) -> str | None:
        self.questions[question.id] = question
        return question.id if self.asks_questions else None

    async def update_question(self, conversation: ConversationRef, ref: str, question: QuestionRecord) -> None:
        self.questions[question.id] = question

    unshowable_over: int | None = None
    """Arguments longer than this (`Arguments.text`) cannot be shown here (None: all can)."""

    def unshowable(self, arguments: Arguments) -> Unshowable | None:
        size = len(arguments.text())
        if self.unshowable_over is None or size <= self.unshowable_over:
            return None
        return Unshowable(platform=self.name, shortfall=Shortfall.CHARACTERS, size=size, limit=self.unshowable_over)

    async def notify(self, conversation: ConversationRef, notice: Notice, *, recipient: Actor | None) -> None:
        self.notices.append((conversation.thread_id, notice, recipient.user_id if recipient else None))

    @asynccontextmanager
    async def working(self, conversation: ConversationRef, anchor: str | None) -> AsyncIterator[_Progress]:
        self.progress.append(anchor)
        yield _Progress(self, conversation.thread_id)

    groups: dict[str, set[str]] = field(default_factory=dict)

    async def is_admin(self, actor: Actor) -> bool:
        return actor.user_id in self.admins

    gone: set[str] = field(default_factory=set)
    """Users who are no longer members (`member` answers None)."""
    servers: dict[str, set[str]] = field(default_factory=dict)
    """The members of each workspace listed here (`member` answers None for anyone else there);
    everyone is a member of a workspace not listed."""
    unreachable: set[str] = field(default_factory=set)
    """Workspaces whose member lookups fail (`member` raises, as a platform outage would)."""
    lookups: list[tuple[str, str]] = field(default_factory=list)
    """Every `member` lookup, as `(workspace_id, user_id)`."""

    async def member(self, workspace_id: str, user_id: str) -> Actor | None:
        self.lookups.append((workspace_id, user_id))
        if workspace_id in self.unreachable:
            raise ConnectionError(f"cannot reach workspace {workspace_id}")
        if user_id in self.gone or (workspace_id in self.servers and user_id not in self.servers[workspace_id]):
            return None
        return Actor(
            platform=self.name,
            workspace_id=workspace_id,
            user_id=user_id,
            display_name=user_id,
            is_admin=user_id in self.admins,
        )

    async def member_of(self, actor: Actor, group_ids: frozenset[str]) -> frozenset[str]:
        return frozenset(g for g in group_ids if actor.user_id in self.groups.get(g, set()))

    async def group_members(self, workspace_id: str, group_id: str) -> frozenset[str]:
        return frozenset(self.groups.get(group_id, set()))


@dataclass
class _Progress:
    platform: RecordingPlatform
    thread_id: str

    async def show(self, activity: Activity) -> None:
        self.platform.activities.append((self.thread_id, activity))

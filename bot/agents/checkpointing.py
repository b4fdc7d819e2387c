"""When a run's checkpoints are written, per agent (docs/decisions/0027).

LangGraph writes a checkpoint after every step by default (`durability="async"`). The ReAct
agent's runs write one when they end or pause instead (`durability="exit"`), and stop before
`human_review`, right after the model answered with tool calls, so that those calls and their
ids are stored before any of them runs; the turn runner then goes on at once, in the same turn
(`TurnRunner._stream`). A text answer costs one checkpoint write instead of three, a tool round
two instead of four, and a crash loses no more than it did: the calls that may run are stored
under the ids the ledger knows them by (`bot.tools.ledger.store`), and a run that stored nothing made
no progress, so its message is asked again (`bot.service`).

The supervisor keeps `async`: a delegation that pauses while a sibling still works must show
its card at once, and with `exit` LangGraph would store the pause only when the step ends.

LangGraph gives each invocation its own `recursion_limit`, so a turn run as several chained
invocations carries its step budget along (`StepBudget`): every node sees the `remaining_steps`
it would see if the turn were one invocation, and the step guard (docs/DESIGN.md, Agents) holds as before.
"""

from __future__ import annotations

from dataclasses import dataclass

from langchain_core.runnables import RunnableConfig
from langgraph.types import Durability

from bot.base.agent_kind import AgentKind

STEP_BUDGET_KEY = "countersign_step_budget"
"""The run config key (`configurable`) holding the run's `StepBudget`."""


@dataclass(frozen=True, slots=True)
class Checkpointing:
    """How an agent's runs store their checkpoints.

    Attributes:
        durability: LangGraph's durability mode for the agent's runs.
        stored_before: nodes a run stops before (a static `interrupt_before`), so that the
            checkpoint is stored at that point even when `durability` is `"exit"`; the runner
            continues the run at once.
    """

    durability: Durability
    stored_before: tuple[str, ...] = ()

    @property
    def stores_pauses_at_exit(self) -> bool:
        """Whether a pause is stored only once the invocation ends (no card can show earlier)."""
        return self.durability == "exit"


_CHECKPOINTING = {
    AgentKind.REACT: Checkpointing(durability="exit", stored_before=("human_review",)),
    AgentKind.SUBAGENTS: Checkpointing(durability="async"),
}


def checkpointing(kind: AgentKind) -> Checkpointing:
    """The checkpointing of `kind`'s runs (see the module's docstring for why they differ)."""
    return _CHECKPOINTING[kind]


class StepBudget:
    """The step limit of one run, kept across the invocations it is made of.

    LangGraph stops an invocation that starts after checkpoint step `c` with recursion limit
    `L` at step `c + 1 + L + 1`, and gives each node `remaining_steps = stop - step`. The top
    `llm_call` reports its step and what remains (`observe`); the next invocation gets the
    limit that ends it at the same step as the first one (`next_limit`).

    Args:
        limit: the run's recursion limit (steps).
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._stop_at: int | None = None
        self._last_step: int | None = None

    def observe(self, step: int, remaining: int) -> None:
        """Record a top-level `llm_call` at absolute `step` with `remaining` steps left."""
        if self._stop_at is None:
            self._stop_at = step + remaining
        self._last_step = step

    def next_limit(self) -> int:
        """The recursion limit for the run's next invocation.

        After a stop right behind `llm_call`, the stop's checkpoint is at the last observed
        step, and the limit ends the invocation where one invocation would have ended; with no
        observation (the run's first invocation, or a run that stopped before any step) it is
        `limit`. Never below 1.
        """
        if self._stop_at is None or self._last_step is None:
            return self.limit
        return max(1, self._stop_at - self._last_step - 2)


def step_budget(config: RunnableConfig) -> StepBudget | None:
    """The run's `StepBudget`, or None when the run is a single invocation (graph tests)."""
    found = (config.get("configurable") or {}).get(STEP_BUDGET_KEY)
    return found if isinstance(found, StepBudget) else None

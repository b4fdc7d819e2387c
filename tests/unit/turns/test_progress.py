"""What the progress indicator says as delegations start, pause for cards, continue and report."""

from __future__ import annotations

from langgraph.types import Interrupt

from bot.agents.delegation import DelegationEvent
from bot.ports import Activity
from bot.turns.progress import DelegationTracker


def pause(interrupt_id: str, source: str | None) -> Interrupt:
    return Interrupt(value={"action_requests": [{"name": "send", "args": {}, "source": source}]}, id=interrupt_id)


def event(name: str, call_id: str, *, started: bool) -> DelegationEvent:
    return DelegationEvent(subagent=name, call_id=call_id, started=started, query=f"task for {name}")


def test_a_turn_with_two_delegations_one_of_which_pauses():
    """Both start, operator pauses (waiting), researcher reports: the indicator follows each step."""
    tracker = DelegationTracker()
    assert tracker.on_event(event("researcher", "c1", started=True)) == Activity(
        subagents=("researcher",), started="researcher", query="task for researcher", delegated=True
    )
    assert tracker.on_event(event("operator", "c2", started=True)).subagents == ("researcher", "operator")
    assert tracker.on_interrupt(pause("i-op", "operator")) == Activity(
        subagents=("researcher",), waiting=("operator",), delegated=True
    )
    assert tracker.on_interrupt(pause("i-op", "operator")) is None  # the same pause seen again
    assert tracker.on_event(event("researcher", "c1", started=False)) == Activity(waiting=("operator",), delegated=True)


def test_a_resume_continues_one_delegation_and_keeps_the_other_waiting():
    """Resuming operator's pause: operator continues (no new start); beta, still paused, is not news."""
    tracker = DelegationTracker(paused=[pause("i-beta", "beta")], resumed=[pause("i-op", "operator")])
    assert tracker.on_event(event("beta", "c3", started=True)) is None
    assert tracker.on_interrupt(pause("i-beta", "beta")) is None
    continued = tracker.on_event(event("operator", "c2", started=True))
    assert continued == Activity(subagents=("operator",), waiting=("beta",), continued="operator", delegated=True)
    assert tracker.on_event(event("operator", "c2", started=False)) == Activity(waiting=("beta",), delegated=True)


def test_a_top_level_pause_says_nothing_about_subagents():
    """An interrupt of the ReAct agent itself (no source) changes nothing on the indicator."""
    assert DelegationTracker().on_interrupt(pause("i", None)) is None


def test_the_words_name_who_works_and_who_waits():
    """Slack's line: workers first, then who waits for approval; a subagent twice is counted."""
    from adapters.slack import messages as msg
    from adapters.words.display import progress_line

    line = progress_line(Activity(subagents=("researcher", "researcher"), waiting=("operator",)), msg.PROGRESS, str)
    assert line == (
        ":hourglass_flowing_sand: _researcher (2 tasks) are working…_ · :raised_hand: _operator waits for approval_"
    )
    assert progress_line(Activity(delegated=True), msg.PROGRESS, str) == msg.PROGRESS.agent
    assert progress_line(Activity(long_running=True), msg.PROGRESS, str) == msg.PROGRESS.busy


def test_a_model_wait_is_shown_beside_who_works_and_then_cleared():
    """A subagent's model waits 40 s: the line says so after who works; the next delegation news drops it."""
    from adapters.slack import messages as msg
    from adapters.words.display import progress_line
    from bot.agents.model_retry import ModelWait
    from bot.base.errors import ModelErrorKind

    tracker = DelegationTracker()
    tracker.on_event(event("researcher", "c1", started=True))
    waiting = tracker.on_model_wait(ModelWait(kind=ModelErrorKind.BUSY, seconds=40.0, attempt=2))
    assert waiting.subagents == ("researcher",) and waiting.retrying is not None
    assert progress_line(waiting, msg.PROGRESS, str) == (
        ":hourglass_flowing_sand: _researcher is working…_ · "
        ":hourglass_flowing_sand: _The model is rate limited; trying again in 40 seconds…_"
    )
    assert tracker.on_event(event("researcher", "c1", started=False)) == Activity(delegated=True)


def test_a_plain_turn_shows_a_progress_message_only_for_a_model_wait():
    """Without subagents nothing is worth a message, except a model call waiting to be retried."""
    from adapters.words.display import shows_something
    from bot.base.errors import ModelErrorKind
    from bot.ports import ModelRetry

    assert not shows_something(Activity())
    assert shows_something(Activity(retrying=ModelRetry(kind=ModelErrorKind.UNAVAILABLE, wait_s=8.0)))


def test_a_long_run_offers_stop_and_a_stop_takes_the_button_away():
    """After a while the indicator shows (with the turn to stop); once stopped it says who stopped it, without Stop."""
    from adapters.slack import messages as msg
    from adapters.words.display import offers_stop, progress_line, shows_something

    tracker = DelegationTracker(turn_id="t" * 32)
    long = tracker.on_long_run()
    assert shows_something(long) and offers_stop(long) and long.turn_id == "t" * 32
    assert progress_line(long, msg.PROGRESS, str) == msg.PROGRESS.busy
    stopping = tracker.on_stop("alice")
    assert not offers_stop(stopping) and stopping.long_running
    assert progress_line(stopping, msg.PROGRESS, str) == ":black_square_for_stop: _Stopping (asked by alice)…_"
    # A stop alone is no reason to post an indicator (a quick turn keeps its zero platform calls).
    assert not shows_something(DelegationTracker(turn_id="t" * 32).on_stop("alice"))
    # A run older than turns names none: no button.
    assert not offers_stop(DelegationTracker().on_long_run())

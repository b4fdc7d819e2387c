"""What Slack and Discord say about a conversation's messages and turns: a failure, a restart, a given-up resume.

The terminal words these its own way (`adapters.console.messages`), except where it says the same.
"""

from __future__ import annotations

TURN_FAILED = (
    "Something went wrong on my side and I could not finish. The details are in the bot's log "
    "(conversation `{thread_id}`)."
)
MESSAGE_FAILED = (
    "Something went wrong on my side and I could not answer your message “{excerpt}”. Please send it "
    "again; the details are in the bot's log (conversation `{thread_id}`)."
)
SHUTTING_DOWN = "I'm restarting right now; please send your message again in a moment."
EMPTY_MENTION = "Hi! Mention me with a question or a task, and I'll get to work."
RESUME_NOT_RUN = " Did not run: {tools}."
RESUME_OUTCOME_UNKNOWN = " Started before the bot gave up, so it may or may not have taken effect: {tools}."

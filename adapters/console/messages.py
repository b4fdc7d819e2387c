"""Every sentence the terminal shows in its own words (docs/decisions/0060-words-in-one-place.md).

Lines follow one layout: `bot> ` for answers, `?  ` for a card to decide, `!  ` for a refusal
or a problem (nothing was changed), `↑  ` for an escalation, `■  ` for a stop, and three spaces
for everything else. `adapters.words.decisions` and `adapters.words.batch` choose among the
decision and batch sentences here, as they do for Slack's and Discord's.
"""

from __future__ import annotations

from adapters.words.mcp import DEFINITION_CHANGED
from bot.base.errors import ModelErrorKind, NoAnswerReason

# The chat and its commands ----------------------------------------------------------------

HELP = (
    "Type a message; /quit (or Ctrl-D) leaves. /countersign <subcommand> changes the policy here "
    "(/countersign help lists them; you are the admin). /as <name> acts as a pretend teammate "
    "(their messages, their decisions), /as alone is you again; /help shows this. "
    "Ctrl-C while the bot works stops its turn (Ctrl-C again leaves)."
)
"""The start-up line and `/help`."""
PROMPT = "{name}> "
"""The message prompt; `you> ` for the person at the terminal."""
YOU = "you"
NOT_A_COMMAND = (
    "!  The terminal knows /countersign ..., /as [name], /help and /quit, not `{command}`. "
    "To send a message starting with /, put a space before it."
)
NO_ADMIN = "!  /countersign is not available in this chat."
AS_SOMEONE = (
    "   You are now {name}: what you type and decide is {name}'s. {name} is an admin only if "
    "`/countersign admins add @{name}` made them one. /as alone is you again."
)
AS_YOURSELF = "   You are yourself again ({name}, the admin here)."
NOT_A_NAME = "!  `{text}` is not a name: use letters, digits and . _ - (at most 64), like /as bob."
TYPED_AHEAD = "   Typed while the bot worked: {line}"
"""Printed before a line typed ahead is taken (`ConsoleChat`): which line is being answered."""
LEFT_OVER = (
    "   … finishing the turn left over from the last run first; what you type now is read after it (Ctrl-C stops it)."
)
"""Printed at start when `countersign chat` finishes a turn an earlier run left unfinished."""
LEFT_OVER_FAILED = (
    "!  Could not look for work left over from the last run (see the log); the bot tries again in the background."
)
"""Printed at start when `Countersign.recover` failed (the upkeep looks again later)."""
STOPPING_BOT = (
    "■  The bot is stopping: the turn in progress has up to {grace} to reach a checkpoint "
    "(Ctrl-C leaves at once); nothing typed now is run."
)
"""Printed once on SIGTERM (or a Ctrl-C that leaves) while the bot works."""
TURN_CUT = "!  The turn was cut short; it will be finished on the next start."
"""Printed when the shutdown grace ended before the turn reached its end."""
NOT_TAKEN = "!  The bot is stopping: `{line}` was not run."
"""A line typed during the shutdown grace."""
NOTHING_RUNNING = "   Nothing to stop this moment (Ctrl-C during a turn stops it; at the prompt, Ctrl-C leaves)."
"""Ctrl-C between two pieces of the bot's work, with no turn running and no line typed ahead."""
NOT_RUN_AFTER_CTRL_C = "!  Stopped with Ctrl-C: `{line}`, typed while the bot worked, was not run."
"""A line typed ahead that had not started when Ctrl-C stopped the bot's work (`ConsoleChat.interrupt`)."""
COMMAND_FAILED = "!  Something went wrong; nothing was changed. Run with LOG_LEVEL=DEBUG to see why."

TERMINAL_HELP = (
    "In the terminal: people are @name and channels #name; this conversation is #terminal in the one "
    "workspace `local`. /as <name> pretends to be someone (they are not admins unless `admins add` "
    "made them); user groups and roles are not pretended here. Cards are always asked at the prompt: "
    "with `cards dm` or `cards channel #x` the setting is stored and the prompt says where the card "
    "went; an answer to a card posted in (or escalated to) a channel counts as a click in that channel. "
    "`scope` is stored, but the terminal has one conversation without threads."
)
"""Added below `help`'s list of subcommands."""
CARDS_NOTE = "   In the terminal cards are still asked at the prompt, which says where the card went."
SCOPE_NOTE = "   The terminal has one conversation (#terminal) without threads: the scope changes nothing here."

USAGE = {
    "approvers": "approvers add|remove <@name> [for <tool>]",
    "escalate": "escalate <tool> after <duration like 30m> to <@name|#channel>, or escalate <tool> off",
}
"""The usage lines the terminal spells differently (no user groups or roles to name)."""

HELP_EXAMPLES = (
    ("show", "the effective policy here"),
    ("policy http_request review when args.method != 'GET'", "review only non-GET requests"),
    ("policy calculator deny in #terminal", "switch a tool off in this conversation only"),
    ("approvers add @alice for http_request", "who may approve (then /as alice to be her)"),
    ("admins add @bob", "make a pretend teammate a bot admin"),
    ("quorum http_request 2", "two different people must approve (/as bob for the second)"),
    ("self-approval off", "requesters may not approve their own calls"),
    ("expiry 30m", "cards expire after 30 minutes"),
    ("escalate http_request after 10m to @carol", "a card still waiting after 10 minutes goes to carol too"),
    ("trust http_request up-to 30m matching method,url", "the prompt offers [t]rust for 30 minutes"),
    ("policy notes__* deny", "switch off every tool of the MCP server notes (a tool's own rule beats it)"),
    ("context", "this conversation's summary and window size"),
    ("audit limit 10", "recent decisions and changes"),
)

# The approval prompt -------------------------------------------------------------------------

CARD_TOOL = "?  {tool} wants to run ({position} of {total}), asked by {requester}"
CARD_ORIGIN = "   {origin}"
"""Under `CARD_TOOL` for an MCP server's tool (`adapters.words.mcp.origin_line`)."""
CARD_SUBAGENT = "?  {subagent} wants to call {tool} ({position} of {total}), asked by {requester}"
CARD_WHY = "   why: {why}"
CARD_ARGS = "   args: {args}"
CARD_ARGS_BLOCK = "   args:"
"""Above arguments too long for one line, printed whole, one line of indented JSON at a time."""
CARD_ARGS_LINE = "     {line}"
CARD_TRUST_FREE = "   trust binds only {bound}: later calls with the same {bound} and any {free} run without asking"
OTHERS_WAITING = "   [A]pprove all and [R]eject all decide all {count} waiting calls; the others:"
OTHER_CALL = "   ({position} of {total}) {tool}"
CARD_TALLY = "   approvals: {count} of {quorum}{names}"
CARD_WENT = "   the card went to {places}"
CARD_DMS = "{user}'s DMs"
CARD_ESCALATED = "   escalated to {target}, who may decide it too"
CARD_EXPIRES = "   expires in {duration} without a decision"
CHOICE_APPROVE = "[a]pprove"
CHOICE_TRUST = "[t]rust for {duration}"
CHOICE_EDIT = "[e]dit"
CHOICE_REJECT = "[r]eject"
CHOICE_APPROVE_ALL = "[A]pprove all {count}"
CHOICE_REJECT_ALL = "[R]eject all {count}"
QUESTION = "   {who}{choices}? "
QUESTION_AS = "as {name}: "
"""Before the choices when you act as someone else."""
ANSWER_WITH = "!  Answer {choices} (or /quit to leave; the call waits until next time)."
LEFT_WAITING = "   The call waits; you are asked again next time."
NEW_CARDS_LEFT_WAITING = "   The turn stopped at {calls} waiting for your decision; you are asked next time."
"""Printed on leaving when the turn given the shutdown grace stopped at a card nobody was shown."""
ASK_REASON = "   reason (optional): "
REASON_IS_A_COMMAND = "!  Not rejected: `{line}` is a command, not a reason. The call still waits."
ASK_ARGS = "   new args as JSON: "
EDIT_NOT_JSON = "!  Not valid JSON: {problem}. Try again."
EDIT_NOT_OBJECT = '!  The arguments must be a JSON object, like {"name": "value"}. Try again.'

# Decisions (the names `adapters.words.decisions` and `adapters.words.batch` use; a sentence not
# here is said in their shared words) -------------

VOTE_RECORDED = "   Your approval is recorded ({count} of {quorum}); the call runs once {quorum} people approved it."
REFUSED_NOT_PERMITTED = (
    "You can't decide this: only the person who asked, the person at the terminal and bot admins can "
    "(/as someone who may)."
)
REFUSED_OTHER_WORKSPACE = "You can't decide this approval: it belongs to another workspace."
REFUSED_NOT_AN_APPROVER = "You can't decide this: you are not on the approvers list for this tool."
ALREADY_DECIDED = "This was already {outcome} by @{user}{when}. Nothing was changed."
ALREADY_VOTED = "You already approved this; each person counts once, so it now needs someone else (/as ...)."
STALE_VOTE = "The arguments changed meanwhile; look at the card again."
CARD_NOT_POSTED = "Its card is not shown yet, so Approve all did not approve it; it is asked on its own."
"""Why Approve all left a call pending (`bot.base.errors.CardNotPostedError`); the terminal keeps every card, so
it never says this today."""
UNKNOWN_APPROVAL = "This approval is gone. Nothing was changed."
EDIT_REFUSED = "Your edit was not applied: {problem} Nothing was changed; answer e to edit it again."
"""An edit its tool refuses; `problem` is a sentence (`adapters.words.decisions.as_sentence`)."""
SHUTTING_DOWN = "The bot is stopping; nothing was changed."
REFUSED_TOO_LONG = "These arguments ({size} characters) are too long to review here (at most {limit}); nothing changed."
REFUSED_TOO_MANY_KEYS = "This call has too many arguments ({size}) to review here (at most {limit}); nothing changed."
"""The terminal shows every argument, so it never says these; `decision_error_text` has them for every adapter."""
TRUST_REFUSED = {
    "not_offered": "Trust is not enabled for this tool any more; answer a to approve it once.",
    "quorum": "This call now needs more than one approval, so it cannot be trusted; answer a to approve it once.",
    "not_approve": "Trust goes only with an approval.",
    "escalation": (
        "The card was escalated to you, which lets you decide this call but not the tool's later ones, "
        "so you cannot trust it; answer a to approve it once."
    ),
}
"""By `bot.base.errors.TrustRefusedError.reason`; nothing was changed and the call is asked again."""

BATCH_CALL = "{tool} ({position})"
BATCH_APPROVED = "   Approved: {calls}."
BATCH_REJECTED = "   Rejected: {calls}."
BATCH_VOTED = "   Your approval is recorded for {calls}; they run once enough people approved them."
BATCH_LEFT = "!  Left pending: {call}. {why}"
BATCH_SKIPPED = "   Already decided before: {calls}."
BATCH_NOTHING = "!  Nothing in this request was left to decide. Nothing was changed."

# What the core tells the terminal (`ConsolePlatform`) -----------------------------------------

ANSWER = "bot> {text}"
WORKING = "   …"
DELEGATION_STARTED = "   … {name} is working: {query}"
DELEGATION_CONTINUES = "   … {name} continues after the decision"
STOPPED = "■  Stopped by {name}."
ASK_ELSEWHERE = "!  {tool} was not run: it needs someone other than you to approve it. Ask where they can."
"""A call refused for want of a decider where it was asked (Discord DMs have it; the terminal never does today)."""
"""Printed in place of an answer when the turn was stopped (Ctrl-C or `/countersign stop`)."""
STOPPING = "   … stopping (asked by {name}); Ctrl-C again leaves"
"""Printed when the running turn was stopped; it ends at its next step."""
RETRY = "   … {why}"
OUTCOME = "   {call}: {status}"
OUTCOME_TRUSTED = " and trusted for {duration}"
OUTCOME_BY = " by {name}"
OUTCOME_WITH = " with {args}"
OUTCOME_REASON = " ({reason})"
OUTCOME_UNKNOWN = (
    " - Outcome unknown: the call started, then the bot stopped, the call was stopped, or no readable answer came."
    " It was not run again; it may or may not have taken effect."
)
OUTCOME_NOT_RUN = " - The bot could not carry on after this decision and gave up, so the call did not run."
OUTCOME_DEFINITION_CHANGED = f" - {DEFINITION_CHANGED}"
SUBAGENT_CALL = "{subagent}'s {tool}"
ESCALATED_TO_USER = "↑  {call} ({position} of {total}) was escalated to @{name}, who may decide it now (/as {name})."
ESCALATED_TO_CHANNEL = (
    "↑  {call} ({position} of {total}) was escalated to #{name}: whoever answers it there (at this prompt) "
    "may decide it now."
)
ESCALATED_TO_OTHER = "↑  {call} ({position} of {total}) was escalated to {target}."
CARDS_ELSEWHERE = "   The card for {tools} went to {places}; the terminal asks it here all the same."
APPROVERS_DMS = "the approvers' DMs"
EXPIRED = "!  The request to run {tool} expired without a decision."
RESUME_GIVEN_UP = "!  The bot could not carry on after the decision on your request and gave up.{not_run}{unknown}"
"""Once the bot gave up resuming a decided pause (after several attempts)."""
RESUME_OUTCOME_UNKNOWN = " May or may not have taken effect: {tools}."
REVIEW_PENDING = "!  A tool call is waiting for your decision first: {tools}"
REVIEW_BUSY = "a call being worked on"
QUESTION_PENDING = "!  A tool call is waiting for {name} to answer a question from the MCP server {server} first."
TURN_FAILED = "!  Something went wrong; see the log (conversation {thread_id})."
MESSAGE_FAILED = (
    "!  Something went wrong with your message “{excerpt}”; please send it again "
    "(the log has the details, conversation {thread_id})."
)
"""A message that could not be answered (its handling failed, or it was given up)."""
MODEL_FAILED = "!  {text}"

NOTICES = {
    ModelErrorKind.BUSY: "The model is busy (rate limited). Your message is kept; try again soon.",
    ModelErrorKind.UNAVAILABLE: (
        "The model is not answering (it failed or could not be reached). Your message is kept; try again soon."
    ),
    ModelErrorKind.REJECTED: "The model refused the request; see the log for details.",
    ModelErrorKind.AUTH: "The model service refused the API key; check GOOGLE_API_KEY.",
    ModelErrorKind.NOT_FOUND: "The model does not exist; check GEMINI_MODEL.",
    ModelErrorKind.TOOLS_REFUSED: "The model service refused the tool definitions; see the log for details.",
}
RETRYING = {
    ModelErrorKind.BUSY: "the model is rate limited; trying again in {wait}",
    ModelErrorKind.UNAVAILABLE: "the model did not answer; trying again in {wait}",
}
BUSY_FOR = "The model is rate limited; Google asks to wait about {wait}. Your message is kept."
NO_ANSWER = {
    NoAnswerReason.BLOCKED: "The model gave no answer: Gemini blocked the request (safety filters). Try rephrasing.",
    NoAnswerReason.SAFETY: "The model gave no answer: Gemini withheld the reply (safety filters). Try rephrasing.",
    NoAnswerReason.RECITATION: "The model gave no answer: the reply resembled published text. Ask differently.",
    NoAnswerReason.MAX_TOKENS: "The model gave no answer: it hit its output limit. Ask for less at once.",
    NoAnswerReason.MALFORMED_CALL: "The model gave no answer: its tool call could not be read. Try again.",
    NoAnswerReason.EMPTY: "The model gave no answer: its reply was empty. Try again or rephrase.",
    NoAnswerReason.OTHER: "The model gave no answer, and Gemini did not say why. Try again.",
}
MCP_CONNECTING = "   Connecting to the MCP servers: {servers}..."
MCP_CONNECTED = "   MCP server {server}: connected, {tools} offered."
MCP_TOOL_COUNT = ("{n} tool", "{n} tools")
"""How many tools `MCP_CONNECTED` counts: one, or any other number."""
MCP_NOT_YET = (
    "!  MCP server {server} is not connected yet ({reason}); the bot keeps trying, and its tools are "
    "offered once it is (/countersign mcp shows how it stands)."
)

# An MCP server's question (docs/decisions/0054-mcp-elicitation.md) ----------------------

QUESTION_FROM = "?  The MCP server {server} asks {requester} during {tool}:"
"""The first line of a server's question; its message follows, then the form's fields or the link."""
QUESTION_MESSAGE = "   {message}"
QUESTION_LINK = "   link: {url}"
"""A URL-mode question's link (shown only to the requester: the terminal is theirs)."""
QUESTION_FIELD = "   - {label}{required}: {kind}{description}"
QUESTION_OPTIONS = "     options: {options}"
QUESTION_EXPIRES = "   expires in {duration} without an answer (then the server is told `cancel`)"
QUESTION_CHOICES = "   [a]ccept / [d]ecline / [c]ancel? "
QUESTION_LINK_CHOICES = "   [a]ccept (I opened the link) / [d]ecline / [c]ancel? "
QUESTION_ANSWER_WITH = "!  Answer a, d or c (or /quit to leave; the question waits until next time)."
QUESTION_ASK_FIELD = "   {label}{default}: "
QUESTION_DEFAULT = " [{default}]"
QUESTION_REQUIRED = " (required)"
QUESTION_KINDS = {
    "text": "text",
    "number": "a number",
    "integer": "a whole number",
    "boolean": "yes or no",
    "choice": "one of the options",
    "choices": "any of the options, separated by commas",
}
QUESTION_BAD_VALUE = "!  {problem} Try again."
"""A field's value the form refuses: the field is asked again."""
QUESTION_NOT_YOURS = "!  Only {requester}, who asked for the call, can answer this question (use /as {requester})."
QUESTION_LEFT = "   The question waits; you are asked again next time."
QUESTION_OUTCOME = {
    "answered": "   The question of {server} ({tool}) was answered: {action}.",
    "expired": "!  The question of {server} ({tool}) expired without an answer; the server was told `cancel`.",
    "stopped": "■  The question of {server} ({tool}) was closed by a stop; the server was told `cancel`.",
}
"""What became of a question (`update_question`)."""

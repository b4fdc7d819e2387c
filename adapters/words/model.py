"""What Slack and Discord say when the model gave no answer (the same plain words on both).

The terminal words it differently (`adapters.console.platform`); each platform's other
sentences stay in its own messages module.
"""

from __future__ import annotations

from bot.base.errors import ModelErrorKind, NoAnswerReason

MODEL_BUSY = (
    "The model is busy right now (rate limited), so I could not answer. Your message is kept; "
    "please send another message in a minute."
)
MODEL_UNAVAILABLE = (
    "The model is not answering right now (it failed or could not be reached), so I could not answer. "
    "Your message is kept; please try again shortly."
)
MODEL_REJECTED = (
    "The model refused this request, so I could not answer. An administrator can find the details in the bot's log."
)
MODEL_AUTH = (
    "The model service refused the bot's API key, so I could not answer. An administrator needs to "
    "check GOOGLE_API_KEY."
)
MODEL_NOT_FOUND = (
    "The configured model does not exist, so I could not answer. An administrator needs to check GEMINI_MODEL."
)
MODEL_BUSY_FOR = (
    "The model is rate limited right now, so I could not answer; Google asks to wait about {wait}. "
    "Your message is kept; please send another message after that."
)
"""`MODEL_BUSY` when Google said how long to wait (longer than the bot's retries could wait)."""
MODEL_TOOLS_REFUSED = (
    "The model service refused the bot's tool definitions, so I could not answer. An administrator "
    "needs to check the tools; the details are in the bot's log."
)
MODEL_NO_ANSWER = {
    NoAnswerReason.BLOCKED: (
        "The model gave no answer: Gemini blocked this request with its safety filters. Your message is kept; "
        "try rephrasing it."
    ),
    NoAnswerReason.SAFETY: (
        "The model gave no answer: Gemini withheld the reply with its safety filters. Your message is kept; "
        "try rephrasing it."
    ),
    NoAnswerReason.RECITATION: (
        "The model gave no answer: Gemini withheld a reply that resembled published text. Your message is "
        "kept; try asking differently."
    ),
    NoAnswerReason.MAX_TOKENS: (
        "The model gave no answer: it reached its output limit before writing anything. Your message is "
        "kept; try asking for less at once."
    ),
    NoAnswerReason.MALFORMED_CALL: (
        "The model gave no answer: it tried to use a tool with a call that could not be read, also when "
        "asked again. Your message is kept; please send it again or rephrase it."
    ),
    NoAnswerReason.EMPTY: (
        "The model gave no answer: its reply was empty, also when asked again. Your message is kept; "
        "please send it again or rephrase it."
    ),
    NoAnswerReason.OTHER: (
        "The model gave no answer, and Gemini did not say why. Your message is kept; please send it again."
    ),
}
"""A turn that ended without an answer, by why Gemini gave none (nothing empty is ever posted)."""
MODEL_FAILED = {
    ModelErrorKind.BUSY: MODEL_BUSY,
    ModelErrorKind.UNAVAILABLE: MODEL_UNAVAILABLE,
    ModelErrorKind.REJECTED: MODEL_REJECTED,
    ModelErrorKind.AUTH: MODEL_AUTH,
    ModelErrorKind.NOT_FOUND: MODEL_NOT_FOUND,
    ModelErrorKind.TOOLS_REFUSED: MODEL_TOOLS_REFUSED,
}

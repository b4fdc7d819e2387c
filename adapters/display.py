"""Showing untrusted text (model-written arguments and reasons) so what people read is what runs."""

from __future__ import annotations

import unicodedata

_KEEP = {"\n", "\t"}


def reveal_invisible(text: str) -> str:
    r"""Replace invisible and direction-changing characters with visible escapes like `\u202e`.

    Unicode format characters (category Cf: right-to-left overrides, zero-width spaces and
    joiners, ...) and control characters would let a card display arguments that read
    differently from the ones that run ("Trojan Source"); the escapes make them obvious.
    """
    return "".join(
        f"\\u{ord(ch):04x}" if ch not in _KEEP and unicodedata.category(ch) in {"Cf", "Cc", "Co", "Cn"} else ch
        for ch in text
    )

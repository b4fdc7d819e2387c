"""The canonical form of `send_email` arguments: one spelling per mailbox.

An admin's condition compares strings (`args.to.exists(a, a.endsWith('@external.example'))`),
while a mail server reads `a@EXTERNAL.example`, `a@external.example.`, ` a@external.example`,
`a@` followed by `external` in full-width letters, and `a@external。example` as the same mailbox. So every address is
put in one spelling where the call enters (docs/decisions/0010-canonical-arguments.md), and the
tool sends exactly that spelling:

- Unicode NFKC first (full-width letters, `@` and `.` become ASCII), then surrounding
  whitespace removed;
- exactly one `@`; the local part a dot-atom of ASCII letters, digits and
  ``#$&'*+/=?^_`{|}~-`` (no quotes, comments, spaces or display names: nothing a model writes
  can add a header or a hidden recipient), at most 64 characters, in lower case; `%` and `!`,
  which RFC 5322 allows, are refused: a relay may read `user%evil.example@relay` (the
  "percent hack") or `evil.example!user@relay` (a UUCP bang path) as mail for another host than
  the domain a condition reads;
- the domain through IDNA's UTS #46 processing (non-transitional, STD3 rules), as browsers and
  mail libraries do: case folded, `。` and other full stops mapped to `.`, an internationalised
  name in its ASCII `xn--` form, the root's trailing dot dropped; a domain ending in a number
  (an IP address) is refused.

The local part is case-folded although RFC 5321 lets a server tell `Ana@` from `ana@`: the
widespread mail servers and providers do not, and an admin's rule naming an address must not
be passed by writing it in capitals. The card shows the lower-case address, so the approver
sees what is sent (docs/decisions/0033-fresh-call-ids-and-canonical-forms.md).

The subject is one line: every character `str.splitlines` breaks at (LF, CR, VT, FF, U+001C to
U+001E, U+0085, U+2028, U+2029) is refused, not only CR and LF, because the email package
refuses them when the message is built, after the call was approved.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from typing import Any, Final

import idna

from bot.base.errors import InvalidArgumentsError

ADDRESS_FIELDS: Final = ("to", "cc")
"""`send_email`'s arguments that hold addresses, in the order recipients are counted."""

MAX_LOCAL_CHARS: Final = 64
MAX_ADDRESS_CHARS: Final = 254
_LOCAL_PART: Final = re.compile(r"[a-z0-9#$&'*+/=?^_`{|}~-]+(?:\.[a-z0-9#$&'*+/=?^_`{|}~-]+)*", re.IGNORECASE)
_ROUTING: Final = frozenset("%!")
"""Local-part characters a relay may read as a route to another host (`a%b@relay`, `b!a@relay`)."""
_WHITESPACE: Final = " \t\r\n\f\v"
LINE_BREAKS: Final = frozenset("\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")
"""Exactly the characters `str.splitlines` breaks a line at; the email package refuses a header with any of them."""


def canonical_address(text: str, *, field: str = "args.to") -> str:
    """The canonical spelling of one bare email address (see the module docstring).

    Args:
        text: the address as written, e.g. ` Ana@EXTERNAL.example.`.
        field: the argument it came from, for the error (`args.to`, `args.cc`).

    Returns:
        `local@domain`, ASCII and lower case; `canonical_address` of it returns it unchanged.

    Raises:
        InvalidArgumentsError: with `field`, saying what is wrong: not exactly one `@`, a display
            name, quotes, comments or spaces, a local part that is not ASCII or holds `%` or `!`,
            a domain that is no host name, or an address longer than 254 characters.
    """
    shown = text[:100]
    address = unicodedata.normalize("NFKC", text).strip(_WHITESPACE)
    if not address:
        raise InvalidArgumentsError("an address is empty; give a bare address like 'name@example.com'", field=field)
    if address.count("@") != 1:
        raise InvalidArgumentsError(
            f"{shown!r} is not one email address (it has {address.count('@')} `@`); give one bare address "
            "like 'name@example.com' per list item, without a display name",
            field=field,
        )
    local, _, domain = address.partition("@")
    if _ROUTING & set(local):
        raise InvalidArgumentsError(
            f"{shown!r} has a `%` or `!` before the `@`, which a mail relay may read as a route to another "
            "host; give the recipient's own address",
            field=field,
        )
    if not local or len(local) > MAX_LOCAL_CHARS or not local.isascii() or not _LOCAL_PART.fullmatch(local):
        raise InvalidArgumentsError(
            f"{shown!r} is not a bare email address: write it like 'name@example.com', with ASCII letters, "
            "digits, dots and -+_ before the `@`, without a display name, quotes, comments or spaces",
            field=field,
        )
    result = f"{local.lower()}@{_canonical_domain(domain, shown, field)}"
    if len(result) > MAX_ADDRESS_CHARS:
        raise InvalidArgumentsError(f"{shown!r} is longer than {MAX_ADDRESS_CHARS} characters", field=field)
    return result


def _canonical_domain(domain: str, shown: str, field: str) -> str:
    """The ASCII domain of an address (UTS #46), without the root's dot; refuses an IP address."""
    problem = f"{shown!r} has no valid domain after the `@`: give a host name like 'example.com'"
    try:
        ascii_domain = idna.encode(domain, uts46=True, std3_rules=True, transitional=False).decode("ascii")
    except (idna.IDNAError, UnicodeError, ValueError):
        raise InvalidArgumentsError(problem, field=field) from None
    ascii_domain = ascii_domain.removesuffix(".")  # `example.com.` names the same host
    labels = ascii_domain.split(".")
    if not ascii_domain or not all(labels) or labels[-1].isdigit():
        raise InvalidArgumentsError(problem, field=field)
    return ascii_domain


def canonical_send_email_args(args: Mapping[str, Any]) -> dict[str, Any]:
    """`send_email`'s arguments in canonical form: the form the policy judges and the tool sends.

    Args:
        args: `{"to", "cc", "subject", "body"}` as sent; a value of an unexpected type (a `to`
            that is not a list of text) is left for the tool's schema to refuse.

    Returns:
        A new dict: every address per `canonical_address`, each recipient once (the first time it
        appears, To before Cc), the subject without surrounding whitespace; the body as given.

    Raises:
        InvalidArgumentsError: an address has no canonical form (field `args.to` or `args.cc`),
            or the subject has a line break of any kind (`LINE_BREAKS`; field `args.subject`).
    """
    out = dict(args)
    seen: set[str] = set()
    for name in ADDRESS_FIELDS:
        value = out.get(name)
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            continue
        addresses: list[str] = []
        for item in value:
            address = canonical_address(item, field=f"args.{name}")
            if address not in seen:  # the tool sends to each mailbox once
                seen.add(address)
                addresses.append(address)
        out[name] = addresses
    subject = out.get("subject")
    if isinstance(subject, str):
        if not LINE_BREAKS.isdisjoint(subject):
            raise InvalidArgumentsError(
                "the subject must be a single line: it has a line break (a newline, or a character such "
                "as U+2028 that mail software also breaks lines at); remove it",
                field="args.subject",
            )
        out["subject"] = subject.strip()
    return out

"""Secrets the bot stores (Slack bot tokens of OAuth installs), encrypted at rest when a key is set.

Fernet, from the `cryptography` package: AES-128 in CBC mode with an HMAC-SHA256 over the whole
token, so a value written under another key, or changed in the database, is refused rather than
read as garbage. `COUNTERSIGN_ENCRYPTION_KEY` holds one or more keys: the first encrypts, every
one decrypts (`MultiFernet`), which is how a key is rotated
(docs/decisions/0037-outages-probes-and-tokens-at-rest.md).

A stored value is `fernet:<token>` when encrypted, and the secret itself otherwise (a row written
before a key was set, or with none): both are read, so setting a key breaks nothing, and the
store encrypts the plain ones at the next start (`needs_sealing`).
"""

from __future__ import annotations

from collections.abc import Sequence

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

from bot.base.errors import CountersignError

SEALED_PREFIX = "fernet:"
"""What an encrypted value starts with; a Slack token never does (`xoxb-`, `xoxe-`)."""


class UnreadableSecretError(CountersignError):
    """A stored secret is encrypted, and no key given decrypts it (or no key is given at all)."""


class SecretBox:
    """Encrypts secrets before they are stored and decrypts them when they are read.

    Args:
        keys: Fernet keys (32 url-safe base64-encoded bytes each, `Fernet.generate_key()`),
            newest first; empty: values are stored as they are.

    Raises:
        ValueError: a key is not a Fernet key (the settings refuse it first).
    """

    def __init__(self, keys: Sequence[str] = ()) -> None:
        fernets = [Fernet(key) for key in keys]
        self._newest = fernets[0] if fernets else None
        self._all = MultiFernet(fernets) if fernets else None

    @property
    def encrypting(self) -> bool:
        """Whether a key is set (values are then stored encrypted)."""
        return self._all is not None

    def seal(self, secret: str | None) -> str | None:
        """`secret` as it is to be stored: encrypted with the newest key, or as it is without one."""
        if secret is None or self._all is None:
            return secret
        return SEALED_PREFIX + self._all.encrypt(secret.encode()).decode("ascii")

    def unseal(self, stored: str | None) -> str | None:
        """The secret of a stored value, encrypted or not.

        Raises:
            UnreadableSecretError: the value is encrypted and no key decrypts it.
        """
        if stored is None or not stored.startswith(SEALED_PREFIX):
            return stored
        if self._all is None:
            raise UnreadableSecretError("the value is encrypted and COUNTERSIGN_ENCRYPTION_KEY is not set")
        try:
            return self._all.decrypt(stored.removeprefix(SEALED_PREFIX).encode("ascii")).decode()
        except (InvalidToken, UnicodeError):
            raise UnreadableSecretError("no key of COUNTERSIGN_ENCRYPTION_KEY decrypts the value") from None

    def needs_sealing(self, stored: str | None) -> bool:
        """Whether a stored value should be written again: plain while a key is set, or under an older key.

        Raises:
            UnreadableSecretError: as `unseal`.
        """
        if stored is None:
            return False
        self.unseal(stored)  # readable at all?
        if self._newest is None:
            return False
        if not stored.startswith(SEALED_PREFIX):
            return True
        try:
            self._newest.decrypt(stored.removeprefix(SEALED_PREFIX).encode("ascii"))
        except InvalidToken:
            return True
        return False

"""API keys: where the service's tenants come from.

    created = await store.create_api_key(tenant_id="acme", label="chat backend")
    created.secret                                  # "wm_...": shown once, never stored
    key = await store.find_api_key(created.secret)  # the record (revoked ones too), or None
    await store.revoke_api_key(key_id=created.key.key_id)

A key is a random secret, ``wm_`` followed by 32 random bytes in URL-safe base64, bound to one
tenant. The database keeps only the secret's SHA-256 (and its first characters, to recognise it
in a list), so a leaked database gives no usable key. A fast hash is the right one here: slow
password hashes (bcrypt, argon2) exist to make guessing low-entropy passwords expensive, but
nobody guesses a 256-bit random secret however fast the hash is, and a fast hash keeps the check
of every request to one indexed lookup.

Keys are revoked, never deleted: a database that ever had a key keeps needing one, so revoking
every key cannot reopen a server to requests without a key. `SQLiteStore` and `PostgresStore`
implement `ApiKeyStore`.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, runtime_checkable

from ..errors import ValidationError
from ..messages import check_id

__all__ = [
    "KEY_PREFIX",
    "ApiKey",
    "ApiKeyStore",
    "NewApiKey",
    "check_key_id",
    "check_label",
    "hash_secret",
    "new_key_id",
    "new_secret",
    "plausible_secret",
]

KEY_PREFIX = "wm_"
SESSION_PREFIX = "wms_"
"""The page's session tokens: another prefix, so a cookie is never mistaken for a key."""
"""Every secret starts with it, so a leaked key is recognisable (secret scanners, logs)."""

HINT_CHARS = 7
"""The stored start of a secret: the prefix and 4 random characters (24 of its 256 bits)."""

MAX_LABEL_CHARS = 200
_MAX_SECRET_CHARS = 200


@dataclass(frozen=True, slots=True)
class ApiKey:
    """One API key's record; the secret itself is never stored."""

    key_id: str
    """The public id (``key_`` + 16 hex digits): what lists show and `revoke` takes."""
    tenant_id: str
    """The tenant every request with this key acts for."""
    label: str
    """What the key is for, as its creator wrote it ("" for none)."""
    hint: str
    """The first characters of the secret (``wm_Ab3d``), to recognise it in a list."""
    created_at: datetime
    """When it was created (UTC)."""
    revoked_at: datetime | None = None
    """When it was revoked (UTC); None while it is valid."""

    @property
    def active(self) -> bool:
        """True until the key is revoked."""
        return self.revoked_at is None


@dataclass(frozen=True, slots=True)
class NewApiKey:
    """A key just created: its record, and the secret, which exists only here."""

    key: ApiKey
    secret: str


def new_secret() -> str:
    """A fresh secret: ``wm_`` + 32 random bytes (43 URL-safe characters)."""
    return KEY_PREFIX + secrets.token_urlsafe(32)


def new_key_id() -> str:
    """A fresh public key id."""
    return "key_" + secrets.token_hex(8)


def hash_secret(secret: str) -> str:
    """The stored form of a secret: its SHA-256, hex."""
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def plausible_secret(secret: object) -> bool:
    """False for what cannot be a key (not ours, too long): rejected without a query."""
    return (
        isinstance(secret, str)
        and secret.startswith(KEY_PREFIX)
        and len(secret) <= _MAX_SECRET_CHARS
        and secret.isascii()
    )


def check_label(label: object) -> str:
    """A label: at most 200 printable characters."""
    if not isinstance(label, str):
        raise ValidationError("label", f"must be a string, got {type(label).__name__}")
    if len(label) > MAX_LABEL_CHARS:
        raise ValidationError(
            "label", f"is {len(label)} characters long; the limit is {MAX_LABEL_CHARS}"
        )
    if not label.isprintable():
        raise ValidationError("label", "must not contain control characters")
    return label


def check_key_id(key_id: object) -> str:
    return check_id("key_id", key_id)


@runtime_checkable
class ApiKeyStore(Protocol):
    """API keys, each bound to one tenant."""

    async def create_api_key(self, *, tenant_id: str, label: str = "") -> NewApiKey:
        """Creates a key for the tenant; the secret is in the result and nowhere else."""
        ...

    async def find_api_key(self, secret: str) -> ApiKey | None:
        """The key whose secret this is (revoked or not: check `ApiKey.active`); None for an
        unknown secret. Looks the secret's hash up, so timing says nothing of stored keys."""
        ...

    async def list_api_keys(self, *, tenant_id: str | None = None) -> list[ApiKey]:
        """The keys of one tenant, or of all tenants; oldest first; revoked ones included."""
        ...

    async def revoke_api_key(self, *, key_id: str, tenant_id: str | None = None) -> ApiKey:
        """Revokes a key (at once, for every later request); revoking it again changes
        nothing. `NotFoundError` for an unknown key, or one of another tenant than
        `tenant_id` when given."""
        ...

    async def has_api_keys(self) -> bool:
        """True once any key was ever created (revoked ones count)."""
        ...

    async def open_page_session(self, secret: str, *, ttl_seconds: float) -> str | None:
        """A new session of the web page for the key whose secret this is; its token (shown
        once: only its hash is stored), or None when the key is unknown or revoked."""
        ...

    async def find_page_session(self, token: str) -> ApiKey | None:
        """The key of a live session (not expired, its key still active); None otherwise."""
        ...

    async def close_page_session(self, token: str) -> None:
        """Ends a session (logout); an unknown token changes nothing."""
        ...

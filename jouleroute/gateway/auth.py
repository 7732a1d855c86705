"""API keys: loaded from a file or an env var, kept only as SHA-256 hashes, checked in constant time."""

from __future__ import annotations

import hashlib
import hmac
import os
from pathlib import Path

from jouleroute.gateway.config import AuthConfig

HASH_PREFIX = "sha256:"


def key_hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class KeyStore:
    """The hashes of the accepted keys. ``check`` returns a short key id for logs, or None."""

    def __init__(self, hashes: set[str]) -> None:
        self.hashes = frozenset(hashes)

    @property
    def required(self) -> bool:
        return bool(self.hashes)

    @classmethod
    def load(cls, cfg: AuthConfig, root: Path | None = None) -> "KeyStore":
        entries: list[tuple[str, str]] = []  # (where, entry)
        if cfg.keys_file:
            path = Path(cfg.keys_file)
            path = path if path.is_absolute() or root is None else root / path
            if not path.is_file():
                raise FileNotFoundError(f"gateway.auth.keys_file: {path} does not exist")
            for number, line in enumerate(path.read_text().splitlines(), start=1):
                line = line.strip()
                if line and not line.startswith("#"):
                    entries.append((f"{path}:{number}", line))
        if cfg.keys_env and os.environ.get(cfg.keys_env):
            entries += [(f"${cfg.keys_env}", k.strip()) for k in os.environ[cfg.keys_env].split(",") if k.strip()]
        return cls({_entry_hash(where, entry) for where, entry in entries})

    def check(self, key: str | None) -> str | None:
        if not key:
            return None
        digest = key_hash(key)
        # compare against every hash, so timing says nothing about which prefix matched
        found = False
        for known in self.hashes:
            found |= hmac.compare_digest(digest, known)
        return digest[:8] if found else None


def _entry_hash(where: str, entry: str) -> str:
    if not entry.startswith(HASH_PREFIX):
        return key_hash(entry)
    digest = entry[len(HASH_PREFIX):].lower()
    if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
        raise ValueError(f"{where}: '{HASH_PREFIX}' must be followed by 64 hex digits (sha256 of the key)")
    return digest


def bearer_key(authorization: str | None, api_key_header: str | None) -> str | None:
    """The key from ``Authorization: Bearer <key>`` (what OpenAI clients send) or ``X-API-Key``."""
    if authorization:
        scheme, _, value = authorization.partition(" ")
        if scheme.lower() == "bearer" and value.strip():
            return value.strip()
    return api_key_header or None

"""Deterministic identities, so every write can be repeated without creating anything twice."""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

from memoria_contracts.text import saying

MEMORY_ID_PREFIX = "mem_"
_MEMORY_ID_CHARS = 26  # 130 bits of the hash: collisions are not a practical concern
_ROW_HASH_CHARS = 16


def _digest(*parts: str) -> str:
    raw = hashlib.sha256("\x1f".join(parts).encode()).digest()
    return base64.b32encode(raw).decode().lower().rstrip("=")


def memory_id_for(user_id: str, idempotency_key: str) -> str:
    """The same user saving with the same key always gets the same id; two users never do
    (the user is part of the hash), so an imported file cannot collide with anyone else's."""
    return MEMORY_ID_PREFIX + _digest(user_id, idempotency_key)[:_MEMORY_ID_CHARS]


def row_id_for(memory_id: str, binding: str) -> str:
    """One vector row per (memory, binding text): re-writing a binding is an upsert."""
    return f"{memory_id}.{_digest(binding)[:_ROW_HASH_CHARS]}"


def row_ids_for(memory_id: str, bindings: list[str]) -> list[str]:
    return [row_id_for(memory_id, binding) for binding in bindings]


def content_key_for(content: Any) -> str:
    """The same fact, however it was typed: text with case, spacing, Unicode form and end
    punctuation aside ("I live in Berlin." and "i live in  berlin"); JSON by its canonical
    form (keys sorted). The key is for finding a memory that already says it."""
    if isinstance(content, str):
        canonical = "text:" + saying(content)
    else:
        canonical = "json:" + json.dumps(content, sort_keys=True, ensure_ascii=False)
    return _digest(canonical)

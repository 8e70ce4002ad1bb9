"""The dev login's names: whatever a person types ("João Silva", "李雷", "ana") mapped to a
stable user id the services accept (``[A-Za-z0-9._@-]{1,64}``: ids name stream entries,
keys and partitions, so they stay ASCII).

* A name that already is a valid id is its own id, so "ana" keeps the memories she has.
* Any other name becomes a readable slug plus a short hash of the whole (NFC) name:
  "João Silva" → ``joao-silva.<hash>``. The hash keeps apart names a slug would merge —
  "João Silva" and "Joao Silva" are two people to whoever typed them, and "李雷" and "王芳"
  slug to nothing at all.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from typing import Final

MAX_NAME_CHARS: Final = 64
_VALID_ID: Final = re.compile(r"[A-Za-z0-9._@-]{1,64}")
_NOT_SLUG: Final = re.compile(r"[^a-z0-9]+")
_SLUG_CHARS: Final = 40
_HASH_CHARS: Final = 10
# Bidi embeddings, overrides and isolates: in a name they would reorder whatever is shown
# around it, and nobody's name needs them.
_BIDI_CONTROLS: Final = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


class DisplayNameError(ValueError):
    """A name the dev login cannot take; the message says why."""


def clean_name(typed: str) -> str:
    """The name as it will be shown: NFC, trimmed; refused if empty, too long, or holding
    control characters."""
    name = unicodedata.normalize("NFC", typed).strip()
    if not name:
        raise DisplayNameError("type a name")
    if len(name) > MAX_NAME_CHARS:
        raise DisplayNameError(f"a name is at most {MAX_NAME_CHARS} characters")
    if any(unicodedata.category(c) in ("Cc", "Cs") or c in _BIDI_CONTROLS for c in name):
        raise DisplayNameError("a name cannot hold control characters")
    return name


def user_id_for(name: str) -> str:
    """The user id of a cleaned name (:func:`clean_name`): the same name, the same id."""
    if _VALID_ID.fullmatch(name):
        return name
    plain = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode().lower()
    slug = _NOT_SLUG.sub("-", plain).strip("-")[:_SLUG_CHARS].rstrip("-") or "user"
    digest = hashlib.sha256(name.encode()).hexdigest()[:_HASH_CHARS]
    return f"{slug}.{digest}"

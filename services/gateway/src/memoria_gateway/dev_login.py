"""The dev login: the names it takes, and where it answers.

Names: whatever a person types ("João Silva", "李雷", "ana") mapped to a
stable user id the services accept (``[A-Za-z0-9._@-]{1,64}``: ids name stream entries,
keys and partitions, so they stay ASCII).

* A name that already is a valid id is its own id, so "ana" keeps the memories she has.
* Any other name becomes a readable slug plus a short hash of the whole (NFC) name:
  "João Silva" → ``joao-silva.<hash>``. The hash keeps apart names a slug would merge —
  "João Silva" and "Joao Silva" are two people to whoever typed them, and "李雷" and "王芳"
  slug to nothing at all.

Where: only on requests addressed to this machine by name (``Host``), unless
MEMORIA_DEV_LOGIN_HOSTS names others; and a gateway that listens beyond loopback does not
start with it on unless MEMORIA_DEV_LOGIN_HOSTS says so (:func:`exposed_dev_login`).
"""

from __future__ import annotations

import hashlib
import ipaddress
import re
import unicodedata
from collections.abc import Sequence
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


# -- where the dev login answers ------------------------------------------------------------

LOOPBACK_NAMES: Final = frozenset({"localhost", "127.0.0.1", "::1"})
ANY_HOST: Final = "*"


def host_name(host_header: str) -> str:
    """The name of a ``Host`` header, without its port: ``[::1]:8000`` is ``::1``."""
    host = host_header.strip().lower()
    if host.startswith("["):
        return host[1:].partition("]")[0]
    if host.count(":") == 1:
        return host.partition(":")[0]
    return host


def is_loopback(name: str) -> bool:
    """A name (or address) that can only mean this machine."""
    if name in LOOPBACK_NAMES or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def answers_on(host_header: str | None, allowed: Sequence[str]) -> bool:
    """Whether the dev login answers a request sent to ``host_header``: this machine's own
    names, and those of MEMORIA_DEV_LOGIN_HOSTS. A page on another site that a browser was
    led to believe is 127.0.0.1 (DNS rebinding) still says its own name in ``Host``."""
    if ANY_HOST in allowed:
        return True
    name = host_name(host_header or "")
    return is_loopback(name) or name in {host.lower() for host in allowed}


NOT_HERE: Final = (
    "The dev login answers only requests addressed to this machine (localhost, 127.0.0.1, "
    "::1); log in with a token (`memoria token`), or name this host in "
    "MEMORIA_DEV_LOGIN_HOSTS."
)


def exposed_dev_login(dev_login: bool, bind_host: str, allowed: Sequence[str]) -> str | None:
    """Why a gateway must not start this way (the dev login on, listening beyond this
    machine, and nobody said it may answer there), or None."""
    if not dev_login or is_loopback(host_name(bind_host)) or allowed:
        return None
    return (
        f"MEMORIA_DEV_LOGIN is on and the gateway listens on {bind_host}: anyone who reaches "
        "it could log in as anyone, without a password. Set MEMORIA_DEV_LOGIN=false and log "
        "in with tokens (`memoria token USER`), or, to allow it on purpose, name the host "
        "names it may answer on in MEMORIA_DEV_LOGIN_HOSTS (`*` for any)."
    )

"""Names both adapters accept: collection names, field paths and key specifications.

The SQLite adapter writes collection names and field paths into SQL text (table names and
``json_extract`` paths cannot be bound as parameters and still match an expression index),
so these checks are what keeps caller-supplied keys from ever becoming SQL.
"""

from __future__ import annotations

import re

from memoria_memory.docstore.port import SortSpec, UnsupportedFilter

ID_FIELD = "_id"

_COLLECTION_NAME = re.compile(r"[a-z][a-z0-9_]{0,62}")
# SQLite reserves table names with this prefix for itself.
_RESERVED_PREFIX = "sqlite_"
# Numeric segments are left out on purpose: Mongo reads them as array positions, SQLite's
# JSON paths as object keys, so allowing them would make the adapters disagree.
_FIELD_PATH = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
_MAX_FIELD_PATH = 200
_DIRECTIONS = (1, -1)
_KEY_PAIR_LENGTH = 2


def check_collection_name(name: str) -> str:
    if not isinstance(name, str) or not _COLLECTION_NAME.fullmatch(name):
        raise ValueError(
            f"collection name {name!r} must match {_COLLECTION_NAME.pattern} "
            "(lower-case letters, digits, underscores)"
        )
    if name.startswith(_RESERVED_PREFIX):
        raise ValueError(f"collection names may not start with {_RESERVED_PREFIX!r}")
    return name


def check_field(path: object) -> str:
    """A dotted field path of plain identifiers; anything else is outside the subset."""
    if not isinstance(path, str) or len(path) > _MAX_FIELD_PATH or not _FIELD_PATH.fullmatch(path):
        raise UnsupportedFilter(
            f"field path {path!r} is not supported: use dotted identifiers "
            "(letters, digits, underscores; no array positions)"
        )
    return path


def check_keys(keys: SortSpec, *, what: str) -> list[tuple[str, int]]:
    """Validated ``(field, direction)`` pairs of a sort or an index specification."""
    checked: list[tuple[str, int]] = []
    seen: set[str] = set()
    for entry in keys:
        if not isinstance(entry, tuple) or len(entry) != _KEY_PAIR_LENGTH:
            raise ValueError(f"{what} keys are (field, 1 | -1) pairs, got {entry!r}")
        field, direction = entry
        check_field(field)
        if isinstance(direction, bool) or direction not in _DIRECTIONS:
            raise ValueError(f"{what} direction of {field!r} must be 1 or -1, not {direction!r}")
        if field in seen:
            raise ValueError(f"{what} names {field!r} twice")
        seen.add(field)
        checked.append((field, direction))
    return checked

"""What a write may contain, checked the same way for both adapters, and ``$set``/``$unset``/
``$inc`` applied in Python for the adapter that has no server to do it.

Bad input is a programming error, so it raises ``TypeError``/``ValueError`` before the store
is touched; paths outside the subset raise :class:`UnsupportedFilter` like filter paths do.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import pairwise
from typing import Any

from memoria_memory.docstore.fields import ID_FIELD, check_field
from memoria_memory.docstore.filters import is_scalar
from memoria_memory.docstore.port import Document, DocumentStoreError

# MongoDB's own limit on how deeply documents nest.
_MAX_NESTING = 100
_PATH_SEPARATOR = "."


def check_document(document: Mapping[str, Any], *, require_id: bool) -> Document:
    """A plain-dict copy of a JSON-only document whose ``_id``, when present, is a string."""
    if not isinstance(document, Mapping):
        raise TypeError(f"a document is a mapping, not {type(document).__name__}")
    if ID_FIELD in document:
        if not isinstance(document[ID_FIELD], str):
            raise TypeError(f"_id must be a string, not {type(document[ID_FIELD]).__name__}")
    elif require_id:
        raise ValueError("the document needs a string _id")
    _check_value(document, path="", depth=0)
    return dict(document)


def check_update(
    set: Mapping[str, Any] | None,
    unset: Sequence[str],
    inc: Mapping[str, int | float] | None = None,
) -> tuple[dict[str, Any], list[str], dict[str, int | float]]:
    """Validated ``$set``, ``$unset`` and ``$inc`` paths. Like MongoDB, refuses to touch
    ``_id``, to name one path twice or a path together with one of its parents, and to add
    anything but a number."""
    if set is not None and not isinstance(set, Mapping):
        raise TypeError(f"set is a mapping of paths to values, not {type(set).__name__}")
    if inc is not None and not isinstance(inc, Mapping):
        raise TypeError(f"inc is a mapping of paths to numbers, not {type(inc).__name__}")
    if isinstance(unset, str) or not isinstance(unset, Sequence):
        raise TypeError("unset is a sequence of paths")
    assignments = dict(set or {})
    removals = list(unset)
    increments = dict(inc or {})
    paths = [check_field(path) for path in [*assignments, *removals, *increments]]
    if not paths:
        raise ValueError("an update needs at least one path to set, unset or increment")
    for path in paths:
        if path == ID_FIELD or path.startswith(ID_FIELD + _PATH_SEPARATOR):
            raise ValueError("_id cannot be updated")
    for path, value in assignments.items():
        _check_value(value, path=path, depth=path.count(_PATH_SEPARATOR) + 1)
    for path, amount in increments.items():
        if not _is_number(amount) or not is_scalar(amount):
            raise TypeError(f"{path} can only be incremented by a finite number, not {amount!r}")
    _check_no_overlap(paths)
    return assignments, removals, increments


def apply_update(
    document: Document,
    set: Mapping[str, Any],
    unset: Sequence[str],
    inc: Mapping[str, int | float] | None = None,
) -> None:
    """``$set``, ``$unset`` and ``$inc`` on ``document`` in place; missing parents are
    created, and a missing field is incremented from 0, as MongoDB does.

    Raises :class:`DocumentStoreError` when a parent on the path is not an object
    (MongoDB's PathNotViable), or when the field to increment holds no number or the sum
    leaves the 64-bit range (TypeMismatch, Overflow); the caller then discards the
    half-updated copy.
    """
    for path, value in set.items():
        target, leaf = _parent_of(document, path)
        target[leaf] = value
    for path, amount in (inc or {}).items():
        target, leaf = _parent_of(document, path)
        current = target.get(leaf, 0)
        if not _is_number(current):
            raise DocumentStoreError(
                f"cannot increment {path!r}: it holds a {type(current).__name__}, not a number"
            )
        total = current + amount
        if not is_scalar(total):
            raise DocumentStoreError(f"incrementing {path!r} overflows")
        target[leaf] = total
    for path in unset:
        *parents, leaf = path.split(_PATH_SEPARATOR)
        target = document
        for name in parents:
            child = target.get(name)
            if not isinstance(child, dict):
                break  # nothing there to remove, which MongoDB treats as success
            target = child
        else:
            target.pop(leaf, None)


def _parent_of(document: Document, path: str) -> tuple[Document, str]:
    """The object holding ``path``'s last name (created where missing), and that name."""
    *parents, leaf = path.split(_PATH_SEPARATOR)
    target = document
    for depth, name in enumerate(parents):
        child = target.setdefault(name, {})
        if not isinstance(child, dict):
            parent = _PATH_SEPARATOR.join(parents[: depth + 1])
            raise DocumentStoreError(
                f"cannot update {path!r}: {parent!r} holds a {type(child).__name__}, not an object"
            )
        target = child
    return target, leaf


def _is_number(value: object) -> bool:
    # bool is an int to Python, but never a number to MongoDB.
    return isinstance(value, int | float) and not isinstance(value, bool)


def _check_no_overlap(paths: list[str]) -> None:
    # '.' sorts before every other character a path may hold, so a path's children
    # directly follow it.
    for first, second in pairwise(sorted(paths)):
        if first == second or second.startswith(first + _PATH_SEPARATOR):
            raise ValueError(f"updating {second!r} would conflict with {first!r}")


def _check_value(value: object, *, path: str, depth: int) -> None:
    if depth > _MAX_NESTING:
        raise ValueError(f"{path or 'the document'} nests deeper than {_MAX_NESTING} levels")
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"{path or 'the document'} has a non-string key {key!r}")
            if key.startswith("$"):
                raise ValueError(f"field names may not start with '$': {key!r}")
            _check_value(item, path=f"{path}.{key}" if path else key, depth=depth + 1)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_value(item, path=f"{path}[{index}]", depth=depth + 1)
    elif not is_scalar(value):
        raise TypeError(
            f"{path or 'the document'} holds a {type(value).__name__}: documents hold JSON "
            "values only (str, finite float, 64-bit int, bool, None, list, dict)"
        )

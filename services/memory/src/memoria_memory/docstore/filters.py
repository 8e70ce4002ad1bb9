"""The filter subset of the port, parsed into a small tree by one validator.

Both adapters call :func:`parse_filter` before touching their store, so a filter one of
them cannot serve is refused by both with the same :class:`UnsupportedFilter`. The SQLite
adapter compiles the tree; the Mongo adapter sends the (validated) original filter.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, TypeAlias, TypeGuard

from memoria_memory.docstore.fields import check_field
from memoria_memory.docstore.port import Filter, UnsupportedFilter

Scalar: TypeAlias = str | int | float | bool | None
ComparisonOp: TypeAlias = Literal["$eq", "$ne", "$gt", "$gte", "$lt", "$lte"]

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

_EQUALITY_OPS: dict[str, ComparisonOp] = {"$eq": "$eq", "$ne": "$ne"}
_RANGE_OPS: dict[str, ComparisonOp] = {"$gt": "$gt", "$gte": "$gte", "$lt": "$lt", "$lte": "$lte"}
_MEMBERSHIP_OPS: frozenset[str] = frozenset({"$in", "$nin"})
_LOGICAL_OPS: frozenset[str] = frozenset({"$and", "$or"})
# MongoDB refuses deeper nesting too; the limit also bounds recursion here.
_MAX_NESTING = 100


@dataclass(frozen=True, slots=True)
class Compare:
    field: str
    op: ComparisonOp
    value: Scalar


@dataclass(frozen=True, slots=True)
class In:
    field: str
    values: tuple[Scalar, ...]
    negated: bool


@dataclass(frozen=True, slots=True)
class Exists:
    field: str
    present: bool


@dataclass(frozen=True, slots=True)
class And:
    parts: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Or:
    parts: tuple[Node, ...]


Node: TypeAlias = Compare | In | Exists | And | Or


def parse_filter(filter: Filter) -> Node:
    """The filter as a tree; :class:`UnsupportedFilter` for anything outside the subset."""
    return _parse_document(filter, depth=0)


def check_page(limit: int, skip: int) -> None:
    for name, value in (("limit", limit), ("skip", skip)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be a non-negative integer, not {value!r}")


def is_scalar(value: object) -> TypeGuard[Scalar]:
    if value is None or isinstance(value, str | bool):
        return True
    if isinstance(value, int):
        return INT64_MIN <= value <= INT64_MAX
    return isinstance(value, float) and math.isfinite(value)


def _parse_document(filter: object, *, depth: int) -> And:
    if not isinstance(filter, Mapping):
        raise UnsupportedFilter(f"a filter is a mapping, not {type(filter).__name__}")
    if depth > _MAX_NESTING:
        raise UnsupportedFilter(f"filters nest at most {_MAX_NESTING} levels")
    parts: list[Node] = []
    for key, condition in filter.items():
        if key in _LOGICAL_OPS:
            parts.append(_parse_logical(key, condition, depth=depth))
        elif isinstance(key, str) and key.startswith("$"):
            raise UnsupportedFilter(f"operator {key} is not supported")
        else:
            parts.extend(_parse_condition(check_field(key), condition))
    return And(tuple(parts))


def _parse_logical(op: str, operand: object, *, depth: int) -> Node:
    if not isinstance(operand, list | tuple) or not operand:
        raise UnsupportedFilter(f"{op} takes a non-empty list of filters")
    parts = tuple(_parse_document(sub, depth=depth + 1) for sub in operand)
    return And(parts) if op == "$and" else Or(parts)


def _parse_condition(field: str, condition: object) -> list[Node]:
    if not isinstance(condition, Mapping):
        return [Compare(field, "$eq", _scalar(field, "$eq", condition))]
    if not condition:
        raise UnsupportedFilter(f"{field}: matching an empty object is not supported")
    nodes: list[Node] = []
    for op, operand in condition.items():
        if not isinstance(op, str) or not op.startswith("$"):
            raise UnsupportedFilter(f"{field}: matching a whole object is not supported")
        nodes.append(_parse_operator(field, op, operand))
    return nodes


def _parse_operator(field: str, op: str, operand: object) -> Node:
    if op in _EQUALITY_OPS:
        return Compare(field, _EQUALITY_OPS[op], _scalar(field, op, operand))
    if op in _RANGE_OPS:
        # MongoDB's range semantics for null (``$gte: null`` matches missing fields,
        # ``$gt: null`` nothing) are a trap; the subset leaves them out.
        if operand is None:
            raise UnsupportedFilter(f"{field}: {op} needs a string, number or boolean")
        return Compare(field, _RANGE_OPS[op], _scalar(field, op, operand))
    if op in _MEMBERSHIP_OPS:
        if not isinstance(operand, list | tuple):
            raise UnsupportedFilter(f"{field}: {op} takes a list of values")
        values = tuple(_scalar(field, op, value) for value in operand)
        return In(field, values, negated=op == "$nin")
    if op == "$exists":
        if not isinstance(operand, bool):
            raise UnsupportedFilter(f"{field}: $exists takes true or false")
        return Exists(field, operand)
    raise UnsupportedFilter(f"{field}: operator {op} is not supported")


def _scalar(field: str, op: str, value: object) -> Scalar:
    if not is_scalar(value):
        raise UnsupportedFilter(
            f"{field}: {op} compares with strings, finite numbers (64-bit integers), "
            f"booleans or null, not {type(value).__name__}"
        )
    return value

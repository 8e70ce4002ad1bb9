"""The filter tree, sort and index keys as SQLite SQL over JSON documents.

Each table is ``(id TEXT PRIMARY KEY, doc TEXT)``: ``_id`` lives in ``id``, every other field
in the JSON text of ``doc``. Values are always bound parameters; only validated field paths
(see ``fields.py``) are written into the SQL, as ``json_extract`` paths that must be literal
for SQLite to match them against expression indexes.

MongoDB compares values of the same type only ("type bracketing"), while SQLite happily
compares across types and reads JSON ``true``/``false`` back as 1/0. Every comparison is
therefore guarded by ``json_type``, so ``{"n": 1}`` matches neither ``true`` nor ``"1"``.
``json_extract`` yields SQL NULL for both JSON null and a missing field, which is exactly
MongoDB's ``{"f": None}``; ``json_type`` tells them apart for ``$exists``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from memoria_memory.docstore.fields import ID_FIELD
from memoria_memory.docstore.filters import And, Compare, Exists, In, Node, Or, Scalar

_SQL_OPERATORS = {"$eq": "=", "$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}
_NUMBER_TYPES = "('integer', 'real')"
_BOOLEAN_TYPES = "('true', 'false')"
_TRUE = "1"
_FALSE = "0"
# An empty blob: json_extract never returns one, so it stands for "null or missing" in the
# index that gives unique indexes MongoDB's rule that only one document may lack the key.
_NULL_KEY = "x''"


@dataclass(frozen=True, slots=True)
class _Field:
    value: str  # the field's value as SQL; NULL when null or missing
    type: str  # the field's JSON type name; NULL when missing


def quote(identifier: str) -> str:
    """A validated identifier as SQL; quoting also keeps keywords ("order") usable."""
    return f'"{identifier}"'


def value_sql(path: str) -> str:
    return _field(path).value


def _field(path: str) -> _Field:
    if path == ID_FIELD:
        return _Field("id", "'text'")
    json_path = f"'$.{path}'"
    return _Field(f"json_extract(doc, {json_path})", f"json_type(doc, {json_path})")


@dataclass
class WhereClause:
    """Compiles a filter tree; ``params`` collects the values bound to its ``?``."""

    params: list[Any] = field(default_factory=list)

    def compile(self, node: Node) -> str:
        match node:
            case And(parts):
                return self._join(parts, " AND ", empty=_TRUE)
            case Or(parts):
                return self._join(parts, " OR ", empty=_FALSE)
            case Exists(path, present):
                return f"{_field(path).type} IS {'NOT ' if present else ''}NULL"
            case In(path, values, negated):
                matches = self._member(_field(path), values)
                return _negate(matches) if negated else matches
            case Compare(path, "$ne", value):
                return _negate(self._compare(_field(path), "$eq", value))
            case Compare(path, op, value):
                return self._compare(_field(path), op, value)
        raise AssertionError(f"unknown filter node {node!r}")  # pragma: no cover

    def _join(self, parts: tuple[Node, ...], glue: str, *, empty: str) -> str:
        if not parts:
            return empty
        return "(" + glue.join(self.compile(part) for part in parts) + ")"

    def _bind(self, value: Any) -> str:
        self.params.append(value)
        return "?"

    def _compare(self, target: _Field, op: str, value: Scalar) -> str:
        sql_op = _SQL_OPERATORS[op]
        if value is None:  # only $eq reaches here with None: ranges on null are refused
            return f"{target.value} IS NULL"
        if isinstance(value, bool):
            if op == "$eq":
                return f"{target.type} = '{'true' if value else 'false'}'"
            # json_extract reads booleans as 1/0, which keeps false < true as in MongoDB
            placeholder = self._bind(int(value))
            return f"({target.type} IN {_BOOLEAN_TYPES} AND {target.value} {sql_op} {placeholder})"
        kind = "= 'text'" if isinstance(value, str) else f"IN {_NUMBER_TYPES}"
        return f"({target.type} {kind} AND {target.value} {sql_op} {self._bind(value)})"

    def _member(self, target: _Field, values: tuple[Scalar, ...]) -> str:
        strings = [v for v in values if isinstance(v, str)]
        numbers = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
        alternatives: list[str] = []
        if strings:
            alternatives.append(
                f"({target.type} = 'text' AND {target.value} IN ({self._bind_all(strings)}))"
            )
        if numbers:
            alternatives.append(
                f"({target.type} IN {_NUMBER_TYPES} AND "
                f"{target.value} IN ({self._bind_all(numbers)}))"
            )
        alternatives.extend(
            f"{target.type} = '{'true' if flag else 'false'}'"
            for flag in (True, False)
            if any(v is flag for v in values)
        )
        if any(v is None for v in values):
            alternatives.append(f"{target.value} IS NULL")
        if not alternatives:
            return _FALSE
        return "(" + " OR ".join(alternatives) + ")"

    def _bind_all(self, values: list[Any]) -> str:
        return ", ".join(self._bind(value) for value in values)


def _negate(condition: str) -> str:
    # A guard on a missing field is NULL, and NOT NULL is NULL, which would drop the very
    # documents that $ne/$nin must match; IFNULL makes "unknown" a plain "no match" first.
    return f"NOT IFNULL({condition}, 0)"


def order_by(keys: list[tuple[str, int]]) -> str:
    """SQLite orders NULL < numbers < text, as MongoDB orders null/missing < numbers <
    strings; within one type both order the same way (text byte-wise, like MongoDB's
    default binary collation)."""
    return ", ".join(
        f"{value_sql(path)} {'ASC' if direction == 1 else 'DESC'}" for path, direction in keys
    )


def index_name(table: str, keys: list[tuple[str, int]]) -> str:
    """MongoDB's default index name, but separated by characters no field path or table
    name can hold (so ``[("a", 1), ("b", 1)]`` and ``[("a_1_b", 1)]`` differ), and prefixed
    by the table because SQLite index names are global."""
    return f"{table}:" + ",".join(f"{path}_{direction}" for path, direction in keys)


def index_statements(table: str, keys: list[tuple[str, int]], *, unique: bool) -> list[str]:
    """DDL for the index. A unique index gets a partial companion over the documents that
    lack some key: SQLite lets any number of NULL keys coexist, MongoDB only one."""
    name = index_name(table, keys)
    columns = ", ".join(
        f"{value_sql(path)}{'' if direction == 1 else ' DESC'}" for path, direction in keys
    )
    kind = "UNIQUE INDEX" if unique else "INDEX"
    statements = [f"CREATE {kind} IF NOT EXISTS {quote(name)} ON {quote(table)} ({columns})"]
    if unique:
        null_keys = ", ".join(f"IFNULL({value_sql(path)}, {_NULL_KEY})" for path, _ in keys)
        any_null = " OR ".join(f"{value_sql(path)} IS NULL" for path, _ in keys)
        statements.append(
            f"CREATE UNIQUE INDEX IF NOT EXISTS {quote(name + ':nulls')} "
            f"ON {quote(table)} ({null_keys}) WHERE {any_null}"
        )
    return statements

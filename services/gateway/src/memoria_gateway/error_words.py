"""Validation errors in the user's words: "Content is empty.", not "bindings: Field required"
or "Value error, …".

pydantic says what failed in a validator's terms; a person reading a 422, an error frame or
`memoria import`'s report needs one sentence that names the field as they wrote it and says
what to change. Each error keeps its ``loc`` and ``type`` (what a program reads); its
``msg`` becomes that sentence; of what was sent it keeps at most a short excerpt.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from memoria_contracts.text import CONTROL_CHARACTER
from memoria_contracts.times import NOT_ISO_8601, OUT_OF_RANGE, STORABLE_RANGE

EXCERPT_CHARS: Final = 80
"""The most of a refused value an error echoes (a body may be megabytes)."""
ELLIPSIS: Final = "…"
_OWN_PREFIXES: Final = ("Value error, ", "Assertion failed, ")
_SECTIONS: Final = frozenset({"body", "query", "path", "header", "cookie"})

FIELD_NAMES: Final[Mapping[str, str]] = {
    "q": "The query",
    "creation_datetime": "The creation time",
    "since": "since",
    "until": "until",
    "memory_type": "The memory type",
    "content_kind": "The content kind",
    "user_id": "The user id",
    "thread_id": "The thread id",
    "idempotency_key": "The idempotency key",
    "system_prompt": "The system prompt",
}
"""How a field is named at the start of a sentence, where plain capitalising reads badly."""

_KINDS: Final[Mapping[str, str]] = {
    "string_type": "text",
    "string_sub_type": "text",
    "int_type": "a whole number",
    "int_parsing": "a whole number",
    "int_from_float": "a whole number",
    "float_type": "a number",
    "float_parsing": "a number",
    "finite_number": "a finite number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "list_type": "a list",
    "dict_type": "a JSON object",
    "model_type": "a JSON object",
    "model_attributes_type": "a JSON object",
    "none_required": "null",
}
_DATETIME_TYPES: Final = frozenset(
    {
        NOT_ISO_8601,
        "datetime_type",
        "datetime_parsing",
        "datetime_from_date_parsing",
        "datetime_object_invalid",
        "timezone_aware",
        "timezone_naive",
    }
)
DATETIME_FORM: Final = "a date and time in ISO 8601 with its UTC offset, e.g. 2025-01-31T09:30:00Z"


def field_name(loc: Sequence[Any]) -> str:
    """The field an error is about, as a sentence starts with it: ``("body", "content")`` is
    "Content", ``("body", "bindings", 2)`` is "Binding 3", an error of the whole body "The
    request"."""
    parts = [part for part in loc if part not in _SECTIONS]
    while parts and not isinstance(parts[-1], str | int):
        parts.pop()
    if not parts:
        return "The request"
    last = parts[-1]
    if isinstance(last, int):
        names = [part for part in parts if isinstance(part, str)]
        item = _singular(names[-1]) if names else "item"
        return f"{item.replace('_', ' ').capitalize()} {last + 1}"
    named = FIELD_NAMES.get(str(last))
    if named is not None:
        return named
    return str(last).replace("_", " ").capitalize()


def _singular(name: str) -> str:
    if name.endswith("ies"):
        return name[:-3] + "y"
    if name.endswith("s") and not name.endswith("ss"):
        return name[:-1]
    return name


def sentence(error: Mapping[str, Any]) -> str:
    """One error as a sentence in the user's words."""
    kind = str(error.get("type", ""))
    ctx: Mapping[str, Any] = error.get("ctx") or {}
    loc = error.get("loc", ())
    field = field_name(loc)
    raw = str(error.get("msg", ""))
    if kind in ("value_error", "assertion_error", "invalid") or raw.startswith(_OWN_PREFIXES):
        return _own(raw)
    if kind == "missing":
        return f"{field} is required."
    if kind == "extra_forbidden":
        return f"'{loc[-1]}' is not a field this request takes." if loc else raw
    if kind == "string_too_short":
        if ctx.get("min_length", 1) <= 1:
            return f"{field} is empty."
        return f"{field} must be at least {ctx['min_length']} characters."
    if kind == "string_too_long":
        return f"{field} is longer than {ctx.get('max_length', 'the allowed')} characters."
    if kind == "too_short":
        return f"{field} must have at least {_items(ctx.get('min_length', 1))}."
    if kind == "too_long":
        return f"{field} must have at most {_items(ctx.get('max_length', 0))}."
    if kind in ("literal_error", "enum"):
        return f"{field} must be {ctx.get('expected', 'one of the allowed values')}."
    if kind == "string_pattern_mismatch":
        return f"{field} is not in the form it must have."
    if kind in _DATETIME_TYPES:
        return f"{field} must be {DATETIME_FORM}."
    if kind == OUT_OF_RANGE:
        return f"{field} must fall between {STORABLE_RANGE} (UTC): no other time can be kept."
    if kind == CONTROL_CHARACTER:
        return (
            f"{field} holds the control character {ctx.get('code_point', '')}; text may hold "
            "tab and newline, no other control character."
        )
    if kind == "json_invalid":
        reason = ctx.get("error")
        return f"The body is not valid JSON{f' ({reason})' if reason else ''}."
    if kind in _KINDS:
        return f"{field} must be {_KINDS[kind]}."
    bound = _bound(kind, ctx)
    if bound:
        return f"{field} must be {bound}."
    return _own(f"{field}: {raw}")


def _items(count: Any) -> str:
    return f"{count} item" if count == 1 else f"{count} items"


def _bound(kind: str, ctx: Mapping[str, Any]) -> str | None:
    words = {
        "greater_than_equal": ("ge", "at least"),
        "greater_than": ("gt", "more than"),
        "less_than_equal": ("le", "at most"),
        "less_than": ("lt", "less than"),
    }
    if kind not in words:
        return None
    key, said = words[kind]
    return f"{said} {ctx.get(key)}"


def _own(message: str) -> str:
    """A message written for people already (a validator's ValueError): without pydantic's
    prefix, capitalised, ending in a full stop."""
    for prefix in _OWN_PREFIXES:
        message = message.removeprefix(prefix)
    message = message.strip()
    if not message:
        return "The request is not valid."
    message = message[0].upper() + message[1:]
    return message if message.endswith((".", "?", "!")) else message + "."


def excerpt(value: Any) -> Any:
    """What an error may echo of a refused value: a short text, a small number or a flag;
    nothing of a list or an object (they may be any size). None when nothing is echoed."""
    if isinstance(value, str):
        text = value.encode("utf-8", "replace").decode("utf-8")  # a lone surrogate -> "?"
        return text if len(text) <= EXCERPT_CHARS else text[: EXCERPT_CHARS - 1] + ELLIPSIS
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # JSON has no NaN: said as text
    if isinstance(value, int | float):
        return value if len(json.dumps(value)) <= EXCERPT_CHARS else excerpt(str(value))
    return None


def in_user_words(errors: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """FastAPI's shape (``loc``, ``msg``, ``type``, and ``input`` when it is short and
    scalar), each ``msg`` a sentence in the user's words; contexts and URLs are dropped."""
    said = []
    for error in errors:
        loc = [part if isinstance(part, str | int) else str(part) for part in error.get("loc", ())]
        entry: dict[str, Any] = {"loc": loc, "msg": sentence(error), "type": error.get("type")}
        shown = excerpt(error["input"]) if "input" in error else None
        if shown is not None:
            entry["input"] = shown
        said.append(entry)
    return said


def one_line(errors: Iterable[Mapping[str, Any]], most: int = 3) -> str:
    """The first ``most`` errors as one line of sentences (an error frame, an OpenAI error)."""
    sentences = list(dict.fromkeys(sentence(error) for error in errors))
    return " ".join(sentences[:most]) or "The request is not valid."

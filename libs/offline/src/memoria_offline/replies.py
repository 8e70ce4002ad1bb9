"""What the offline planner says (the ``chat`` mode): short templates in the user's language,
filled from the results the memory actions pass along (``LLMRequest.metadata["results"]``).
It never pretends to be a model: its answers tell back what memory holds (``telling``), and
the first answer of a conversation says that no language model is configured."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, Final, Literal

from memoria_contracts.text import one_line
from memoria_offline import telling
from memoria_text import i18n
from memoria_text.folding import fold

Language = Literal["en", "pt"]

LABEL: Final = "offline planner (no LLM)"
"""Who wrote each answer (``ChatRecord.model``): the planner's name on every message."""

QUOTE_CHARS: Final = 120
MAX_LISTED: Final = 10

_DELETE_ALL_MARKS: Final = ("delete all your memories", "apague todas as suas memorias")
"""What marks the planner's own delete-everything question (folded), in either language."""
_PREFIX: Final = "offline_"
"""The planner's texts are in the one catalogue, ``memoria_text.i18n.TEXTS``, under this
prefix."""


def text(key: str, language: Language, **values: object) -> str:
    return i18n.text(_PREFIX + key, language, **values)


def delete_all_question(language: Language) -> str:
    return i18n.text(_PREFIX + "delete_all_question", language)


_WRITTEN_KEYS: Final = ("saved", "already_saved", "updated")
_QUOTED_ANSWERS: Final = (
    "Saved: ",
    "I already had that: ",
    "Updated: ",
    "Guardei: ",
    "Isso eu já tinha guardado: ",
    "Atualizei: ",
)
"""How the planner's answers began when they quoted what they wrote (threads kept from
then): the last quoted item is what was written."""
_QUOTED: Final = re.compile(r'"([^"]+)"')


def last_written(message: str) -> str | None:
    """What the planner's answer ``message`` says it saved or changed ("Noted: you live in
    Recife." → "you live in Recife"), or None for any other answer."""
    if message.startswith(_QUOTED_ANSWERS) and (quoted := _quoted_written(message)):
        return quoted
    first_line = message.split("\n", 1)[0]
    for key in _WRITTEN_KEYS:
        for language in ("en", "pt"):
            prefix, _, suffix = i18n.TEXTS[_PREFIX + key][language].partition("{items}")
            if first_line.startswith(prefix) and first_line.endswith(suffix):
                said = first_line[len(prefix) : len(first_line) - len(suffix)].strip()
                return said or None
    return None


def _quoted_written(message: str) -> str | None:
    first_part = message.split('". ', 1)[0]  # not what follows ("I could not save …")
    quoted = _QUOTED.findall(first_part + '"')
    return quoted[-1].removesuffix("…") if quoted else None


def is_ask_missing(message: str) -> bool:
    """Whether ``message`` is the planner asking the user for what memory lacked."""
    return message in i18n.TEXTS[_PREFIX + "ask_missing"].values()


def is_delete_all_question(message: str) -> bool:
    folded = fold(message)
    return any(mark in folded for mark in _DELETE_ALL_MARKS)


_NEVER_NAMES: Final = frozenset(
    {
        *("my", "our", "your", "the", "a", "an"),
        *("meu", "minha", "meus", "minhas", "nosso", "nossa", "seu", "sua"),
        *("o", "os", "as", "um", "uma"),
        *("what", "what's", "whats", "where", "when", "who", "which", "how", "why", "do", "did"),
        *("qual", "quais", "onde", "quando", "quem", "como", "porque", "por"),
    }
)
"""First words a statement capitalises only because they start it (``text.tidy``)."""


def mid_sentence(statement: str) -> str:
    """``statement`` quoted inside a sentence: one line, and "My passport" as "my passport"
    (a first word that is never a name loses the capital ``tidy`` gave it)."""
    line = one_line(statement, QUOTE_CHARS)
    first = line.split(" ", 1)[0]
    return line[:1].lower() + line[1:] if fold(first) in _NEVER_NAMES else line


def quote(content: object) -> str:
    return f'"{one_line(content, QUOTE_CHARS)}"'


def listing(items: Sequence[str]) -> str:
    shown = list(items[:MAX_LISTED])
    if len(items) > MAX_LISTED:
        shown.append(f"+{len(items) - MAX_LISTED}")
    return "; ".join(shown)


def results_of(metadata: dict[str, str], key: str = "results") -> dict[str, Any]:
    """The JSON object the action put under ``key`` (``{}`` when there is none)."""
    try:
        results = json.loads(metadata.get(key, "{}"))
    except json.JSONDecodeError:
        return {}
    return results if isinstance(results, dict) else {}


def quoted(entries: Sequence[Any], field: str = "content") -> str:
    """Each entry's ``field`` quoted, listed."""
    return listing([quote(e.get(field)) if isinstance(e, dict) else quote(e) for e in entries])


def _period(since: object, until: object) -> str:
    """A search's time window as days ("2026-11-16 – 2026-11-22"; ``until`` is exclusive),
    or "" without one."""
    first = datetime.fromisoformat(since).date().isoformat() if isinstance(since, str) else ""
    last = ""
    if isinstance(until, str):
        last = (datetime.fromisoformat(until) - timedelta(microseconds=1)).date().isoformat()
    return f"{first} – {last}".strip() if first or last else ""


def _contents(entries: Sequence[Any], field: str = "content") -> list[Any]:
    return [e.get(field) if isinstance(e, dict) else e for e in entries]


def found_answer(found: Sequence[Any], language: Language) -> str:
    """Memories found for a question, told back: a sentence, or a short list."""
    contents = _contents(found)
    if len(contents) <= telling.SENTENCE_ITEMS:
        return telling.sentence(contents, language)
    items = telling.bullet_list(telling.listed(contents, language))
    return text("found_list", language, items=items)


def listed_answer(found: Sequence[Any], language: Language) -> str:
    """Everything asked for ("what do you know about me?"), as a list."""
    contents = _contents(found)
    items = telling.bullet_list(telling.listed(contents, language))
    answer = text("listed", language, items=items)
    if len(contents) > telling.MAX_LISTED:
        answer += "\n" + text("listed_more", language, count=len(contents) - telling.MAX_LISTED)
    return answer


def told_items(entries: Sequence[Any], field: str = "content", *, language: Language) -> str:
    """Memories named in one line ("you live in Recife, and you drink tea")."""
    return telling.mid_sentence(telling.sentence(_contents(entries, field), language).rstrip("."))


def explanation(task: str, results: dict[str, Any], language: Language) -> str:
    """The short answer a memory action streams after its work."""
    if task == "MemorySave":
        parts = [
            text(key, language, items=told_items(entries, language=language))
            for key in ("saved", "already_saved")
            if (entries := results.get(key))
        ]
        if refused := results.get("not_saved"):
            parts.append(text("not_saved", language, items=quoted(refused)))
        return " ".join(parts) or text("done", language)
    if task == "MemorySearch":
        if found := results.get("found"):
            if results.get("mode") == "chronological":
                return listed_answer(found, language)
            return found_answer(found, language)
        if period := _period(results.get("since"), results.get("until")):
            return text("told_none", language, period=period)
        if results.get("mode") == "chronological":
            return text("listed_none", language)
        # The first query is the user's words; the rules' others are topic keys and keywords.
        query = (results.get("looked_for") or [""])[0]
        return text("found_none", language, query=query)
    if task == "MemoryUpdate":
        return _changed(results, "updated", "new_content", language)
    if task == "MemoryDelete":
        return _changed(results, "deleted", "deleted_content", language)
    return text("done", language)


def _changed(results: dict[str, Any], done: str, content_key: str, language: Language) -> str:
    """An update's or a delete's answer: what was ``done`` (``updated``, ``deleted``; each
    told by its ``content_key``), then what was not found or refused."""
    parts = []
    if changed := results.get(done):
        parts.append(
            text(done, language, items=told_items(changed, content_key, language=language))
        )
    missing = [*results.get("not_found", []), *results.get(f"not_{done}", [])]
    if missing:
        parts.append(text("missing", language, items=listing(missing)))
    return " ".join(parts) or text("done", language)

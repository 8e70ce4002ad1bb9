"""What the offline planner says (the ``chat`` mode): short templates in the user's language,
filled from the results the memory actions pass along (``LLMRequest.metadata["results"]``).
It never pretends to be a model: its answers repeat what memory holds, and the closing line
says that no language model is configured."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, Final, Literal

from memoria_contracts.text import ELLIPSIS, one_line
from memoria_llm.offline.text import fold

Language = Literal["en", "pt"]

LABEL: Final = "offline planner (no LLM)"
"""Who wrote each answer (``ChatRecord.model``): the planner's name on every message."""

QUOTE_CHARS: Final = 120
MAX_LISTED: Final = 10

_DELETE_ALL_QUESTION: Final[dict[Language, str]] = {
    "en": "Do you really want me to delete ALL your memories? This cannot be undone. "
    'Reply "yes" to confirm, or anything else to keep them.',
    "pt": "Você quer mesmo que eu apague TODAS as suas memórias? Isso não pode ser desfeito. "
    'Responda "sim" para confirmar, ou qualquer outra coisa para mantê-las.',
}
_DELETE_ALL_MARKS: Final = ("delete all your memories", "apague todas as suas memorias")

_TEXTS: Final[dict[str, dict[Language, str]]] = {
    "saved": {"en": "Saved: {items}.", "pt": "Guardei: {items}."},
    "not_saved": {"en": "I could not save {items}.", "pt": "Não consegui guardar {items}."},
    "already_saved": {
        "en": "I already had that: {items}.",
        "pt": "Isso eu já tinha guardado: {items}.",
    },
    "found": {"en": "From your memories: {items}.", "pt": "Nas suas memórias: {items}."},
    # Before a correction or a forget: what was found is the target, not an answer.
    "found_target": {"en": "Found: {items}.", "pt": "Encontrei: {items}."},
    "found_unsure": {
        "en": 'Nothing I found is clearly about "{query}"; the closest: {items}.',
        "pt": 'Nada do que encontrei é claramente sobre "{query}"; o mais próximo: {items}.',
    },
    "found_none": {
        "en": 'I found nothing about "{query}" in your memories.',
        "pt": 'Não encontrei nada sobre "{query}" nas suas memórias.',
    },
    "looked_for": {
        "en": 'I looked for "{query}" in your memories.',
        "pt": 'Procurei "{query}" nas suas memórias.',
    },
    "listed_none": {
        "en": "You have no memories saved yet.",
        "pt": "Você ainda não tem memórias guardadas.",
    },
    "updated": {"en": "Updated: {items}.", "pt": "Atualizei: {items}."},
    "deleted": {"en": "Forgotten: {items}.", "pt": "Esqueci: {items}."},
    "missing": {
        "en": "I could not find the memory to change ({items}).",
        "pt": "Não encontrei a memória para alterar ({items}).",
    },
    "ask_missing": {
        "en": "I don't have that in my memory yet. Could you tell me?",
        "pt": "Ainda não tenho isso na memória. Pode me contar?",
    },
    "no_answer": {
        "en": "All right. Tell me whenever you like, and I will remember it.",
        "pt": "Tudo bem. Quando quiser, me conte, e eu guardo.",
    },
    "ask_more": {
        "en": "Could you tell me a bit more?",
        "pt": "Pode me contar um pouco mais?",
    },
    "nothing_to_forget": {
        "en": 'I found no memory about "{query}", so I forgot nothing.',
        "pt": 'Não encontrei nenhuma memória sobre "{query}", então não esqueci nada.',
    },
    "ask_what_to_forget": {
        "en": 'What should I forget? Tell me what it is about, for example "forget my address".',
        "pt": 'O que devo esquecer? Diga do que se trata, por exemplo "esqueça meu endereço".',
    },
    "cancelled": {"en": "Okay, cancelled.", "pt": "Tudo bem, cancelado."},
    "kept": {
        "en": "Okay, I kept all your memories.",
        "pt": "Tudo bem, mantive todas as suas memórias.",
    },
    "failed": {
        "en": "Something went wrong: {detail}.",
        "pt": "Algo deu errado: {detail}.",
    },
    "done": {"en": "Done.", "pt": "Pronto."},
    "thanks": {"en": "You're welcome!", "pt": "De nada!"},
    "bye": {
        "en": "Bye! Your memories stay saved here.",
        "pt": "Tchau! Suas memórias ficam guardadas aqui.",
    },
    "no_model": {
        "en": "(This is the offline planner: no language model is configured, so I only manage "
        "and recall your memories. Set GEMINI_API_KEY for full answers.)",
        "pt": "(Aqui é o planejador offline: nenhum modelo de linguagem está configurado, então "
        "só guardo e recupero suas memórias. Defina GEMINI_API_KEY para respostas completas.)",
    },
    "introduction": {
        "en": 'Hi! I can remember things for you ("remember that I am allergic to '
        'peanuts"), recall them ("what am I allergic to?"), correct them ("actually, '
        '...") and forget them ("forget my allergy").',
        "pt": 'Olá! Posso guardar coisas para você ("lembre que sou alérgico a amendoim"), '
        'lembrar delas ("do que eu tenho alergia?"), corrigi-las ("na verdade, ...") e '
        'esquecê-las ("esqueça minha alergia").',
    },
}


def text(key: str, language: Language, **values: object) -> str:
    return _TEXTS[key][language].format(**values)


def delete_all_question(language: Language) -> str:
    return _DELETE_ALL_QUESTION[language]


_QUOTED: Final = re.compile(r'"([^"]+)"')


def last_written(message: str) -> str | None:
    """The memory the planner's answer ``message`` says it saved or changed last (the last
    quoted item of a "Saved: …" or "Updated: … → …"), or None for any other answer."""
    prefixes = [
        _TEXTS[key][language].split("{", 1)[0]
        for key in ("saved", "already_saved", "updated")
        for language in ("en", "pt")
    ]
    if not message.startswith(tuple(prefixes)):
        return None
    first_part = message.split('". ', 1)[0]  # not what follows ("I could not save …")
    quoted = _QUOTED.findall(first_part + '"')
    return quoted[-1].removesuffix(ELLIPSIS) if quoted else None


def is_ask_missing(message: str) -> bool:
    """Whether ``message`` is the planner asking the user for what memory lacked."""
    return message in _TEXTS["ask_missing"].values()


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


def explanation(task: str, results: dict[str, Any], language: Language) -> str:
    """The short explanation a memory action streams after its work."""
    if task == "MemorySave":
        parts = [
            text(key, language, items=quoted(entries))
            for key in ("saved", "already_saved", "not_saved")
            if (entries := results.get(key))
        ]
        return " ".join(parts) or text("done", language)
    if task == "MemorySearch":
        if found := results.get("found"):
            return text("found", language, items=quoted(found))
        if results.get("mode") == "chronological":
            return text("listed_none", language)
        # The first query is the user's words; the rules' others are topic keys and keywords.
        query = (results.get("looked_for") or [""])[0]
        return text("found_none", language, query=query)
    if task == "MemoryUpdate":
        parts = []
        if updated := results.get("updated"):
            items = [
                f"{quote(u.get('old_content'))} → {quote(u.get('new_content'))}" for u in updated
            ]
            parts.append(text("updated", language, items=listing(items)))
        missing = [*results.get("not_found", []), *results.get("not_updated", [])]
        if missing:
            parts.append(text("missing", language, items=listing(missing)))
        return " ".join(parts) or text("done", language)
    if task == "MemoryDelete":
        parts = []
        if deleted := results.get("deleted"):
            parts.append(text("deleted", language, items=quoted(deleted, "deleted_content")))
        missing = [*results.get("not_found", []), *results.get("not_deleted", [])]
        if missing:
            parts.append(text("missing", language, items=listing(missing)))
        return " ".join(parts) or text("done", language)
    return text("done", language)

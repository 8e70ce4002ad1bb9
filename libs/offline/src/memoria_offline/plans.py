"""What each memory action asks the model for (the ``reasoning`` mode), written by rules in
the JSON shape the actions' schemas accept."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, Final

from memoria_offline.cycle import CycleView
from memoria_offline.facts import (
    fact_of,
    keywords,
    replace_words,
    subject_queries,
    topic_keys,
)
from memoria_offline.intents import Intent
from memoria_offline.merge import kept_details
from memoria_text.relative_dates import TimeSpan, resolve_in_bindings, resolve_relative_dates

EVERYTHING: Final = "all memories"
MAX_SEARCH: Final = 100  # the most memories one search returns
MAX_QUERIES: Final = 4
MAX_CANDIDATES: Final = 5  # the most memories the update action asks the user to choose among
_ABOUT: Final = re.compile(r"^(?:about|on|sobre|de|do|da|dos|das)\s+|\s+$", re.IGNORECASE)


class NoPlan(Exception):
    """The rules have no answer for this task."""


def _memory(statement: str, said_at: datetime) -> dict[str, Any]:
    fact = fact_of(statement)
    return {
        "type": "text",
        "content": resolve_relative_dates(fact.content, said_at),
        "bindings": resolve_in_bindings(fact.bindings, said_at),
        "memory_type": fact.memory_type,
    }


def _search_for(statement: str) -> list[str]:
    """The user's words, the keys of their topics (what the rules store as bindings), and
    the words that name what is asked about ("Clara" of "who is Clara?")."""
    queries = [statement, *topic_keys(statement), keywords(statement)][:MAX_QUERIES]
    return list(dict.fromkeys(query for query in queries if query))


def _told_then(told: str, window: TimeSpan) -> dict[str, Any]:
    """What the user told within ``window``: all of it, newest first, or what is about the
    topic the question names besides the time ("about Porto last week")."""
    found = window.found
    topic = _ABOUT.sub("", (told[: found.start] + " " + told[found.end :]).strip(" ?!.,"))
    span = {"since": window.since.isoformat(), "until": window.until.isoformat()}
    # keywords() of a bare topic is empty when the topic is its own keywords ("Porto").
    if keywords(f"what {topic}") or topic_keys(topic):
        return {"queries": _search_for(topic), "mode": "semantic", **span}
    return {"queries": [EVERYTHING], "mode": "chronological", "limit": MAX_SEARCH, **span}


def _correction_queries(view: CycleView) -> list[str]:
    """What a correction looks for: the value it says is wrong when it names one, and what
    it is about (``subject_queries``: "my sister", what the user drinks) besides its words.
    Its new value alone is what memory does not hold yet ("not coffee, tea": not "tea")."""
    reading = view.reading
    statement = "" if reading.substitution else reading.statement
    queries = [
        reading.old_value,
        statement,
        *subject_queries(statement),
        *topic_keys(statement),
        keywords(statement),
    ]
    return list(dict.fromkeys(query for query in queries if query))[:MAX_QUERIES]


def _update(view: CycleView) -> dict[str, Any]:
    """The new content of the memory a correction changes; with several that fit equally,
    the ones the user is asked to choose among."""
    reading = view.reading
    target = view.targets[0]
    statement = reading.statement
    if reading.substitution:
        # The memory with the user's new value in place of the old; several holding the old
        # value: the best match of the search (each would read differently).
        replaced = replace_words(view.texts[target][0], reading.old_value, statement)
        if replaced is None:
            raise NoPlan(f"no memory holds {reading.old_value!r} to correct")
        statement = replaced
    elif len(view.targets) > 1:
        content = resolve_relative_dates(fact_of(statement).content, view.said_at)
        return {"candidates": view.targets[:MAX_CANDIDATES], "content": content}
    else:
        # What the correction does not touch stays ("my sister plays the oboe" keeps
        # "Ingrid" of "My sister Ingrid plays the bassoon").
        statement = kept_details(view.texts[target][0], statement)
    fact = fact_of(statement, replacing=view.texts.get(target, []))
    return {
        "updates": [
            {
                "_id": target,
                "content": resolve_relative_dates(fact.content, view.said_at),
                "bindings": resolve_in_bindings(fact.bindings, view.said_at),
                "memory_type": fact.memory_type,
            }
        ]
    }


def plan_for(task: str, view: CycleView) -> dict[str, Any]:
    reading = view.reading
    everything = reading.intent == Intent.LIST_ALL or view.delete_all_confirmed
    if task == "MemorySearch":
        if view.window is not None and reading.told_when is not None:
            return _told_then(reading.told_when, view.window)
        if everything:
            return {"queries": [EVERYTHING], "mode": "chronological", "limit": MAX_SEARCH}
        if reading.intent == Intent.UPDATE:
            return {"queries": _correction_queries(view), "mode": "semantic"}
        return {"queries": _search_for(reading.statement), "mode": "semantic"}
    if task == "MemorySave" and view.said_by is not None:
        # Told again: the memory's own words, so the memory service finds it and keeps one.
        fact = fact_of(view.texts[view.said_by][0])
        memory = {"type": "text", "content": fact.content, "bindings": fact.bindings}
        return {"memories": [memory | {"memory_type": fact.memory_type}]}
    if task == "MemorySave":
        facts = reading.facts or (reading.statement,)
        return {"memories": [_memory(fact, view.said_at) for fact in facts]}
    if task == "MemoryUpdate" and view.targets:
        return _update(view)
    if task == "MemoryDelete" and everything and view.found_last:
        return {"memory_ids": view.found_last}  # only after a confirmation
    if task == "MemoryDelete" and view.targets:
        return {"memory_ids": view.targets[:1]}  # "forget X" forgets the best match only
    raise NoPlan(f"the offline planner has no plan for {task} here")

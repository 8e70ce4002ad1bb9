"""What each memory action asks the model for (the ``reasoning`` mode), written by rules in
the JSON shape the actions' schemas accept."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final

from memoria_llm.offline.cycle import CycleView
from memoria_llm.offline.facts import fact_of, keywords, topic_keys
from memoria_llm.offline.intents import Intent
from memoria_llm.relative_dates import resolve_in_bindings, resolve_relative_dates

EVERYTHING: Final = "all memories"
MAX_SEARCH: Final = 100  # the most memories one search returns
MAX_QUERIES: Final = 4


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


def plan_for(task: str, view: CycleView) -> dict[str, Any]:
    reading = view.reading
    everything = reading.intent == Intent.LIST_ALL or view.delete_all_confirmed
    if task == "MemorySearch":
        if everything:
            return {"queries": [EVERYTHING], "mode": "chronological", "limit": MAX_SEARCH}
        # The user's words, the keys of their topics (what the rules store as bindings), and
        # the words that name what is asked about ("Clara" of "who is Clara?").
        statement = reading.statement
        queries = [statement, *topic_keys(statement), keywords(statement)][:MAX_QUERIES]
        queries = [query for query in queries if query]
        return {"queries": list(dict.fromkeys(queries)), "mode": "semantic"}
    if task == "MemorySave":
        facts = reading.facts or (reading.statement,)
        return {"memories": [_memory(fact, view.said_at) for fact in facts]}
    if task == "MemoryUpdate" and view.targets:
        fact = fact_of(reading.statement, replacing=view.texts.get(view.targets[0], []))
        return {
            "updates": [
                {
                    "_id": view.targets[0],
                    "content": resolve_relative_dates(fact.content, view.said_at),
                    "bindings": resolve_in_bindings(fact.bindings, view.said_at),
                    "memory_type": fact.memory_type,
                }
            ]
        }
    if task == "MemoryDelete" and everything and view.found_last:
        return {"memory_ids": view.found_last}  # only after a confirmation
    if task == "MemoryDelete" and view.targets:
        return {"memory_ids": view.targets[:1]}  # "forget X" forgets the best match only
    raise NoPlan(f"the offline planner has no plan for {task} here")

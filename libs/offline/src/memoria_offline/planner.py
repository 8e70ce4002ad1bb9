"""The next action, by rules (the ``reasoningHeavy`` mode of the offline planner).

Each intent is a short, fixed path through the actions; the path moves on as steps are done,
and branches on what a search found (a correction with nothing to correct saves the new
fact; a question about the user with nothing about it in memory asks the user). A correction or a
forget acts only on a found memory about what the message names (``CycleView.targets``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from memoria_offline.cycle import CycleView
from memoria_offline.intents import Intent

FINALIZE: Final = "Finalize"
QUESTION: Final = "Question"
SEARCH: Final = "MemorySearch"
SAVE: Final = "MemorySave"
UPDATE: Final = "MemoryUpdate"
DELETE: Final = "MemoryDelete"


def wanted(view: CycleView) -> str:
    """The action the rules want next, whether or not a worker offers it."""
    if view.failed:
        return FINALIZE  # report what went wrong rather than push on
    done = view.done
    intent = view.reading.intent
    if intent == Intent.SAVE:
        return SAVE if SAVE not in done else FINALIZE
    if intent in (Intent.SEARCH, Intent.LIST_ALL):
        if SEARCH not in done:
            return SEARCH
        # Nothing found about it (what was found shares no subject with the question): ask
        # the user, whose short reply is then saved as the answer (cycle.py).
        if not view.targets and intent == Intent.SEARCH and view.reading.about_user:
            return QUESTION if QUESTION not in done else FINALIZE
        return FINALIZE
    if intent == Intent.UPDATE:
        if SEARCH not in done:
            return SEARCH
        if view.targets and not view.already_said:
            return UPDATE if UPDATE not in done else FINALIZE
        if view.reading.substitution:
            return FINALIZE  # "not coffee, tea" with no memory of coffee: nothing to save
        # Nothing to correct: a new fact; or told before: the save answers "I already had
        # that" (the memory service finds the memory that says it) and changes nothing.
        return SAVE if SAVE not in done else FINALIZE
    if view.delete_all_confirmed:
        # Rounds of search + delete until a search finds nothing (or steps run out).
        if not done or done[-1] == DELETE:
            return SEARCH
        return DELETE if done[-1] == SEARCH and view.found_last else FINALIZE
    if intent == Intent.DELETE:
        if SEARCH not in done:
            return SEARCH
        return DELETE if view.targets and DELETE not in done else FINALIZE
    if intent == Intent.DELETE_ALL:
        return QUESTION if QUESTION not in done else FINALIZE  # never without a "yes"
    return FINALIZE


def next_action(view: CycleView, choices: Sequence[str]) -> str:
    action = wanted(view)
    if action in choices:
        return action
    return FINALIZE if FINALIZE in choices else choices[0]

"""The offline planner reads the commands with the runtime's own words (memoria_text.commands):
a command the runtime recognizes is, to the planner, the same request."""

from __future__ import annotations

import pytest

from memoria_offline.intents import Intent, read
from memoria_text.commands import Command, recognize

EXAMPLES = [
    ("Purge all my memories", Command.DELETE_ALL, Intent.DELETE_ALL),
    ("zere todas as minhas memórias", Command.DELETE_ALL, Intent.DELETE_ALL),
    ("Display all my memories", Command.LIST_ALL, Intent.LIST_ALL),
    ("exiba minhas memórias", Command.LIST_ALL, Intent.LIST_ALL),
    ("forget the last thing", Command.FORGET_LAST, Intent.DELETE),
    ("esquecer o que eu contei", Command.FORGET_LAST, Intent.DELETE),
    ("cancel that", Command.CANCEL, Intent.CANCEL),
    ("desisto", Command.CANCEL, Intent.CANCEL),
]


@pytest.mark.parametrize(("message", "command", "intent"), EXAMPLES)
def test_a_command_of_the_runtime_is_the_same_request_to_the_planner(
    message: str, command: Command, intent: Intent
) -> None:
    recognized = recognize(message)
    assert recognized is not None
    assert recognized.kind == command
    reading = read(message)
    assert reading.intent == intent
    if intent == Intent.DELETE:
        assert reading.refers_back  # the last thing told, not a memory named "the last thing"


@pytest.mark.parametrize("message", ["yes, go ahead", "sim, pode apagar", "confirmo"])
def test_a_yes_at_the_start_confirms(message: str) -> None:
    assert read(message).intent == Intent.CONFIRM


@pytest.mark.parametrize("message", ["Of course I like tea", "Absolutely loved Porto"])
def test_a_yes_only_as_a_whole_reply_is_no_cue(message: str) -> None:
    assert read(message).intent != Intent.CONFIRM

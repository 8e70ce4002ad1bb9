"""No model configured: after a fact is forgotten, asking about it shows no other memory.

The memory search's default cut-off (``memory_min_relevance``) decides which memories the
chat shows as cards and the offline planner answers from; a user's other everyday facts
must stay out of both when the asked one is gone, in English and in Portuguese."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from offline_chat import actions, answers, cards, offline_stack, say
from stack import Stack
from ws_client import Frame

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def stack(
    valkey_server: Any, milvus_server: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    data_dir = tmp_path_factory.mktemp("unrelated-stack")
    with offline_stack(valkey_server.port, milvus_server.uri, data_dir, db=5) as running:
        yield running


def answer(frames: list[Frame]) -> str:
    return "\n".join(str(f["content"]) for f in answers(frames))


CASES = [
    pytest.param(
        "en",
        "I dislike mushrooms",
        [
            "I work as a nurse at the city hospital",
            "My sister is called Ana",
            "I live in Porto",
            "My car is a blue Fiat",
            "I go running on Sunday mornings",
        ],
        "Forget that I dislike mushrooms",
        "What food do I dislike?",
        ["nurse", "hospital", "Ana", "Porto", "Fiat", "running"],
        id="english",
    ),
    pytest.param(
        "pt",
        "Eu não gosto de cogumelos",
        [
            "Eu trabalho como enfermeira no hospital da cidade",
            "Minha irmã se chama Ana",
            "Eu moro no Porto",
            "Meu carro é um Fiat azul",
            "Eu corro aos domingos de manhã",
        ],
        "Esqueça que eu não gosto de cogumelos",
        "De que comida eu não gosto?",
        ["enfermeira", "hospital", "Ana", "Porto", "Fiat", "corro"],
        id="portuguese",
    ),
]


@pytest.mark.parametrize(("user", "disliked", "others", "forget", "question", "words"), CASES)
async def test_a_forgotten_fact_leaves_no_unrelated_card_or_answer(
    stack: Stack,
    user: str,
    disliked: str,
    others: list[str],
    forget: str,
    question: str,
    words: list[str],
) -> None:
    for fact in [disliked, *others]:
        told = await say(stack, user, "tell", fact)
        assert actions(told)[-2:] == ["MemorySave", "Finalize"], (fact, actions(told))

    # While it is there, the asked fact is the one card.
    asked = await say(stack, user, "ask", question)
    assert cards(asked) == [disliked]

    forgotten = await say(stack, user, "tell", forget)
    assert "MemoryDelete" in actions(forgotten), answer(forgotten)

    again = await say(stack, user, "ask-again", question)
    assert cards(again) == []
    reply = answer(again)
    assert reply
    for word in words:
        assert word not in reply, reply

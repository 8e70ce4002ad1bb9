"""A step's closing message: said when the model has something to say, and nothing at all
(no empty bubble) when it has not."""

from __future__ import annotations

from memoria_action_worker.actions.finalize import finalize
from memoria_contracts.events import ChatDelta
from memoria_contracts.streams import Stream

from .harness import Harness


async def test_finalize_posts_what_the_model_says(harness: Harness) -> None:
    ctx, _ = harness.context("Finalize", {}, chat="All saved.")

    outcome = await finalize(ctx)

    assert (outcome.status, outcome.ends_cycle) == ("ok", True)
    assert [frame["content"] for frame in harness.publisher.frames()] == ["All saved."]


async def test_a_model_with_nothing_to_add_posts_no_message(harness: Harness) -> None:
    """The offline planner closes a cycle whose step already answered with no text: the
    cycle still ends, with no empty message (complete or streamed) on chat.out."""
    ctx, _ = harness.context("Finalize", {}, chat="")

    outcome = await finalize(ctx)

    assert (outcome.status, outcome.ends_cycle) == ("ok", True)
    assert harness.publisher.frames() == []
    deltas = [
        e
        for s, e in harness.publisher.sent
        if s is Stream.CHAT_OUT and isinstance(e.payload, ChatDelta)
    ]
    assert deltas == []

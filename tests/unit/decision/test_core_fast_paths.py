"""The fast paths as decision's core runs them, without Redis or a memory service: each a
sequence of effects (status, memory requests, posts, pending actions) whose replies come back
as events, one step, the cycle ended; and what "forget that" refers to, read from the history."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from core_cycles import AT, CONFIG, fresh, run

from memoria_contracts.chat import ChatRecord, ToolCall
from memoria_contracts.memory import (
    MAX_PAGE,
    Memory,
    MemoryDelete,
    MemoryDeleted,
    MemoryFailure,
    MemoryFound,
    MemoryGet,
    MemoryList,
    MemoryPage,
    MemoryUpdate,
    MemoryUpdated,
)
from memoria_decision.core import effects, events
from memoria_decision.core.fast_paths import DELETE_CONCURRENCY, LIST_SHOWN, last_told
from memoria_decision.core.state import CycleState, PendingAction, Route, UpdateCandidate
from memoria_text import i18n

E = effects
WHEN = datetime(2026, 11, 23, tzinfo=UTC)
DOWN = events.Unanswered("timed out", timeout=True)


def memory(memory_id: str, content: str = "") -> Memory:
    return Memory(
        memory_id=memory_id,
        memory_type="user_profile",
        content=content or f"fact {memory_id}",
        bindings=["fact"],
        creation_datetime=WHEN,
        last_accessed=WHEN,
        updated_at=WHEN,
    )


def failure(code: str) -> MemoryFailure:
    return MemoryFailure(code=code, error_message=f"{code} here")


def routed(kind: str, language: str = "en", **fields: Any) -> CycleState:
    return fresh(Route(kind=kind, language=language, **fields), language=language)


def go(state: CycleState, **replies: Any) -> tuple[CycleState, list[E.Effect]]:
    """The fast path from its start (a redelivered message with no step yet takes its route),
    its memory requests answered from ``replies`` by purpose."""

    def answer(effect: E.Effect) -> events.Event | None:
        assert isinstance(effect, E.AskMemory), effect
        reply = replies[effect.purpose]
        reply = reply(effect.requests) if callable(reply) else reply
        return events.Answered(AT, effect.purpose, reply if isinstance(reply, tuple) else (reply,))

    ended, carried = run(state, events.Redelivered(AT), answer)
    assert isinstance(ended, CycleState) and ended.status == "ended"
    return ended, carried


def said(carried: list[E.Effect]) -> list[str]:
    return [str(e.record.content) for e in carried if isinstance(e, E.Post)]


def asks(carried: list[E.Effect]) -> list[Any]:
    return [r for e in carried if isinstance(e, E.AskMemory) for r in e.requests]


def step(ended: CycleState) -> tuple[str, str, str]:
    (only,) = ended.steps
    return only.action, only.status, str(ended.end_reason)


# -- list all -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("count", "more", "reply"),
    [
        (0, None, "You have no memories saved yet."),
        (2, None, "These are all your memories (2)."),
        (2, "2", i18n.text("list_all_newest", "en", count=2)),
    ],
)
def test_list_all_shows_cards_then_says_how_many(count: int, more: str | None, reply: str) -> None:
    page = MemoryPage(memories=[memory(f"mem_{n}") for n in range(count)], next_cursor=more)
    ended, carried = go(routed("list_all"), list=page)
    assert asks(carried) == [MemoryList(limit=LIST_SHOWN)]
    posts = [e.record for e in carried if isinstance(e, E.Post)]
    assert posts[0].id == "cyc_1.1.status" and posts[0].content == "Listing your memories..."
    cards = [p for p in posts if p.modal == "memory"]
    assert [c.id for c in cards] == [f"cyc_1.1.{n}" for n in range(count)]
    assert all(c.chat_history and c.created_at == AT for c in cards)
    assert said(carried)[-1] == reply
    assert step(ended) == ("ListMemories", "ok", "done")
    assert ("and more" in ended.steps[0].summary) == bool(more)


@pytest.mark.parametrize("reply", [DOWN, failure("unavailable"), failure("invalid")])
def test_a_list_the_memory_service_cannot_give_ends_failed(reply: object) -> None:
    ended, carried = go(routed("list_all", "pt"), list=reply)
    assert step(ended) == ("ListMemories", "failed", "action_failed")
    assert said(carried)[-1] == i18n.text("memory_unavailable", "pt")


# -- delete all -----------------------------------------------------------------------------


def test_delete_all_is_asked_first_and_kept_as_the_threads_pending_action() -> None:
    ended, carried = go(routed("ask_delete_all", "pt"))
    (put,) = [e for e in carried if isinstance(e, E.PutPending)]
    assert put.action == PendingAction(
        id="pa_1", kind="delete_all", language="pt", asked_in_cycle="cyc_1"
    )
    assert said(carried) == [i18n.text("delete_all_question", "pt", minutes=10)]
    assert step(ended) == ("ConfirmDeleteAll", "ok", "done")


def pages(*batches: list[str]) -> Any:
    """Every memory id of the user, a page per batch (the cursor says which comes next)."""

    def page(requests: tuple[MemoryList, ...]) -> MemoryPage:
        (request,) = requests
        assert request.limit == MAX_PAGE
        index = int(request.cursor or 0)
        last = index + 1 == len(batches)
        listed = [memory(i) for i in batches[index]]
        return MemoryPage(memories=listed, next_cursor=None if last else str(index + 1))

    return page


def deleting(refused: frozenset[str] = frozenset(), gone: frozenset[str] = frozenset()) -> Any:
    def replies(requests: tuple[MemoryDelete, ...]) -> tuple[object, ...]:
        assert len(requests) <= DELETE_CONCURRENCY
        return tuple(
            failure("invalid")
            if r.memory_id in refused
            else failure("not_found")
            if r.memory_id in gone
            else MemoryDeleted(
                memory_id=r.memory_id, deleted_content="x", memory=memory(r.memory_id)
            )
            for r in requests
        )

    return replies


def test_a_confirmed_delete_all_lists_every_page_then_deletes_in_batches() -> None:
    ids = [f"mem_{n}" for n in range(11)]
    ended, carried = go(
        routed("delete_all"), ids=pages(ids[:6], [*ids[6:], "mem_0"]), delete=deleting()
    )
    listed = [r for r in asks(carried) if isinstance(r, MemoryList)]
    assert [r.cursor for r in listed] == [None, "1"]
    deleted = [r.memory_id for r in asks(carried) if isinstance(r, MemoryDelete)]
    assert deleted == ids  # each once, though listed twice
    saves = [e.state for e in carried if isinstance(e, E.Save) and e.state.status == "running"]
    assert saves[0].route is not None and saves[0].route.targets == tuple(ids)  # kept first
    refreshes = sum(isinstance(e, E.RefreshLock) for e in carried)
    assert refreshes == 2 + 2  # a page each, a batch each: the lock kept all along
    assert said(carried)[-1] == "Done: I deleted all your memories (11)."
    assert step(ended) == ("DeleteAllMemories", "ok", "done")


def test_a_redelivered_delete_all_deletes_the_ids_it_kept() -> None:
    _ended, carried = go(
        routed("delete_all", targets=("mem_1", "mem_2")), delete=deleting(gone=frozenset({"mem_1"}))
    )
    assert not [r for r in asks(carried) if isinstance(r, MemoryList)]
    assert said(carried)[-1] == "Done: I deleted all your memories (2)."  # gone counts


def test_nothing_to_delete_is_said_so() -> None:
    _, carried = go(routed("delete_all"), ids=pages([]))
    assert said(carried)[-1] == "You have no memories, so there was nothing to delete."


def test_a_delete_all_with_refusals_says_how_many_and_ends_failed() -> None:
    ended, carried = go(
        routed("delete_all", targets=("mem_1", "mem_2", "mem_3")),
        delete=deleting(refused=frozenset({"mem_2"})),
    )
    notice = i18n.text("delete_all_partial", "en", deleted=2, total=3, failed=1)
    assert said(carried)[-1] == notice
    assert step(ended) == ("DeleteAllMemories", "failed", "action_failed")
    assert ended.steps[0].summary == "deleted 2 of the user's 3 memories"


def test_a_delete_all_the_memory_service_stops_answering_ends_failed() -> None:
    ended, carried = go(routed("delete_all", targets=("mem_1",)), delete=DOWN)
    assert said(carried)[-1] == i18n.text("memory_unavailable", "en")
    assert step(ended) == ("DeleteAllMemories", "failed", "action_failed")


# -- the pick after "which memory?" -----------------------------------------------------------

CANDIDATES = (
    UpdateCandidate(memory_id="mem_c1", content="I drink coffee every morning"),
    UpdateCandidate(memory_id="mem_c2", content="Coffee: black, no sugar"),
)


def choice(kind: str = "choose_update") -> PendingAction:
    content = "I drink tea" if kind == "choose_update" else None
    kinds = "text" if kind == "choose_update" else None
    return PendingAction(
        id="pa_0",
        kind=kind,
        language="en",
        asked_in_cycle="cyc_0",
        candidates=CANDIDATES,
        content=content,
        content_kind=kinds,
    )


def test_the_chosen_memory_is_updated_and_told_from_the_question() -> None:
    state = routed("update_chosen", choice=choice(), targets=("mem_c2",))
    updated = memory("mem_c2", "I drink tea")
    reply = MemoryUpdated(memory_id="mem_c2", old_content="x", new_content="y", memory=updated)
    ended, carried = go(state, update=reply)
    assert asks(carried) == [
        MemoryUpdate(memory_id="mem_c2", content="I drink tea", content_kind="text", source="chat")
    ]
    cards = [e.record for e in carried if isinstance(e, E.Post) and e.record.modal == "memory"]
    assert [c.id for c in cards] == ["cyc_1.1.updated"]  # what a later "forget that" finds
    assert said(carried)[-1] == 'Updated: "Coffee: black, no sugar" is now "I drink tea".'
    assert step(ended) == ("UpdateChosenMemory", "ok", "done")
    assert ended.steps[0].summary == 'updated mem_c2 ("Coffee: black, no sugar" -> "I drink tea")'


@pytest.mark.parametrize(
    ("reply", "told"),
    [
        (
            failure("not_found"),
            i18n.text("update_chosen_failed", "en", old="Coffee: black, no sugar"),
        ),
        (failure("unavailable"), i18n.text("memory_unavailable", "en")),
        (DOWN, i18n.text("memory_unavailable", "en")),
    ],
)
def test_an_update_the_memory_service_refuses_ends_failed(reply: object, told: str) -> None:
    state = routed("update_chosen", choice=choice(), targets=("mem_c2",))
    ended, carried = go(state, update=reply)
    assert said(carried)[-1] == told
    assert step(ended) == ("UpdateChosenMemory", "failed", "action_failed")


@pytest.mark.parametrize(
    ("kind", "key"),
    [("choose_update", "update_choice_question"), ("choose_forget", "forget_choice_question")],
)
def test_a_number_with_no_such_memory_asks_again(kind: str, key: str) -> None:
    ended, carried = go(routed("ask_choice", choice=choice(kind)))
    (put,) = [e.action for e in carried if isinstance(e, E.PutPending)]
    assert (put.id, put.kind, put.candidates, put.content) == (
        "pa_1",
        kind,
        CANDIDATES,
        choice(kind).content,
    )
    numbered = "1. I drink coffee every morning\n2. Coffee: black, no sugar"
    values = {"candidates": numbered, "minutes": 10, "content": "I drink tea"}
    assert said(carried) == [i18n.text(key, "en", **values)]
    assert step(ended) == ("AskWhichMemory", "ok", "done")


@pytest.mark.parametrize(
    ("pending", "key", "summary"),
    [
        (
            choice("choose_forget"),
            "forget_choice_cancelled",
            "cancelled the pending forget: nothing deleted",
        ),
        (
            choice("choose_update"),
            "update_choice_cancelled",
            "cancelled the pending update: nothing changed",
        ),
        (None, "pending_cancelled", "cancelled the pending request: nothing deleted"),
    ],
)
def test_a_no_to_a_pending_question_cancels_it(
    pending: PendingAction | None, key: str, summary: str
) -> None:
    ended, carried = go(routed("cancel", declined=True, choice=pending))
    assert said(carried) == [i18n.text(key, "en")]
    assert (step(ended), ended.steps[0].summary) == (("Cancel", "ok", "done"), summary)


def test_a_cancel_with_nothing_pending_says_so() -> None:
    ended, carried = go(routed("cancel", "pt"))
    assert said(carried) == ["Não há nada para cancelar."]
    assert ended.steps[0].summary == "nothing to cancel"


@pytest.mark.parametrize(
    ("expired", "key"), [("delete_all", "pending_expired"), ("choose_forget", "choice_expired")]
)
def test_an_answer_after_its_question_expired_is_told_so(expired: str, key: str) -> None:
    ended, carried = go(routed("expired", expired=expired))
    assert said(carried) == [i18n.text(key, "en")]
    assert step(ended) == ("ConfirmationExpired", "ok", "done")
    assert expired in ended.steps[0].summary


# -- forget that ----------------------------------------------------------------------------


def turn(
    cycle: str, action: str, arguments: dict[str, Any], result: str = "ok"
) -> list[ChatRecord]:
    """A step of an earlier cycle as the history keeps it: its call, then its result."""
    call_id = f"call_{cycle}"
    call = ChatRecord(
        id=f"{cycle}.1.call",
        cycle_id=cycle,
        chat_history=True,
        modal="text",
        role="assistant",
        content="",
        tool_calls=[ToolCall(id=call_id, name=action, arguments=arguments)],
    )
    done = ChatRecord(
        id=f"{cycle}.1.result",
        cycle_id=cycle,
        chat_history=True,
        modal="text",
        role="tool",
        content=result,
        tool_call_id=call_id,
        name=action,
    )
    return [call, done]


def updated_card(cycle: str, memory_id: str) -> ChatRecord:
    return ChatRecord.memory_card(f"{cycle}.1.updated", cycle, memory(memory_id))


@pytest.mark.parametrize(
    ("history", "written"),
    [
        ([], None),
        (
            turn("c1", "MemorySave", {"written_ids": ["mem_a", "mem_b", "mem_a"]}),
            ["mem_a", "mem_b"],
        ),
        (turn("c1", "MemoryUpdate", {"written_ids": ["mem_u"]}), ["mem_u"]),
        (turn("c1", "MemorySearch", {"written_ids": ["mem_s"]}), None),  # no write
        (turn("c1", "MemorySave", {"written_ids": ["mem_a"]}, "failed: boom"), None),
        (turn("c1", "MemorySave", {"memory_types": ["goal"]}), None),  # wrote nothing it named
        (turn("c1", "MemorySave", {"summary": "{...cut}"}), []),  # its ids were cut short
        (turn("c1", "MemorySave", {"written_ids": "mem_a"}), []),
        (turn("c1", "MemorySave", {"written_ids": ["mem_a"]})[:1], None),  # never answered
        (
            [
                *turn("c1", "MemorySave", {"written_ids": ["mem_old"]}),
                *turn("c2", "MemorySave", {"written_ids": ["mem_new"]}),
            ],
            ["mem_new"],
        ),
        (
            [
                *turn("c1", "MemorySave", {"written_ids": ["mem_old"]}),
                *turn("c2", "MemorySave", {"written_ids": [3]}),
                *turn("c3", "MemorySearch", {}),
            ],
            ["mem_old"],
        ),
        (
            [*turn("c1", "MemorySave", {"written_ids": ["mem_a"]}), updated_card("c2", "mem_c")],
            ["mem_c"],
        ),
    ],
)
def test_what_forget_that_refers_to(history: list[ChatRecord], written: list[str] | None) -> None:
    assert last_told(history) == written


def forgetting(history: list[ChatRecord], **replies: Any) -> tuple[CycleState, list[E.Effect]]:
    return go(fresh(Route(kind="forget_last", language="en"), history=tuple(history)), **replies)


def deleted(memory_id: str, content: str = "Lives in Porto") -> MemoryDeleted:
    return MemoryDeleted(memory_id=memory_id, deleted_content=content, memory=memory(memory_id))


def test_forget_that_with_nothing_told_asks_what() -> None:
    ended, carried = forgetting([])
    assert said(carried) == [i18n.text("forget_ask_what", "en")]
    assert step(ended) == ("AskWhatToForget", "ok", "done")


def test_forget_that_forgets_the_one_memory_told_last() -> None:
    history = turn("c1", "MemorySave", {"written_ids": ["mem_p"]})
    ended, carried = forgetting(history, forget=deleted("mem_p"))
    assert asks(carried) == [MemoryDelete(memory_id="mem_p")]
    assert said(carried) == ["Deleting memories...", 'Forgotten: "Lives in Porto".']
    assert step(ended) == ("ForgetLastTold", "ok", "done")
    assert ended.steps[0].summary == 'forgot mem_p ("Lives in Porto")'


@pytest.mark.parametrize(
    ("reply", "told", "status"),
    [
        (failure("not_found"), i18n.text("forget_gone", "en"), "ok"),
        (failure("invalid"), i18n.text("memory_rejected", "en", detail="invalid"), "failed"),
        (DOWN, i18n.text("memory_unavailable", "en"), "failed"),
    ],
)
def test_a_forget_the_memory_service_does_not_do(reply: object, told: str, status: str) -> None:
    history = turn("c1", "MemorySave", {"written_ids": ["mem_p"]})
    ended, carried = forgetting(history, forget=reply)
    assert said(carried)[-1] == told
    assert ended.steps[0].status == status
    if status == "ok":
        assert ended.steps[0].summary == "mem_p was gone already"


def test_forget_that_after_several_writes_reads_them_and_asks_which() -> None:
    history = turn("c1", "MemorySave", {"written_ids": ["mem_a", "mem_b", "mem_gone"]})
    found = (
        MemoryFound(memories=[memory("mem_a", "Likes tea")]),
        MemoryFound(memories=[memory("mem_b", "Likes coffee")]),
        failure("not_found"),
    )
    ended, carried = forgetting(history, get=found)
    assert asks(carried) == [MemoryGet(memory_id=i) for i in ("mem_a", "mem_b", "mem_gone")]
    (put,) = [e.action for e in carried if isinstance(e, E.PutPending)]
    assert (put.kind, [c.memory_id for c in put.candidates]) == (
        "choose_forget",
        ["mem_a", "mem_b"],
    )
    numbered = "1. Likes tea\n2. Likes coffee"
    assert said(carried) == [
        i18n.text("forget_choice_question", "en", candidates=numbered, minutes=10)
    ]
    assert step(ended) == ("AskWhatToForget", "ok", "done")


@pytest.mark.parametrize(
    ("found", "expected"),
    [
        ((MemoryFound(memories=[memory("mem_a")]), failure("not_found")), ["mem_a"]),
        ((failure("not_found"), failure("not_found")), []),
    ],
)
def test_forget_that_after_several_writes_of_which_one_or_none_is_left(
    found: tuple[object, ...], expected: list[str]
) -> None:
    history = turn("c1", "MemorySave", {"written_ids": ["mem_a", "mem_b"]})
    _ended, carried = forgetting(history, get=found, forget=deleted("mem_a"))
    assert [r.memory_id for r in asks(carried) if isinstance(r, MemoryDelete)] == expected
    if not expected:
        assert said(carried) == [i18n.text("forget_gone", "en")]


def test_forget_that_picked_among_candidates_forgets_the_pick() -> None:
    state = routed("forget_chosen", choice=choice("choose_forget"), targets=("mem_c1",))
    _, carried = go(state, forget=deleted("mem_c1", "I drink coffee every morning"))
    assert asks(carried) == [MemoryDelete(memory_id="mem_c1")]
    assert said(carried)[-1] == 'Forgotten: "I drink coffee every morning".'


def test_memory_replies_a_fast_path_does_not_wait_for_are_noted() -> None:
    from memoria_decision.core.machine import decide

    moved = decide(fresh(), events.Answered(AT, "list", (MemoryPage(memories=[]),)), CONFIG)
    assert [type(e) for e in moved.effects] == [E.Note]


# -- what each step records, for the next decision to read ------------------------------------


def status_lines(carried: list[E.Effect]) -> list[tuple[str, str]]:
    return [
        (e.record.id, str(e.record.content))
        for e in carried
        if isinstance(e, E.Post) and e.record.modal == "textForReplace"
    ]


def test_every_fast_path_shows_its_status_as_its_one_step() -> None:
    _, deleting_all = go(routed("delete_all", targets=("mem_1",)), delete=deleting())
    state = routed("update_chosen", choice=choice(), targets=("mem_c2",))
    reply = MemoryUpdated(
        memory_id="mem_c2", old_content="x", new_content="y", memory=memory("mem_c2")
    )
    _, updating = go(state, update=reply)
    history = turn("c1", "MemorySave", {"written_ids": ["mem_p"]})
    _, forgetting_one = forgetting(history, forget=deleted("mem_p"))
    assert status_lines(deleting_all) == [("cyc_1.1.status", "Deleting memories...")]
    assert status_lines(updating) == [("cyc_1.1.status", i18n.text("memory_update_started", "en"))]
    assert status_lines(forgetting_one) == [("cyc_1.1.status", "Deleting memories...")]


@pytest.mark.parametrize(
    ("state", "summary"),
    [
        (routed("ask_delete_all"), "asked the user to confirm deleting all their memories"),
        (routed("ask_choice", choice=choice()), "no such candidate: asked again which memory"),
        (routed("forget_last"), "nothing the user told was saved here: asked what"),
    ],
)
def test_a_fast_path_says_what_it_did_to_the_next_decision(state: CycleState, summary: str) -> None:
    ended, _ = go(state)
    assert ended.steps[0].summary == summary


def test_a_list_with_more_says_so_to_the_next_decision() -> None:
    page = MemoryPage(memories=[memory("mem_1")], next_cursor="1")
    ended, _ = go(routed("list_all"), list=page)
    assert ended.steps[0].summary == "listed the user's 1 newest memories (and more)"
    ended, _ = go(routed("list_all"), list=MemoryPage(memories=[memory("mem_1")]))
    assert ended.steps[0].summary == "listed the user's 1 newest memories"


@pytest.mark.parametrize(
    ("reply", "summary"),
    [
        (DOWN, "memory service: timed out"),
        (failure("unavailable"), "memory service: unavailable here"),
        (failure("invalid"), "list refused (invalid): invalid here"),
        (MemoryFound(memories=[]), "list refused (MemoryFound): unexpected MemoryFound"),
    ],
)
def test_a_fast_path_that_failed_says_why(reply: object, summary: str) -> None:
    ended, _ = go(routed("list_all"), list=reply)
    assert ended.steps[0].summary == summary


def test_what_the_user_told_is_gone_when_none_of_it_is_left() -> None:
    history = turn("c1", "MemorySave", {"written_ids": ["mem_a", "mem_b"]})
    ended, _ = forgetting(history, get=(failure("not_found"), failure("not_found")))
    assert ended.steps[0].summary == "what the user told last is gone already"


@pytest.mark.parametrize(
    ("history", "written"),
    [
        # a newer write that failed, or named nothing, or was never answered: the older one
        (
            [
                *turn("c1", "MemorySave", {"written_ids": ["mem_a"]}),
                *turn("c2", "MemorySave", {"written_ids": ["mem_b"]}, "failed: x"),
            ],
            ["mem_a"],
        ),
        (
            [
                *turn("c1", "MemorySave", {"written_ids": ["mem_a"]}),
                *turn("c2", "MemorySave", {"memory_types": ["goal"]}),
            ],
            ["mem_a"],
        ),
        # a card that is no update, or an update card that names nothing
        (
            [
                *turn("c1", "MemorySave", {"written_ids": ["mem_a"]}),
                ChatRecord.memory_card("c2.1.0", "c2", memory("mem_x")),
            ],
            ["mem_a"],
        ),
        (
            [
                ChatRecord(
                    id="c2.1.updated",
                    cycle_id="c2",
                    chat_history=True,
                    modal="memory",
                    role="system",
                    content="not a card",
                )
            ],
            [],
        ),
        (
            [
                ChatRecord(
                    id="c2.1.updated",
                    cycle_id="c2",
                    chat_history=True,
                    modal="memory",
                    role="system",
                    content={"memory_id": 7},
                )
            ],
            [],
        ),
    ],
)
def test_what_forget_that_looks_past(history: list[ChatRecord], written: list[str]) -> None:
    assert last_told(history) == written

"""Fast paths, no model call: list all, delete all, "forget that", cancel, the pick after
"which memory?", an answer to an expired question. Each is a one-step cycle named for what ran
(``ListMemories``, ``DeleteAllMemories``, ``Cancel``...): memory requests made as the session's
user, their replies, a status line and a reply in fixed words in the message's language.

Deleting everything never happens on the request: it asks, and only a clear yes as the next
message of the thread, before the question expires, runs it. The ids are listed once and
kept in the route: a redelivery deletes the same ones (those gone count as deleted).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from memoria_contracts import memory as mem
from memoria_contracts.chat import ChatRecord
from memoria_contracts.events import StepRecord, UpdateChoice
from memoria_decision.core import effects, events, outputs
from memoria_decision.core.routes import excerpt
from memoria_decision.core.state import (
    Config,
    CycleState,
    PendingAction,
    PendingKind,
    Route,
    UpdateCandidate,
)

Transition = effects.Transition
LIST_SHOWN: Final = 50
"""Memories a "list all" shows, newest first; the reply says when there are more."""
DELETE_CONCURRENCY: Final = 8
"""Deletions asked at once: each is a document and its vectors in the memory service."""
STEP: Final = 1  # a fast path is the cycle's one and only step
ACTIONS: Final = {
    "list_all": "ListMemories",
    "ask_delete_all": "ConfirmDeleteAll",
    "delete_all": "DeleteAllMemories",
    "cancel": "Cancel",
    "update_chosen": "UpdateChosenMemory",
    "ask_choice": "AskWhichMemory",
    "forget_last": "ForgetLastTold",
    "forget_chosen": "ForgetLastTold",
    "expired": "ConfirmationExpired",
}
ASK_FORGET: Final = "AskWhatToForget"
_CANCELLED: Final[dict[PendingKind | None, tuple[str, str]]] = {
    "choose_forget": ("forget_choice_cancelled", "cancelled the pending forget: nothing deleted"),
    "choose_update": ("update_choice_cancelled", "cancelled the pending update: nothing changed"),
    None: ("pending_cancelled", "cancelled the pending request: nothing deleted"),
}


def start(state: CycleState, route: Route, config: Config) -> Transition:
    match route.kind:
        case "list_all":
            listing = effects.AskMemory("list", (mem.MemoryList(limit=LIST_SHOWN),))
            return Transition(state, (outputs.status(state, STEP, "list_all_started"), listing))
        case "ask_delete_all":
            put = effects.PutPending(state.asking("delete_all"))
            summary = "asked the user to confirm deleting all their memories"
            return _say(state, "delete_all_question", summary, put, minutes=config.pending_minutes)
        case "delete_all":
            then = _delete_next(state) if route.targets is not None else _list_ids(state, None)
            status = outputs.status(state, STEP, "memory_delete_started")
            return Transition(then.state, (status, *then.effects))
        case "update_chosen" if (choice := route.choice) is not None:
            update = mem.MemoryUpdate(
                memory_id=route.chosen.memory_id,
                content=choice.content,
                content_kind=choice.content_kind,
            )
            status = outputs.status(state, STEP, "memory_update_started")
            return Transition(state, (status, effects.AskMemory("update", (update,))))
        case "ask_choice" if (choice := route.choice) is not None:  # "3" of two: asked again
            asked = ask_choice(state, choice.kind, choice.candidates, config, update=choice)
            return _done(state, "no such candidate: asked again which memory", *asked)
        case "forget_last":
            written = last_told(state.history)
            if not written:
                summary = "nothing the user told was saved here: asked what"
                return _say(state, "forget_ask_what", summary, action=ASK_FORGET)
            if len(written) == 1:
                return _forget(state, written[0])
            gets = tuple(mem.MemoryGet(memory_id=memory_id) for memory_id in written)
            return Transition(state, (effects.AskMemory("get", gets),))
        case "forget_chosen":
            return _forget(state, route.chosen.memory_id)
        case "expired":
            key = "pending_expired" if route.expired == "delete_all" else "choice_expired"
            return _say(state, key, f"an answer to an expired {route.expired} question")
    key, summary = _CANCELLED[route.choice.kind if route.choice else None]
    if not route.declined:
        key, summary = "nothing_to_cancel", "nothing to cancel"
    return _say(state, key, summary)


def answered(state: CycleState, event: events.Answered, config: Config) -> Transition:
    """What the memory service's replies lead to."""
    replies = event.replies
    silent = next((r for r in replies if _unavailable(r)), None)
    if silent is not None:
        return _failed(state, f"memory service: {_detail(silent)}")
    match event.purpose, replies:
        case "list", (mem.MemoryPage() as page,):
            cards = [outputs.card(state, f"{STEP}.{n}", m) for n, m in enumerate(page.memories)]
            count = len(page.memories)
            key = (
                "list_all_newest"
                if page.next_cursor
                else "list_all_shown"
                if count
                else "list_all_none"
            )
            more = " (and more)" if page.next_cursor else ""
            summary = f"listed the user's {count} newest memories{more}"
            return _say(state, key, summary, *map(effects.Post, cards), count=count)
        case "ids", (mem.MemoryPage() as page,):
            listed = state.working(
                listed=(*state.work.listed, *(m.memory_id for m in page.memories))
            )
            if page.next_cursor is not None:
                return _list_ids(listed, page.next_cursor)
            route = state.routed.model_copy(
                update={"targets": tuple(dict.fromkeys(listed.work.listed))}
            )
            kept = listed.but(route=route)
            then = _delete_next(kept)
            return Transition(then.state, (effects.Save(kept), *then.effects))
        case "delete", _:
            gone = sum(isinstance(r, mem.MemoryDeleted) or _code(r) == "not_found" for r in replies)
            work = state.work
            counted = state.working(
                deleted=work.deleted + len(replies), failed=work.failed + len(replies) - gone
            )
            return _delete_next(counted)
        case "update", (mem.MemoryUpdated() as updated,):
            # Told from the pending action, not the reply: a redelivered cycle updates again
            # (the same content) and says the same, not "from tea to tea".
            route = state.routed
            old, new = excerpt(route.chosen.content), excerpt(route.choice and route.choice.content)
            card = effects.Post(outputs.card(state, f"{STEP}{UPDATED_CARD_SUFFIX}", updated.memory))
            summary = f'updated {updated.memory_id} ("{old}" -> "{new}")'
            return _say(state, "update_chosen_done", summary, card, old=old, new=new)
        case "get", _:
            found = [m for r in replies if isinstance(r, mem.MemoryFound) for m in r.memories]
            candidates = [UpdateCandidate(memory_id=m.memory_id, content=m.content) for m in found]
            if len(candidates) == 1:
                return _forget(state, candidates[0].memory_id)
            if not candidates:
                return _say(state, "forget_gone", "what the user told last is gone already")
            asked = ask_choice(state, "choose_forget", candidates, config)
            summary = f"asked which of {len(candidates)} memories to forget"
            return _done(state, summary, *asked, action=ASK_FORGET)
        case "forget", (mem.MemoryDeleted() as deleted,):
            content = excerpt(deleted.deleted_content)
            summary = f'forgot {deleted.memory_id} ("{content}")'
            return _say(state, "forget_done", summary, content=content)
        case "forget", (reply,) if _code(reply) == "not_found":
            # Forgotten before ("forget that" said twice), or deleted from another window.
            return _say(state, "forget_gone", f"{state.work.target} was gone already")
    first = replies[0]  # a request was made: a reply, or why there is none, came back
    code = _code(first) or type(first).__name__
    summary = f"{event.purpose} refused ({code}): {_detail(first)}"
    if event.purpose == "update":
        old = excerpt(state.routed.chosen.content)
        return _failed(state, summary, state.text("update_chosen_failed", old=old))
    if event.purpose == "forget":
        return _failed(state, summary, state.text("memory_rejected", detail=code))
    return _failed(state, summary)


def ask_choice(
    state: CycleState,
    kind: PendingKind,
    candidates: Sequence[UpdateCandidate],
    config: Config,
    *,
    step: int = STEP,
    update: PendingAction | UpdateChoice | None = None,
) -> tuple[effects.Effect, ...]:
    """Which memory an update (``choose_update``, with its new content) or a "forget that"
    (``choose_forget``) meant: the candidates numbered, the question kept as the thread's
    pending action under the asking cycle's id (a redelivery stores and says the same)."""
    content = update.content if update else None
    kept = {"content": content, "content_kind": update.content_kind if update else None}
    action = state.asking(kind, candidates=tuple(candidates), **kept)
    numbered = "\n".join(f"{n}. {excerpt(c.content)}" for n, c in enumerate(candidates, start=1))
    values = {"candidates": numbered, "minutes": config.pending_minutes}
    if kind == "choose_update":
        values["content"] = excerpt(content)
    key = "update_choice_question" if kind == "choose_update" else "forget_choice_question"
    text = state.text(key, **values)
    return (effects.PutPending(action), outputs.reply(state, text, step=step))


# -- the parts --------------------------------------------------------------------------------


def _list_ids(state: CycleState, cursor: str | None) -> Transition:
    """A page of every memory id of the session's user (the thread's lock kept meanwhile)."""
    page = mem.MemoryList(limit=mem.MAX_PAGE, cursor=cursor)
    return Transition(state, (effects.RefreshLock(), effects.AskMemory("ids", (page,))))


def _delete_next(state: CycleState) -> Transition:
    """The next batch of deletions, or the report once none is left."""
    targets, work = state.routed.targets or (), state.work
    batch = targets[work.deleted : work.deleted + DELETE_CONCURRENCY]
    if batch:
        deletes = tuple(mem.MemoryDelete(memory_id=memory_id) for memory_id in batch)
        return Transition(state, (effects.RefreshLock(), effects.AskMemory("delete", deletes)))
    total, failed = len(targets), work.failed
    deleted = total - failed
    summary = f"deleted {deleted} of the user's {total} memories"
    if failed:
        values = {"deleted": deleted, "total": total, "failed": failed}
        return _failed(state, summary, state.text("delete_all_partial", **values))
    key = "delete_all_done" if total else "delete_all_none"
    return _say(state, key, summary, count=deleted)


def _forget(state: CycleState, memory_id: str) -> Transition:
    status = outputs.status(state, STEP, "memory_delete_started")
    delete = effects.AskMemory("forget", (mem.MemoryDelete(memory_id=memory_id),))
    return Transition(state.working(target=memory_id), (status, delete))


def _say(
    state: CycleState,
    key: str,
    summary: str,
    *before: effects.Effect,
    action: str | None = None,
    **values: object,
) -> Transition:
    """``before``, then the reply ``key`` in the cycle's language, and the cycle done."""
    said = outputs.reply(state, state.text(key, **values))
    return _done(state, summary, *before, said, action=action)


def _done(
    state: CycleState, summary: str, *before: effects.Effect, action: str | None = None
) -> Transition:
    named = action or ACTIONS[state.routed.kind]
    step = StepRecord(step=STEP, action=named, status="ok", summary=summary)
    return outputs.end(outputs.with_step(state, step), "done", before=before)


def _failed(state: CycleState, summary: str, text: str | None = None) -> Transition:
    """The step failed: the memory service did not answer, unless ``text`` says otherwise."""
    action = ACTIONS[state.routed.kind]
    step = StepRecord(step=STEP, action=action, status="failed", summary=summary)
    told = text if text is not None else state.text("memory_unavailable")
    return outputs.end(outputs.with_step(state, step), "action_failed", told)


def _code(reply: events.Reply | None) -> str | None:
    return reply.code if isinstance(reply, mem.MemoryFailure) else None


def _unavailable(reply: events.Reply) -> bool:
    return isinstance(reply, events.Unanswered) or _code(reply) == "unavailable"


def _detail(reply: events.Reply | None) -> str:
    if isinstance(reply, events.Unanswered | mem.MemoryFailure):
        return reply.detail if isinstance(reply, events.Unanswered) else reply.error_message
    return f"unexpected {type(reply).__name__}"


# -- what "forget that" refers to ---------------------------------------------------------------
# Read from the thread's history alone (its tool calls and results), so every replica finds the
# same: writing steps keep the ids they wrote in their call's arguments (``written_ids``, set by
# the worker's MemorySave and MemoryUpdate); an update chosen among candidates shows its memory
# as a card whose id ends in UPDATED_CARD_SUFFIX. The newest write is the last thing the user
# told, whatever turns came after it.

WRITING_ACTIONS: Final = frozenset({"MemorySave", "MemoryUpdate"})
WRITTEN_IDS: Final = "written_ids"  # the key of a writing step's arguments naming them
UPDATED_CARD_SUFFIX: Final = ".updated"


def last_told(history: Sequence[ChatRecord]) -> list[str] | None:
    """The ids the newest successful write of the history wrote (oldest record first), in
    order; ``[]`` when that write's ids were not kept (its arguments cut short), None when
    the history holds no write at all."""
    failed = {
        record.tool_call_id
        for record in history
        if record.role == "tool" and str(record.content).startswith("failed:")
    }
    answered = {record.tool_call_id for record in history if record.role == "tool"}
    for record in reversed(history):
        if record.modal == "memory" and record.id.endswith(UPDATED_CARD_SUFFIX):
            card = record.content if isinstance(record.content, dict) else {}
            memory_id = card.get("memory_id")
            return [memory_id] if isinstance(memory_id, str) else []
        for call in reversed(record.tool_calls or []):
            if call.name not in WRITING_ACTIONS or call.id in failed or call.id not in answered:
                continue
            ids = call.arguments.get(WRITTEN_IDS)
            if ids is None and "summary" not in call.arguments:
                continue  # wrote nothing it could name (e.g. a save refused)
            if not isinstance(ids, list):
                return []
            written = [i for i in ids if isinstance(i, str)]
            if written:
                return list(dict.fromkeys(written))
    return None

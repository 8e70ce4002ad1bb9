"""Fast paths: list all, delete all, "forget that" and cancel, run by code
with no LLM call; and the answer to "which memory did you mean?" after an ambiguous
MemoryUpdate or "forget that".

"Forget that" (and "forget it", "esqueça isso", "apaga isso"...) forgets the memory the user's
last statement in the thread saved or updated (:mod:`memoria_decision.last_told`), whatever
turns came since; with none, it asks what to forget; with several, which. Resolved in code
with a model configured or not, it is never a search for the words "forget that".

The route of a cycle is decided once, before the first decision, from the user's message and
the thread's pending action (:func:`route_for`, pure), and saved in the cycle's state. A fast
path then looks like any other cycle to clients: the echo, a status line, the reply (and
memory cards), and a ``cycle_end`` whose ``actions`` name what ran (``ListMemories``,
``ConfirmDeleteAll``, ``DeleteAllMemories``, ``ForgetLastTold``, ``Cancel``...); no
``usage``, as no model ran. Every text comes from the i18n catalogue, in the language of the
command, or of the question the message answers.

Deleting everything never happens on the request itself: it stores a pending action and
asks. Only a clear "yes"/"sim" as the very next message of the same thread, within
:data:`~memoria_decision.pending.PENDING_ACTION_TTL_S`, runs it. The user is always the
session's (the envelope's ``user_id``): the memory service is asked to list and delete that
user's memories and nothing in the message or from a model can name another.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final, Literal, TypeVar

from memoria_contracts.chat import ChatRecord
from memoria_contracts.events import CycleEndReason, Language, StepRecord, UpdateChoice
from memoria_contracts.memory import (
    MAX_PAGE,
    MemoryDelete,
    MemoryDeleted,
    MemoryFailure,
    MemoryList,
    MemoryUpdate,
    MemoryUpdated,
)
from memoria_contracts.text import one_line
from memoria_decision.commands import Command, Reply, read_choice, read_reply, recognize
from memoria_decision.last_told import UPDATED_CARD_SUFFIX, last_told
from memoria_decision.pending import (
    PendingAction,
    PendingActions,
    Prefetched,
    UpdateCandidate,
    pending_id_for,
)
from memoria_decision.routes import Route, RouteKind
from memoria_decision.state import CycleState, CycleStore
from memoria_runtime import i18n
from memoria_runtime.gate import ThreadGate
from memoria_runtime.memory_client import MemoryClient
from memoria_runtime.rpc import RpcError

log = logging.getLogger("memoria.decision.fast_paths")

R = TypeVar("R")

LIST_ACTION: Final = "ListMemories"
ASK_DELETE_ALL_ACTION: Final = "ConfirmDeleteAll"
DELETE_ALL_ACTION: Final = "DeleteAllMemories"
CANCEL_ACTION: Final = "Cancel"
UPDATE_CHOSEN_ACTION: Final = "UpdateChosenMemory"
ASK_CHOICE_ACTION: Final = "AskWhichMemory"
FORGET_ACTION: Final = "ForgetLastTold"
ASK_FORGET_ACTION: Final = "AskWhatToForget"
EXPIRED_ACTION: Final = "ConfirmationExpired"

EXCERPT_CHARS: Final = 80
"""How much of each candidate's content the "which memory?" question shows."""

LIST_SHOWN: Final = 50
"""Memories a "list all" shows, newest first (the CLI's /memories shows as many); the reply
says when there are more and where to see them."""
DELETE_CONCURRENCY: Final = 8
"""Deletions in flight at once: each is a document and its vectors in the memory service."""

STEP: Final = 1  # a fast path is the cycle's one and only step


class MemoryUnavailable(Exception):
    """The memory service did not answer or said it cannot; the cycle ends with a notice."""


@dataclass(frozen=True)
class Ending:
    """How a fast path ended: the step to record, the end reason, a notice to show."""

    step: StepRecord
    reason: CycleEndReason = "done"
    notice: str | None = None


def route_for(
    message: str,
    pending: PendingAction | None,
    language: Language,
    *,
    asked: AskedKind | None = None,
) -> Route:
    """The route of a message, given the thread's pending action; ``language`` is the one
    detected for the message, used when nothing recognized says better. A message that does
    not tell its language ("ok", "3") answers in the language the pending question was asked
    in. ``asked``: the thread's last answer was one of the runtime's questions (whose pending
    action, if none is left, expired)."""
    if pending is not None and i18n.language_of(message) is None:
        language = pending.language
    if pending is not None and pending.kind in ("choose_update", "choose_forget"):
        chosen_kind: RouteKind = (
            "update_chosen" if pending.kind == "choose_update" else "forget_chosen"
        )
        choice = read_choice(
            message, [(c.memory_id, excerpt(c.content)) for c in pending.candidates]
        )
        said = choice.language or pending.language
        if choice.index is not None:
            chosen = pending.candidates[choice.index].memory_id
            return Route(
                kind=chosen_kind,
                language=said,
                resolves=pending.id,
                choice=pending,
                targets=[chosen],
            )
        if choice.out_of_range:
            # "3" of two: a slip, not a change of subject; the same question again.
            return Route(kind="ask_choice", language=said, resolves=pending.id, choice=pending)
        reply = read_reply(message, pending.language)
        if reply.kind == Reply.DECLINE:
            return Route(
                kind="cancel",
                language=reply.language,
                resolves=pending.id,
                declined=True,
                choice=pending,
            )
    elif pending is not None:
        reply = read_reply(message, pending.language)
        if reply.kind == Reply.CONFIRM:
            return Route(kind="delete_all", language=reply.language, resolves=pending.id)
        if reply.kind == Reply.DECLINE:
            return Route(kind="cancel", language=reply.language, resolves=pending.id, declined=True)
    elif asked == "delete_all":
        reply = read_reply(message, language)
        if reply.kind == Reply.CONFIRM:
            # The yes came after the question expired: it confirms nothing, and no model may
            # read it as a go-ahead either.
            return Route(kind="expired", language=reply.language, expired="delete_all")
    elif asked is not None:
        choice = read_choice(message, _ANY_CANDIDATES)
        if choice.index is not None or choice.out_of_range:
            # A pick after the "which one?" question expired: nothing left to pick among.
            return Route(kind="expired", language=choice.language or language, expired=asked)
    resolves = pending.id if pending else None
    dropped = pending.kind if pending else None
    command = recognize(message)
    if command is None:
        return Route(kind="model", language=language, resolves=resolves, dropped=dropped)
    if command.kind == Command.DELETE_ALL:
        # Asked again: the new question replaces the old one, nothing to say about it.
        return Route(kind="ask_delete_all", language=command.language, resolves=resolves)
    if command.kind == Command.LIST_ALL:
        return Route(kind="list_all", language=command.language, resolves=resolves, dropped=dropped)
    if command.kind == Command.FORGET_LAST:
        return Route(
            kind="forget_last", language=command.language, resolves=resolves, dropped=dropped
        )
    # A cancel with a pending action was read above as a "no"; here there is nothing pending.
    return Route(kind="cancel", language=command.language)


Post = Callable[[CycleState, ChatRecord], Awaitable[None]]


@dataclass
class FastPaths:
    memory: MemoryClient
    pending: PendingActions
    store: CycleStore
    gate: ThreadGate
    post: Post

    async def route(self, state: CycleState, prefetched: Prefetched | None = None) -> Route:
        """The cycle's route: decided and saved on the first delivery, reused after.
        ``prefetched``: the thread's pending action, when this delivery read it already."""
        if state.route is None:
            if prefetched is None:
                pending = await self.pending.get(state.user_id, state.thread_id)
            else:
                pending = await self.pending.parse(state.user_id, state.thread_id, prefetched.raw)
            route = route_for(
                str(state.original.content),
                pending,
                state.language,
                asked=_asked(state.history),
            )
            state.route = route
            # Replies in the language of the command, or of the question the message answers.
            state.language = route.language
            if route.kind != "model" or route.resolves is not None:
                # Saved before the pending action is cleared, so a redelivery takes the same
                # route. A plain model route with nothing pending is what a redelivery would
                # derive again: it is saved with the cycle's next state, not on its own.
                await self.store.save(state)
            log.info("cycle %s: route %s", state.cycle_id, route.kind)
        if state.route.resolves is not None:
            # After saving the route: a crash in between finds the route, clears again.
            await self.pending.clear(state.user_id, state.thread_id, state.route.resolves)
        return state.route

    async def run(self, state: CycleState, route: Route) -> Ending:
        try:
            if route.kind == "list_all":
                return await self._list_all(state)
            if route.kind == "ask_delete_all":
                return await self._ask_delete_all(state)
            if route.kind == "delete_all":
                return await self._delete_all(state, route)
            if route.kind == "update_chosen":
                return await self._update_chosen(state, route)
            if route.kind == "ask_choice":
                assert route.choice is not None
                if route.choice.kind == "choose_forget":
                    await self._ask_forget_choice(state, route.choice.candidates)
                else:
                    await self.ask_choice(state, route.choice.candidates, route.choice, step=STEP)
                return _ok(ASK_CHOICE_ACTION, "no such candidate: asked again which memory")
            if route.kind == "forget_last":
                return await self._forget_last(state)
            if route.kind == "forget_chosen":
                assert route.targets
                return await self._forget(state, route.targets[0])
            if route.kind == "expired":
                key = "pending_expired" if route.expired == "delete_all" else "choice_expired"
                await self._reply(state, i18n.text(key, state.language))
                return _ok(EXPIRED_ACTION, f"an answer to an expired {route.expired} question")
            return await self._cancel(state, route)
        except MemoryUnavailable as exc:
            log.error("cycle %s: %s failed: %s", state.cycle_id, route.kind, exc)
            return Ending(
                step=StepRecord(
                    step=STEP, action=_ACTIONS[route.kind], status="failed", summary=str(exc)
                ),
                reason="action_failed",
                notice=i18n.text("memory_unavailable", state.language),
            )

    # -- the paths --------------------------------------------------------------------------

    async def _list_all(self, state: CycleState) -> Ending:
        await self._status(state, "list_all_started")
        page = await self._ask(
            self.memory.list(
                state.user_id,
                MemoryList(limit=LIST_SHOWN),
                thread_id=state.thread_id,
                cycle_id=state.cycle_id,
            )
        )
        if isinstance(page, MemoryFailure):
            raise MemoryUnavailable(f"memory.list refused ({page.code}): {page.error_message}")
        for n, memory in enumerate(page.memories):
            # Cards as MemorySearch shows them (same shape, chat-history true), so the next
            # cycle's model can act on "the second one" like on a search result.
            card = ChatRecord.memory_card(f"{state.cycle_id}.{STEP}.{n}", state.cycle_id, memory)
            await self.post(state, card)
        count = len(page.memories)
        if count == 0:
            reply = i18n.text("list_all_none", state.language)
        elif page.next_cursor is None:
            reply = i18n.text("list_all_shown", state.language, count=count)
        else:
            reply = i18n.text("list_all_newest", state.language, count=count)
        await self._reply(state, reply)
        more = " (and more)" if page.next_cursor else ""
        return _ok(LIST_ACTION, f"listed the user's {count} newest memories{more}")

    async def _ask_delete_all(self, state: CycleState) -> Ending:
        action = PendingAction(
            id=pending_id_for(state.cycle_id),
            kind="delete_all",
            language=state.language,
            asked_in_cycle=state.cycle_id,
        )
        await self.pending.put(state.user_id, state.thread_id, action)
        minutes = max(1, self.pending.ttl_s // 60)
        await self._reply(state, i18n.text("delete_all_question", state.language, minutes=minutes))
        return _ok(ASK_DELETE_ALL_ACTION, "asked the user to confirm deleting all their memories")

    async def _delete_all(self, state: CycleState, route: Route) -> Ending:
        await self._status(state, "memory_delete_started")
        if route.targets is None:
            route.targets = await self._all_ids(state)
            await self.store.save(state)
        targets = route.targets
        failed = 0
        for start in range(0, len(targets), DELETE_CONCURRENCY):
            await self.gate.refresh(state.user_id, state.thread_id, state.message_id)
            batch = targets[start : start + DELETE_CONCURRENCY]
            gone = await asyncio.gather(*(self._delete(state, memory_id) for memory_id in batch))
            failed += gone.count(False)
        deleted = len(targets) - failed
        summary = f"deleted {deleted} of the user's {len(targets)} memories"
        if failed:
            # Like every failed cycle: a system notice says what happened, then cycle_end.
            notice = i18n.text(
                "delete_all_partial",
                state.language,
                deleted=deleted,
                total=len(targets),
                failed=failed,
            )
            return Ending(
                step=StepRecord(
                    step=STEP, action=DELETE_ALL_ACTION, status="failed", summary=summary
                ),
                reason="action_failed",
                notice=notice,
            )
        if targets:
            await self._reply(state, i18n.text("delete_all_done", state.language, count=deleted))
        else:
            await self._reply(state, i18n.text("delete_all_none", state.language))
        return _ok(DELETE_ALL_ACTION, summary)

    async def ask_choice(
        self,
        state: CycleState,
        candidates: list[UpdateCandidate],
        update: PendingAction | UpdateChoice,
        *,
        step: int,
    ) -> None:
        """Ask which memory an update meant, candidates numbered, and keep the question as the
        thread's pending action (a ``choose_update``); the next message answers it. The id is
        the asking cycle's: a redelivery stores the same one again and posts the same reply."""
        action = PendingAction(
            id=pending_id_for(state.cycle_id),
            kind="choose_update",
            language=state.language,
            asked_in_cycle=state.cycle_id,
            candidates=candidates,
            content=update.content,
            content_kind=update.content_kind,
        )
        await self.pending.put(state.user_id, state.thread_id, action)
        numbered = "\n".join(
            f"{n}. {excerpt(c.content)}" for n, c in enumerate(candidates, start=1)
        )
        minutes = max(1, self.pending.ttl_s // 60)
        text = i18n.text(
            "update_choice_question",
            state.language,
            content=excerpt(update.content),
            candidates=numbered,
            minutes=minutes,
        )
        await self._reply(state, text, step=step)

    async def _update_chosen(self, state: CycleState, route: Route) -> Ending:
        """The chosen memory gets the new content, as the session's user (the memory service
        refuses a memory of anyone else). What is reported comes from the pending action, not
        from the update's answer: a redelivered cycle updates again (same content, harmless)
        and tells the same thing, not "from tea to tea"."""
        assert route.choice is not None
        assert route.targets
        memory_id = route.targets[0]
        chosen = next(c for c in route.choice.candidates if c.memory_id == memory_id)
        await self._status(state, "memory_update_started")
        reply = await self._ask(
            self.memory.update(
                state.user_id,
                MemoryUpdate(
                    memory_id=memory_id,
                    content=route.choice.content,
                    content_kind=route.choice.content_kind,
                    source="chat",
                ),
                thread_id=state.thread_id,
                cycle_id=state.cycle_id,
            )
        )
        old, new = excerpt(chosen.content), excerpt(route.choice.content)
        if isinstance(reply, MemoryUpdated):
            # The card's id says it was written here: what a later "forget that" forgets.
            card = ChatRecord.memory_card(
                f"{state.cycle_id}.{STEP}{UPDATED_CARD_SUFFIX}", state.cycle_id, reply.memory
            )
            await self.post(state, card)
            await self._reply(
                state, i18n.text("update_chosen_done", state.language, old=old, new=new)
            )
            return _ok(UPDATE_CHOSEN_ACTION, f'updated {memory_id} ("{old}" -> "{new}")')
        if reply.code == "unavailable":
            raise MemoryUnavailable(f"memory service unavailable: {reply.error_message}")
        log.warning("cycle %s: %s not updated: %s", state.cycle_id, memory_id, reply.error_message)
        return Ending(
            step=StepRecord(
                step=STEP,
                action=UPDATE_CHOSEN_ACTION,
                status="failed",
                summary=f"{memory_id} not updated ({reply.code}): {reply.error_message}",
            ),
            reason="action_failed",
            notice=i18n.text("update_chosen_failed", state.language, old=old),
        )

    async def _forget_last(self, state: CycleState) -> Ending:
        """ "Forget that": the memory the user's last statement in the thread wrote; when
        there is none, or it is not one, the user is asked what (never a search for the
        words "forget that")."""
        written = last_told(state.history)
        if not written:
            await self._reply(state, i18n.text("forget_ask_what", state.language))
            return _ok(ASK_FORGET_ACTION, "nothing the user told was saved here: asked what")
        if len(written) == 1:
            return await self._forget(state, written[0])
        candidates: list[UpdateCandidate] = []
        for memory_id in written:
            found = await self._ask(
                self.memory.get(
                    state.user_id, memory_id, thread_id=state.thread_id, cycle_id=state.cycle_id
                )
            )
            if isinstance(found, MemoryFailure):
                if found.code == "unavailable":
                    raise MemoryUnavailable(f"memory service unavailable: {found.error_message}")
                continue  # gone meanwhile: nothing to choose
            candidates.extend(
                UpdateCandidate(memory_id=m.memory_id, content=m.content) for m in found.memories
            )
        if len(candidates) == 1:
            return await self._forget(state, candidates[0].memory_id)
        if not candidates:
            await self._reply(state, i18n.text("forget_gone", state.language))
            return _ok(FORGET_ACTION, "what the user told last is gone already")
        await self._ask_forget_choice(state, candidates)
        return _ok(ASK_FORGET_ACTION, f"asked which of {len(candidates)} memories to forget")

    async def _ask_forget_choice(
        self, state: CycleState, candidates: list[UpdateCandidate]
    ) -> None:
        """The user's last statement wrote several memories: which one is "that"? Kept as
        the thread's pending action (a ``choose_forget``), answered like an update's choice."""
        action = PendingAction(
            id=pending_id_for(state.cycle_id),
            kind="choose_forget",
            language=state.language,
            asked_in_cycle=state.cycle_id,
            candidates=candidates,
        )
        await self.pending.put(state.user_id, state.thread_id, action)
        numbered = "\n".join(
            f"{n}. {excerpt(c.content)}" for n, c in enumerate(candidates, start=1)
        )
        minutes = max(1, self.pending.ttl_s // 60)
        text = i18n.text(
            "forget_choice_question", state.language, candidates=numbered, minutes=minutes
        )
        await self._reply(state, text)

    async def _forget(self, state: CycleState, memory_id: str) -> Ending:
        """Delete one memory of the session's user and say what was forgotten."""
        await self._status(state, "memory_delete_started")
        reply = await self._ask(
            self.memory.delete(
                state.user_id,
                MemoryDelete(memory_id=memory_id),
                thread_id=state.thread_id,
                cycle_id=state.cycle_id,
            )
        )
        if isinstance(reply, MemoryDeleted):
            content = excerpt(reply.deleted_content)
            await self._reply(state, i18n.text("forget_done", state.language, content=content))
            return _ok(FORGET_ACTION, f'forgot {memory_id} ("{content}")')
        if reply.code == "unavailable":
            raise MemoryUnavailable(f"memory service unavailable: {reply.error_message}")
        if reply.code == "not_found":
            # Forgotten before (a "forget that" said twice), or deleted from another window.
            await self._reply(state, i18n.text("forget_gone", state.language))
            return _ok(FORGET_ACTION, f"{memory_id} was gone already")
        log.warning("cycle %s: %s not deleted: %s", state.cycle_id, memory_id, reply.error_message)
        return Ending(
            step=StepRecord(
                step=STEP,
                action=FORGET_ACTION,
                status="failed",
                summary=f"{memory_id} not deleted ({reply.code}): {reply.error_message}",
            ),
            reason="action_failed",
            notice=i18n.text("memory_rejected", state.language, detail=reply.code),
        )

    async def _cancel(self, state: CycleState, route: Route) -> Ending:
        if route.declined and route.choice is not None and route.choice.kind == "choose_forget":
            await self._reply(state, i18n.text("forget_choice_cancelled", state.language))
            return _ok(CANCEL_ACTION, "cancelled the pending forget; nothing was deleted")
        if route.declined and route.choice is not None:
            await self._reply(state, i18n.text("update_choice_cancelled", state.language))
            return _ok(CANCEL_ACTION, "cancelled the pending update; nothing was changed")
        if route.declined:
            await self._reply(state, i18n.text("pending_cancelled", state.language))
            return _ok(CANCEL_ACTION, "cancelled the pending request; nothing was deleted")
        await self._reply(state, i18n.text("nothing_to_cancel", state.language))
        return _ok(CANCEL_ACTION, "nothing to cancel")

    # -- memory calls -----------------------------------------------------------------------

    async def _ask(self, call: Awaitable[R]) -> R:
        try:
            return await call
        except (TimeoutError, RpcError) as exc:
            raise MemoryUnavailable(f"memory service: {str(exc) or type(exc).__name__}") from exc

    async def _all_ids(self, state: CycleState) -> list[str]:
        """Every memory id of the session's user, page after page."""
        ids: list[str] = []
        cursor: str | None = None
        while True:
            page = await self._ask(
                self.memory.list(
                    state.user_id,
                    MemoryList(limit=MAX_PAGE, cursor=cursor),
                    thread_id=state.thread_id,
                    cycle_id=state.cycle_id,
                )
            )
            if isinstance(page, MemoryFailure):
                raise MemoryUnavailable(f"memory.list refused ({page.code}): {page.error_message}")
            ids.extend(m.memory_id for m in page.memories)
            await self.gate.refresh(state.user_id, state.thread_id, state.message_id)
            if page.next_cursor is None:
                return list(dict.fromkeys(ids))
            cursor = page.next_cursor

    async def _delete(self, state: CycleState, memory_id: str) -> bool:
        """True when the memory is gone: deleted now, or already (``not_found``: deleted by
        an earlier delivery of this cycle, or meanwhile from another window)."""
        reply = await self._ask(
            self.memory.delete(
                state.user_id,
                MemoryDelete(memory_id=memory_id),
                thread_id=state.thread_id,
                cycle_id=state.cycle_id,
            )
        )
        if isinstance(reply, MemoryDeleted):
            return True
        if reply.code == "unavailable":
            raise MemoryUnavailable(f"memory service unavailable: {reply.error_message}")
        if reply.code == "not_found":
            return True
        log.warning("cycle %s: %s not deleted: %s", state.cycle_id, memory_id, reply.error_message)
        return False

    # -- output -----------------------------------------------------------------------------

    async def _status(self, state: CycleState, key: str) -> None:
        record = ChatRecord(
            id=f"{state.cycle_id}.{STEP}.status",
            cycle_id=state.cycle_id,
            chat_history=False,
            modal="textForReplace",
            role="system",
            content=i18n.text(key, state.language),
        )
        await self.post(state, record)

    async def _reply(self, state: CycleState, text: str, *, step: int = STEP) -> None:
        """The assistant's turn (chat-history true, like a Question: the next cycle's model
        must see what was asked or done). A fixed id: a redelivery replaces, never adds."""
        record = ChatRecord(
            id=f"{state.cycle_id}.{step}.reply",
            cycle_id=state.cycle_id,
            chat_history=True,
            modal="text",
            role="assistant",
            content=text,
        )
        await self.post(state, record)


_ACTIONS: Final = {
    "list_all": LIST_ACTION,
    "ask_delete_all": ASK_DELETE_ALL_ACTION,
    "delete_all": DELETE_ALL_ACTION,
    "cancel": CANCEL_ACTION,
    "update_chosen": UPDATE_CHOSEN_ACTION,
    "ask_choice": ASK_CHOICE_ACTION,
    "forget_last": FORGET_ACTION,
    "forget_chosen": FORGET_ACTION,
    "expired": EXPIRED_ACTION,
}


AskedKind = Literal["delete_all", "choose_update", "choose_forget"]
_QUESTIONS: Final[dict[AskedKind, str]] = {
    "delete_all": "delete_all_question",
    "choose_update": "update_choice_question",
    "choose_forget": "forget_choice_question",
}
_ANY_CANDIDATES: Final = [(f"mem_{n}", "") for n in range(1, 10)]
"""Stand-ins for the candidates of an expired "which one?" question: a number is a pick."""


def _asked(history: list[ChatRecord]) -> AskedKind | None:
    """Which of the runtime's questions the thread's last answer (a tool record aside) was."""
    for record in reversed(history):
        if record.role == "assistant" and record.modal == "text" and not record.tool_record:
            said = str(record.content)
            for kind, key in _QUESTIONS.items():
                if any(said.startswith(q.split("{", 1)[0]) for q in i18n.TEXTS[key].values()):
                    return kind
            return None
    return None


def excerpt(content: object) -> str:
    """A memory's content on one short line, as the "which memory?" question shows it."""
    return one_line(content, EXCERPT_CHARS)


def _ok(action: str, summary: str) -> Ending:
    return Ending(step=StepRecord(step=STEP, action=action, status="ok", summary=summary))

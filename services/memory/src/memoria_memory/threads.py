"""Threads: one document per (user, thread) beside the chat history, for thread lists.

A thread comes into being when it is created by name (``thread.create``) or when its first
message is stored, whichever happens first. Its statistics — message count, newest message,
the title made from the first user message (a step's tool call or result counts in none of
them) — are counted up as messages are first stored: one atomic update per message, whatever
the thread's length. Counting up is only right when each message is counted exactly once, so
whenever that is in doubt — the message was stored before (it replaced itself) or its entry
is a redelivery (the handler that stored it may have died before it counted it) — they are
recomputed from the stored messages instead. Message handlers run concurrently (and on
several replicas), so neither ever moves the newest message backwards, and a recomputation is
written only over one it is at least as new as on both counts — the message count and the
newest message's position, which only ever grow.

Every query names the user, as in the history and the memories: another user's thread of the
same id is a different document.

A thread's session config overrides are fields of its document too; the effective
config is made by :mod:`memoria_memory.session_configs`. So is its persona log
(``agent_history``): a change of persona appends an entry in the same write that sets it,
guarded by the log's sequence number (compare and set), so two concurrent switches both
land in order and a switch is never stored without its entry.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from memoria_contracts.chat import ChatRecord
from memoria_contracts.memory import MEMORY_TYPES
from memoria_contracts.personas import (
    DEFAULT_PERSONA_ID,
    MAX_AGENT_HISTORY,
    AgentHistoryEntry,
    PersonaApplied,
)
from memoria_contracts.session import SESSION_FIELDS, SessionConfigOverrides, SessionConfigUpdate
from memoria_contracts.threads import DEFAULT_THREAD_TITLE, Thread
from memoria_memory import one_off
from memoria_memory.docstore import Collection, Document, DocumentStore, DuplicateKeyError
from memoria_memory.history import COLLECTION as MESSAGES
from memoria_memory.history import SHOWN
from memoria_memory.memories import clock
from memoria_memory.thread_titles import default_title, preview

COLLECTION: Final = "chat_threads"
_BACKFILLED: Final = "backfilled"
"""Marks that threads were made for the history stored before threads existed. No thread's
key looks like it (keys hold a '/'), and it has no user_id, so no user's query matches it."""
_BACKFILL_PAGE: Final = 1000
_NO_MESSAGE: Final = -1
_CONFIG_PREFIX: Final = "config_"
"""A session config override is a field of the thread's document: one field per setting
(and per memory type description), so concurrent changes of different fields never undo
each other and resetting one is an ``$unset``."""
_TYPE_DESCRIPTIONS: Final = "memory_type_descriptions"
_PERSONA: Final = "persona"
_HISTORY: Final = "agent_history"
_HISTORY_SEQ: Final = "agent_history_seq"
_APPLIED: Final = "persona_applied"
_TITLE_SEQ: Final = "auto_title_seq"
"""The position of the user message ``auto_title`` was made from: a user message stored
later but published earlier (concurrent handlers) takes the title over."""
_RECOUNT_ATTEMPTS: Final = 4
"""Recounts of a thread while its new messages keep being counted up, before giving way."""
_SWITCH_ATTEMPTS: Final = 8
"""Compare-and-set rounds of a persona switch racing other switches of the same thread."""


class SwitchConflict(RuntimeError):
    """A persona switch lost every compare-and-set round (a storm of concurrent switches)."""


@dataclass(frozen=True)
class StoredSession:
    """A thread's stored session: its overrides, persona log and last applied switch."""

    overrides: SessionConfigOverrides
    agent_history: list[AgentHistoryEntry]
    persona_applied: PersonaApplied | None


def _config_field(name: str) -> str:
    return f"{_CONFIG_PREFIX}{name}"


def _type_field(memory_type: str) -> str:
    return f"{_CONFIG_PREFIX}type_{memory_type}"


def _as_overrides(document: Document) -> SessionConfigOverrides:
    scalars = {
        name: document.get(_config_field(name))
        for name in SESSION_FIELDS
        if name != _TYPE_DESCRIPTIONS
    }
    types = {t: document[_type_field(t)] for t in MEMORY_TYPES if _type_field(t) in document}
    return SessionConfigOverrides.model_validate({**scalars, _TYPE_DESCRIPTIONS: types or None})


def _title_open(seq: int) -> dict[str, Any]:
    """Matches a thread whose title comes from no user message published before ``seq``.
    One without a title position and with a title was titled before positions were kept:
    its title stays."""
    return {"$or": [{_TITLE_SEQ: {"$gt": seq}}, {_TITLE_SEQ: None, "auto_title": None}]}


def _title_open_in(thread: Document, seq: int) -> bool:
    """:func:`_title_open` on the document as read: a title position only ever moves
    earlier, so when the read one is already before ``seq`` the update can be skipped."""
    title_seq = thread.get(_TITLE_SEQ)
    if title_seq is None:
        return thread.get("auto_title") is None
    return bool(title_seq > seq)


def _as_newest(thread: Document, message: Document) -> dict[str, Any]:
    """The thread's fields that show ``message`` (as stored: ``seq``, ``modal``,
    ``content``, ``created_at``) as its newest."""
    written = clock.stamp(clock.parse(message["created_at"]))
    return {
        "last_seq": message["seq"],
        "last_message": preview(message["modal"], message.get("content")),
        "updated_at": max(thread["created_at"], written),
    }


def thread_key(user_id: str, thread_id: str) -> str:
    # '/' is in neither a user id's nor a thread id's alphabet: no two pairs share a key.
    return f"{user_id}/{thread_id}"


def _as_thread(document: Document) -> Thread:
    return Thread(
        thread_id=document["thread_id"],
        title=document.get("title") or document.get("auto_title") or DEFAULT_THREAD_TITLE,
        created_at=clock.parse(document["created_at"]),
        updated_at=clock.parse(document["updated_at"]),
        message_count=document["message_count"],
        last_message=document.get("last_message"),
    )


class ThreadRepository:
    def __init__(self, store: DocumentStore) -> None:
        self._threads: Collection = store.collection(COLLECTION)
        self._messages: Collection = store.collection(MESSAGES)

    async def setup(self) -> None:
        # Read backwards by list(): both stores walk an index either way.
        await self._threads.ensure_index([("user_id", 1), ("updated_at", 1), ("thread_id", 1)])
        await self._backfill()

    # -- reads ------------------------------------------------------------------------------

    async def list(self, user_id: str, *, limit: int) -> list[Thread]:
        """The user's threads, most recently updated first."""
        found = await self._threads.find(
            {"user_id": user_id}, sort=[("updated_at", -1), ("thread_id", -1)], limit=limit
        )
        return [_as_thread(document) for document in found]

    async def get(self, user_id: str, thread_id: str) -> Thread | None:
        found = await self._find(user_id, thread_id)
        return _as_thread(found) if found else None

    # -- writes -----------------------------------------------------------------------------

    async def create(self, user_id: str, thread_id: str, title: str | None) -> tuple[Thread, bool]:
        """The new thread and True; the existing one and False when the id is taken (a
        repeated request), which is then left as it is."""
        document = self._new(user_id, thread_id, title=title, at=clock.now())
        try:
            await self._threads.insert_one(document)
        except DuplicateKeyError:
            existing = await self._find(user_id, thread_id)
            if existing is None:  # pragma: no cover - documents are never deleted
                raise
            return _as_thread(existing), False
        return _as_thread(document), True

    async def rename(self, user_id: str, thread_id: str, title: str) -> Thread | None:
        """None when the user has no such thread. A chosen title is kept for good: the one
        made from the first user message never replaces it."""
        renamed = await self._threads.update_one(
            {"_id": thread_key(user_id, thread_id), "user_id": user_id}, set={"title": title}
        )
        return await self.get(user_id, thread_id) if renamed else None

    async def session_config(self, user_id: str, thread_id: str) -> SessionConfigOverrides | None:
        """The thread's session config overrides; None when the user has no such thread."""
        found = await self._find(user_id, thread_id)
        return _as_overrides(found) if found else None

    async def session(self, user_id: str, thread_id: str) -> StoredSession | None:
        """The thread's overrides, persona log and last applied switch; None when the user
        has no such thread."""
        found = await self._find(user_id, thread_id)
        if found is None:
            return None
        applied = found.get(_APPLIED)
        return StoredSession(
            overrides=_as_overrides(found),
            agent_history=[AgentHistoryEntry.model_validate(e) for e in found.get(_HISTORY, [])],
            persona_applied=PersonaApplied.model_validate(applied) if applied else None,
        )

    async def record_persona_applied(
        self, user_id: str, thread_id: str, applied: PersonaApplied
    ) -> bool:
        """What a cycle after a switch applied; False when the user has no such thread."""
        return await self._threads.update_one(
            {"_id": thread_key(user_id, thread_id), "user_id": user_id},
            set={_APPLIED: applied.model_dump(mode="json")},
        )

    async def update_session_config(
        self,
        user_id: str,
        change: SessionConfigUpdate,
        *,
        default_persona: str = DEFAULT_PERSONA_ID,
    ) -> SessionConfigOverrides | None:
        """Apply ``change`` to the thread's overrides; None when the user has no such
        thread. Only the fields the change names are written (one atomic update), so a
        concurrent change of other fields is kept. A change of the thread's persona (from
        the one in effect, ``default_persona`` when it set none) appends to its
        agentHistory in the same update."""
        given = change.set
        assign: dict[str, Any] = {}
        remove: list[str] = []
        for name in SESSION_FIELDS:
            if name == _TYPE_DESCRIPTIONS:
                continue
            if name in change.reset:
                remove.append(_config_field(name))
            elif (value := getattr(given, name)) is not None:
                assign[_config_field(name)] = value
        if _TYPE_DESCRIPTIONS in change.reset:
            remove.extend(_type_field(t) for t in MEMORY_TYPES)
        else:
            for memory_type, text in (given.memory_type_descriptions or {}).items():
                if text is None:
                    remove.append(_type_field(memory_type))
                else:
                    assign[_type_field(memory_type)] = text
        thread_id = change.thread_id
        where = {"_id": thread_key(user_id, thread_id), "user_id": user_id}
        if _PERSONA in change.reset or given.persona is not None:
            after = default_persona if _PERSONA in change.reset else given.persona
            return await self._switch(
                user_id, thread_id, (after or default_persona, default_persona), assign, remove
            )
        changed = assign or remove
        if changed and not await self._threads.update_one(where, set=assign, unset=remove):
            return None
        return await self.session_config(user_id, thread_id)

    async def _switch(
        self,
        user_id: str,
        thread_id: str,
        personas: tuple[str, str],
        assign: dict[str, Any],
        remove: Sequence[str],
    ) -> SessionConfigOverrides | None:
        """Write the change; when the persona in effect changes (``personas``: the one
        asked for and the default), with a new agentHistory entry, only over the log this
        was computed from."""
        persona, default_persona = personas
        for _ in range(_SWITCH_ATTEMPTS):
            found = await self._find(user_id, thread_id)
            if found is None:
                return None
            before = found.get(_config_field(_PERSONA)) or default_persona
            seq = found.get(_HISTORY_SEQ)
            where = {"_id": thread_key(user_id, thread_id), "user_id": user_id, _HISTORY_SEQ: seq}
            logged: dict[str, Any] = {}
            if before != persona:
                entry = AgentHistoryEntry(
                    seq=(seq or 0) + 1, persona=persona, previous=before, at=clock.now(), by=user_id
                )
                history = [*found.get(_HISTORY, []), entry.model_dump(mode="json")]
                logged = {_HISTORY: history[-MAX_AGENT_HISTORY:], _HISTORY_SEQ: entry.seq}
            if await self._threads.update_one(where, set={**assign, **logged}, unset=remove):
                return await self.session_config(user_id, thread_id)
        raise SwitchConflict(f"persona switch of {thread_id}: too many concurrent switches")

    async def record_message(
        self, user_id: str, thread_id: str, record: ChatRecord, seq: int, *, fresh: bool
    ) -> None:
        """``record`` was stored at position ``seq``: create the thread if it is new, and
        bring its statistics up to date. ``fresh``: the message was not stored before and
        this is its entry's first delivery, so it is counted up; otherwise the statistics
        are recomputed, which is idempotent. A message that is not shown (a step's tool call
        or result) counts in none of them, so they are left alone."""
        thread = await self._ensure(user_id, thread_id, record.created_at)
        if record.tool_record:  # what SHOWN leaves out, so a recount would not count it
            return
        if fresh:
            await self._count(user_id, thread, record, seq)
        else:
            # Whether an earlier delivery counted this message is unknown (it may have died
            # between storing it and counting it): a recount is right either way.
            await self._refresh(user_id, thread_id, thread)

    # -- internals --------------------------------------------------------------------------

    async def _find(self, user_id: str, thread_id: str) -> Document | None:
        return await self._threads.find_one(
            {"_id": thread_key(user_id, thread_id), "user_id": user_id}
        )

    @staticmethod
    def _new(user_id: str, thread_id: str, *, title: str | None, at: datetime) -> Document:
        stamp = clock.stamp(at)
        return {
            "_id": thread_key(user_id, thread_id),
            "user_id": user_id,
            "thread_id": thread_id,
            "title": title,  # chosen by someone; None: made from the first user message
            "auto_title": None,
            _TITLE_SEQ: None,
            "created_at": stamp,
            "updated_at": stamp,
            "message_count": 0,
            "last_message": None,
            "last_seq": _NO_MESSAGE,
        }

    async def _ensure(self, user_id: str, thread_id: str, created_at: datetime) -> Document:
        """The thread's document, created first if it is new."""
        found = await self._find(user_id, thread_id)
        if found is not None:
            return found
        document = self._new(user_id, thread_id, title=None, at=created_at)
        try:
            await self._threads.insert_one(document)
        except DuplicateKeyError:  # a concurrent message of the same thread created it first
            found = await self._find(user_id, thread_id)
            if found is None:  # pragma: no cover - documents are never deleted
                raise
            return found
        return document

    async def _count(self, user_id: str, thread: Document, record: ChatRecord, seq: int) -> None:
        """Count a new shown message up; ``thread`` is its document as read before."""
        key = thread_key(user_id, thread["thread_id"])
        # The stored form, so the preview and the time are those a recount would make.
        stored = record.model_dump(mode="json", include={"modal", "content", "created_at"})
        newest = _as_newest(thread, {**stored, "seq": seq})
        # Nearly always the message is the newest: one update counts it and shows it. One
        # handled after a newer one (concurrent handlers) is only counted.
        one_more = {"message_count": 1}
        if not await self._threads.update_one(
            {"_id": key, "last_seq": {"$lt": seq}}, set=newest, inc=one_more
        ):
            await self._threads.update_one({"_id": key}, inc=one_more)
        if record.role == "user" and _title_open_in(thread, seq):
            # Titled after it is counted: a recount that read before this message was stored
            # then fails its guard (the count has grown past its own) instead of writing an
            # older first user message's title back over this one.
            await self._threads.update_one(
                {"_id": key, **_title_open(seq)},
                set={"auto_title": default_title(stored.get("content")), _TITLE_SEQ: seq},
            )

    async def _refresh(self, user_id: str, thread_id: str, thread: Document) -> None:
        """Recount the statistics from the stored messages; ``thread`` is the thread's
        document as read before the recount starts."""
        key = thread_key(user_id, thread_id)
        for attempt in range(1, _RECOUNT_ATTEMPTS + 1):
            changes = await self._recount(user_id, thread_id, thread)
            if changes is None:
                return
            newer = {"$lte": changes["last_seq"]}  # the newest message never moves backwards
            if attempt < _RECOUNT_ATTEMPTS:
                # Compare and set on the count read before recounting: a message counted up
                # meanwhile (a concurrent handler) makes it read and count again, so a
                # recount never writes an older count over a newer one, and yet may lower
                # one that is too high. Too high it can be: a recount that sees a message
                # whose handler has stored it but not yet counted it up counts it once more
                # than that handler does; the thread's next recount puts it right.
                guard = {"_id": key, "message_count": thread["message_count"], "last_seq": newer}
            else:
                # Messages keep being counted up faster than a recount can finish: written
                # only where it is at least as new on both counts (which only grow), so it
                # never undoes one of them, and still brings back a message whose handler
                # died before counting it.
                count = {"$lte": changes["message_count"]}
                guard = {"_id": key, "message_count": count, "last_seq": newer}
            if await self._threads.update_one(guard, set=changes) or attempt == _RECOUNT_ATTEMPTS:
                return
            found = await self._find(user_id, thread_id)
            if found is None:  # pragma: no cover - documents are never deleted
                return
            thread = found

    async def _recount(
        self, user_id: str, thread_id: str, thread: Document
    ) -> dict[str, Any] | None:
        """The statistics as the stored messages make them; None when none is shown."""
        in_thread = {"user_id": user_id, "thread_id": thread_id}
        shown = {**in_thread, **SHOWN}  # a step's tool call and result are not messages
        count = await self._messages.count(shown)
        newest = await self._messages.find(shown, sort=[("seq", -1)], limit=1)
        if not count or not newest:
            return None
        first_user = await self._messages.find(
            {**in_thread, "role": "user"}, sort=[("seq", 1)], limit=1
        )
        return {
            "message_count": count,
            **_as_newest(thread, newest[0]),
            "auto_title": default_title(first_user[0].get("content")) if first_user else None,
            _TITLE_SEQ: first_user[0]["seq"] if first_user else None,
        }

    async def _backfill(self) -> None:
        """Once: a thread for every (user, thread) of the history stored before threads
        were kept, so they appear in thread lists too."""
        if await one_off.finished(self._threads, _BACKFILLED):
            return
        pairs: set[tuple[str, str]] = set()
        after = ""
        while page := await self._messages.find(
            {"_id": {"$gt": after}}, sort=[("_id", 1)], limit=_BACKFILL_PAGE
        ):
            pairs.update((message["user_id"], message["thread_id"]) for message in page)
            after = page[-1]["_id"]
        for user_id, thread_id in sorted(pairs):
            first = await self._messages.find(
                {"user_id": user_id, "thread_id": thread_id}, sort=[("seq", 1)], limit=1
            )
            thread = await self._ensure(user_id, thread_id, clock.parse(first[0]["created_at"]))
            await self._refresh(user_id, thread_id, thread)
        await one_off.mark_finished(self._threads, _BACKFILLED)

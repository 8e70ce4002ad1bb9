"""``Memoria`` (blocking) and ``AsyncMemoria`` (asyncio): the same calls, described once in
``memoria_client.calls``; each client only sends them, retries and reads the answer."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator, Sequence
from datetime import datetime
from typing import IO, Any, Final, Self, TypeVar

import httpx

from memoria_client import calls
from memoria_client.calls import Call
from memoria_client.chat import ChatOptions, ChatReply, chat_frames
from memoria_client.conversation import RECONNECT_DELAYS_S, Conversation
from memoria_client.errors import APIError, GatewayUnreachable, MemoriaError, describe
from memoria_client.models import (
    ContentKind,
    CreatedMemory,
    CycleTrace,
    DeletedMemory,
    Frame,
    Health,
    Memory,
    MemoryHistory,
    MemoryPage,
    MemoryType,
    MemoryUpdate,
    Message,
    PersonaList,
    SearchMode,
    Thread,
    ThreadConfig,
    Token,
)
from memoria_client.retry import RetryPolicy
from memoria_client.transfer import (
    BATCH_TRIES,
    RESEND_DELAY_S,
    ImportSummary,
    PendingImport,
    export_line,
    import_item,
)

T = TypeVar("T")

DEFAULT_URL: Final = "http://127.0.0.1:8000"
PAGE_SIZE: Final = 100
EXPORT_PAGE_SIZE: Final = 200


def default_url() -> str:
    """``MEMORIA_URL``, else the local gateway on ``MEMORIA_GATEWAY_PORT`` (8000)."""
    url = os.environ.get("MEMORIA_URL")
    if url:
        return url
    return f"http://127.0.0.1:{os.environ.get('MEMORIA_GATEWAY_PORT') or 8000}"


class _Settings:
    def __init__(self, base_url: str | None, token: str | None, retry: RetryPolicy | None) -> None:
        self.base_url = (base_url or default_url()).rstrip("/")
        self.token = token if token is not None else os.environ.get("MEMORIA_TOKEN")
        self.retry = retry or RetryPolicy()

    def headers(self, call: Call[Any]) -> dict[str, str]:
        headers = dict(call.headers)
        if call.authenticated and self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        return headers

    def chat_token(self) -> str:
        if not self.token:
            raise MemoriaError("no token: pass token=, set MEMORIA_TOKEN or call login()")
        return self.token

    def unreachable(self, exc: httpx.TransportError) -> GatewayUnreachable:
        return GatewayUnreachable(f"no answer from the gateway at {self.base_url}: {exc!r}")


def _next_cursor(page: MemoryPage, cursor: str | None) -> str | None:
    if page.next_cursor is not None and page.next_cursor == cursor:
        raise MemoriaError("the gateway sent the same page cursor twice")
    return page.next_cursor


def _import_failure(exc: APIError) -> str:
    return f"refused ({exc.status_code}): {describe(exc.detail)}"


class Memoria:
    """A blocking client. ``token`` defaults to ``MEMORIA_TOKEN``, ``base_url`` to
    ``MEMORIA_URL`` or the local gateway. ``trust_env=False`` ignores HTTP(S)_PROXY and the
    like (a gateway on this machine must not go through a proxy). Use as a context manager,
    or call ``close()``."""

    def __init__(
        self,
        base_url: str | None = None,
        token: str | None = None,
        *,
        timeout: float = 30.0,
        retry: RetryPolicy | None = None,
        transport: httpx.BaseTransport | None = None,
        trust_env: bool = True,
    ) -> None:
        self._settings = _Settings(base_url, token, retry)
        self._trust_env = trust_env
        self._http = httpx.Client(
            base_url=self._settings.base_url,
            timeout=timeout,
            transport=transport,
            trust_env=trust_env,
        )

    @property
    def base_url(self) -> str:
        return self._settings.base_url

    @property
    def token(self) -> str | None:
        return self._settings.token

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def run(self, call: Call[T]) -> T:
        """Send ``call``, retrying 429/503 as the retry policy says; its answer or its error."""
        attempt = 0
        while True:
            attempt += 1
            try:
                response = self._http.request(
                    call.method,
                    call.path,
                    params=call.params,
                    json=call.json,
                    headers=self._settings.headers(call),
                )
            except httpx.TransportError as exc:
                raise self._settings.unreachable(exc) from None
            delay = self._settings.retry.wait(
                response, attempt, retry_unavailable=call.retry_unavailable
            )
            if delay is None:
                return call.result(response)
            time.sleep(delay)

    def health(self) -> Health:
        """Whether the gateway is ready (``Unavailable`` when its broker does not answer)."""
        return self.run(calls.health())

    # -- login -------------------------------------------------------------------------------

    def login(self, user_id: str) -> Token:
        """Dev login (``POST /api/token``); later calls use the token it returns."""
        token = self.run(calls.login(user_id))
        self._settings.token = token.token
        return token

    # -- memories ----------------------------------------------------------------------------

    def add(
        self,
        content: Any,
        bindings: Sequence[str] | None = None,
        *,
        memory_type: MemoryType | None = None,
        content_kind: ContentKind | None = None,
        creation_datetime: datetime | None = None,
        idempotency_key: str | None = None,
    ) -> CreatedMemory:
        """Save a memory. ``bindings`` (the phrases it is found by) default to a text's own
        words. The same ``idempotency_key`` again returns the first memory, ``created`` False."""
        return self.run(
            calls.add_memory(
                content,
                bindings,
                memory_type=memory_type,
                content_kind=content_kind,
                creation_datetime=creation_datetime,
                imported=False,
                idempotency_key=idempotency_key,
            )
        )

    def get(self, memory_id: str) -> Memory:
        return self.run(calls.get_memory(memory_id))

    def update(
        self,
        memory_id: str,
        *,
        content: Any = None,
        content_kind: ContentKind | None = None,
        memory_type: MemoryType | None = None,
        bindings: Sequence[str] | None = None,
    ) -> MemoryUpdate:
        return self.run(
            calls.update_memory(
                memory_id,
                content=content,
                content_kind=content_kind,
                memory_type=memory_type,
                bindings=bindings,
            )
        )

    def delete(self, memory_id: str) -> DeletedMemory:
        return self.run(calls.delete_memory(memory_id))

    def list_page(
        self,
        *,
        memory_type: MemoryType | None = None,
        limit: int = PAGE_SIZE,
        cursor: str | None = None,
    ) -> MemoryPage:
        """One page of memories, newest first; pass ``next_cursor`` as ``cursor``."""
        return self.run(calls.list_memories(memory_type=memory_type, limit=limit, cursor=cursor))

    def list_memories(
        self, *, memory_type: MemoryType | None = None, page_size: int = PAGE_SIZE
    ) -> Iterator[Memory]:
        """Every memory, newest first, fetched a page at a time as you iterate."""
        cursor: str | None = None
        while True:
            page = self.list_page(memory_type=memory_type, limit=page_size, cursor=cursor)
            yield from page.memories
            cursor = _next_cursor(page, cursor)
            if cursor is None:
                return

    def search(
        self,
        *queries: str,
        mode: SearchMode = "semantic",
        memory_type: MemoryType | None = None,
        limit: int | None = None,
        min_relevance: float | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> list[Memory]:
        """Semantic (1-8 queries; most relevant first, with ``relevance_score``) or
        ``mode="chronological"`` (newest first, no query). ``since``/``until`` (aware
        datetimes; ``since`` inclusive, ``until`` exclusive) keep the memories told then."""
        return self.run(
            calls.search_memories(
                queries,
                mode=mode,
                memory_type=memory_type,
                limit=limit,
                min_relevance=min_relevance,
                since=since,
                until=until,
            )
        )

    def history(self, memory_id: str) -> MemoryHistory:
        return self.run(calls.memory_history(memory_id))

    # -- threads -----------------------------------------------------------------------------

    def threads(self, *, limit: int = 50) -> list[Thread]:
        """The latest ``limit`` (1-200) threads, most recently updated first."""
        return self.run(calls.list_threads(limit=limit))

    def create_thread(self, title: str | None = None) -> Thread:
        return self.run(calls.create_thread(title))

    def rename_thread(self, thread_id: str, title: str) -> Thread:
        return self.run(calls.rename_thread(thread_id, title))

    def messages(
        self, thread_id: str, *, limit: int = 100, before: str | None = None
    ) -> list[Message]:
        """One page of a thread's stored messages, oldest first."""
        return self.run(calls.thread_messages(thread_id, limit=limit, before=before))

    def iter_messages(self, thread_id: str, *, page_size: int = 100) -> Iterator[Message]:
        """Every stored message of the thread, newest first, paging back as you iterate."""
        before: str | None = None
        while True:
            page = self.messages(thread_id, limit=page_size, before=before)
            yield from reversed(page)
            if len(page) < page_size:
                return
            before = page[0].id

    def cycle(self, cycle_id: str) -> CycleTrace:
        """Everything that happened in one of your cycles (``cycle_id`` is in its frames)."""
        return self.run(calls.cycle_trace(cycle_id))

    # -- personas and session config ---------------------------------------------------------

    def personas(self) -> PersonaList:
        """The personas a thread can switch to, the default first."""
        return self.run(calls.list_personas())

    def thread_config(self, thread_id: str) -> ThreadConfig:
        """The thread's session config (``NotFound`` for a thread nothing was sent to yet)."""
        return self.run(calls.thread_config(thread_id))

    def update_thread_config(self, thread_id: str, **changes: Any) -> ThreadConfig:
        """Change the thread's session config, e.g. ``persona="coach"``; the config after."""
        return self.run(calls.update_thread_config(thread_id, changes))

    # -- chat --------------------------------------------------------------------------------

    def ask(
        self, content: str, *, thread: str = "main", options: ChatOptions | None = None
    ) -> ChatReply:
        """Send a chat message and wait for the whole answer (see ``AsyncMemoria.chat`` for
        the frames as they come)."""
        frames = chat_frames(
            self.base_url,
            self._settings.chat_token(),
            content,
            thread=thread,
            options=options or ChatOptions(),
            trust_env=self._trust_env,
        )
        return asyncio.run(ChatReply.collect(frames))

    # -- export / import ---------------------------------------------------------------------

    def export(self, sink: IO[str]) -> int:
        """Write every memory as a line of ``memoria export`` (newest first); how many."""
        count = 0
        for memory in self.list_memories(page_size=EXPORT_PAGE_SIZE):
            sink.write(export_line(memory) + "\n")
            count += 1
        return count

    def import_lines(self, lines: Iterable[str]) -> ImportSummary:
        """Create the memories of ``memoria export`` lines; safe to repeat. Bad or refused
        lines are counted and listed in ``failures``, the others still imported."""
        summary = ImportSummary()
        mine = {memory.memory_id for memory in self.list_memories(page_size=EXPORT_PAGE_SIZE)}
        pending = PendingImport()

        def send() -> None:
            for attempt in range(1, BATCH_TRIES + 1):
                try:
                    answer = self.run(pending.call())
                except APIError as exc:
                    pending.fail(summary, _import_failure(exc))
                    return
                pending.count(summary, answer, last_try=attempt == BATCH_TRIES)
                if not pending.items:
                    return
                time.sleep(RESEND_DELAY_S * attempt)

        for number, line in enumerate(lines, start=1):
            item = import_item(number, line, mine, summary)
            if item is not None and pending.add(number, item):
                send()
        if pending.items:
            send()
        return summary


class AsyncMemoria:
    """The asyncio client: ``Memoria``'s calls as coroutines, plus ``chat``, the frames of
    an answer as they arrive. Use ``async with``, or ``await aclose()``."""

    def __init__(
        self,
        base_url: str | None = None,
        token: str | None = None,
        *,
        timeout: float = 30.0,
        retry: RetryPolicy | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        trust_env: bool = True,
    ) -> None:
        self._settings = _Settings(base_url, token, retry)
        self._trust_env = trust_env
        self._http = httpx.AsyncClient(
            base_url=self._settings.base_url,
            timeout=timeout,
            transport=transport,
            trust_env=trust_env,
        )

    @property
    def base_url(self) -> str:
        return self._settings.base_url

    @property
    def token(self) -> str | None:
        return self._settings.token

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    async def run(self, call: Call[T]) -> T:
        attempt = 0
        while True:
            attempt += 1
            try:
                response = await self._http.request(
                    call.method,
                    call.path,
                    params=call.params,
                    json=call.json,
                    headers=self._settings.headers(call),
                )
            except httpx.TransportError as exc:
                raise self._settings.unreachable(exc) from None
            delay = self._settings.retry.wait(
                response, attempt, retry_unavailable=call.retry_unavailable
            )
            if delay is None:
                return call.result(response)
            await asyncio.sleep(delay)

    async def health(self) -> Health:
        return await self.run(calls.health())

    async def login(self, user_id: str) -> Token:
        token = await self.run(calls.login(user_id))
        self._settings.token = token.token
        return token

    async def add(
        self,
        content: Any,
        bindings: Sequence[str] | None = None,
        *,
        memory_type: MemoryType | None = None,
        content_kind: ContentKind | None = None,
        creation_datetime: datetime | None = None,
        idempotency_key: str | None = None,
    ) -> CreatedMemory:
        return await self.run(
            calls.add_memory(
                content,
                bindings,
                memory_type=memory_type,
                content_kind=content_kind,
                creation_datetime=creation_datetime,
                imported=False,
                idempotency_key=idempotency_key,
            )
        )

    async def get(self, memory_id: str) -> Memory:
        return await self.run(calls.get_memory(memory_id))

    async def update(
        self,
        memory_id: str,
        *,
        content: Any = None,
        content_kind: ContentKind | None = None,
        memory_type: MemoryType | None = None,
        bindings: Sequence[str] | None = None,
    ) -> MemoryUpdate:
        return await self.run(
            calls.update_memory(
                memory_id,
                content=content,
                content_kind=content_kind,
                memory_type=memory_type,
                bindings=bindings,
            )
        )

    async def delete(self, memory_id: str) -> DeletedMemory:
        return await self.run(calls.delete_memory(memory_id))

    async def list_page(
        self,
        *,
        memory_type: MemoryType | None = None,
        limit: int = PAGE_SIZE,
        cursor: str | None = None,
    ) -> MemoryPage:
        return await self.run(
            calls.list_memories(memory_type=memory_type, limit=limit, cursor=cursor)
        )

    async def list_memories(
        self, *, memory_type: MemoryType | None = None, page_size: int = PAGE_SIZE
    ) -> AsyncIterator[Memory]:
        cursor: str | None = None
        while True:
            page = await self.list_page(memory_type=memory_type, limit=page_size, cursor=cursor)
            for memory in page.memories:
                yield memory
            cursor = _next_cursor(page, cursor)
            if cursor is None:
                return

    async def search(
        self,
        *queries: str,
        mode: SearchMode = "semantic",
        memory_type: MemoryType | None = None,
        limit: int | None = None,
        min_relevance: float | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> list[Memory]:
        return await self.run(
            calls.search_memories(
                queries,
                mode=mode,
                memory_type=memory_type,
                limit=limit,
                min_relevance=min_relevance,
                since=since,
                until=until,
            )
        )

    async def history(self, memory_id: str) -> MemoryHistory:
        return await self.run(calls.memory_history(memory_id))

    async def threads(self, *, limit: int = 50) -> list[Thread]:
        return await self.run(calls.list_threads(limit=limit))

    async def create_thread(self, title: str | None = None) -> Thread:
        return await self.run(calls.create_thread(title))

    async def rename_thread(self, thread_id: str, title: str) -> Thread:
        return await self.run(calls.rename_thread(thread_id, title))

    async def messages(
        self, thread_id: str, *, limit: int = 100, before: str | None = None
    ) -> list[Message]:
        return await self.run(calls.thread_messages(thread_id, limit=limit, before=before))

    async def iter_messages(
        self, thread_id: str, *, page_size: int = 100
    ) -> AsyncIterator[Message]:
        before: str | None = None
        while True:
            page = await self.messages(thread_id, limit=page_size, before=before)
            for message in reversed(page):
                yield message
            if len(page) < page_size:
                return
            before = page[0].id

    async def cycle(self, cycle_id: str) -> CycleTrace:
        return await self.run(calls.cycle_trace(cycle_id))

    async def personas(self) -> PersonaList:
        return await self.run(calls.list_personas())

    async def thread_config(self, thread_id: str) -> ThreadConfig:
        return await self.run(calls.thread_config(thread_id))

    async def update_thread_config(self, thread_id: str, **changes: Any) -> ThreadConfig:
        return await self.run(calls.update_thread_config(thread_id, changes))

    def chat(
        self,
        content: str,
        *,
        thread: str = "main",
        message_id: str | None = None,
        since: str | None = None,
        cycle_id: str | None = None,
        options: ChatOptions | None = None,
    ) -> AsyncIterator[Frame]:
        """Send ``content`` to ``thread``; yield ``accepted``, then the cycle's frames
        (messages, deltas) up to its ``cycle_end``. A dropped socket is resumed by itself;
        to pick up a chat your program lost, call again with the same ``message_id``, the
        last ``event_id`` as ``since`` and the ``cycle_id``: the message is not sent twice."""
        return chat_frames(
            self.base_url,
            self._settings.chat_token(),
            content,
            thread=thread,
            message_id=message_id,
            since=since,
            cycle_id=cycle_id,
            options=options or ChatOptions(),
            trust_env=self._trust_env,
        )

    def connect(
        self,
        *,
        since: str | None = None,
        reconnect_delays: Sequence[float] = RECONNECT_DELAYS_S,
    ) -> Conversation:
        """A chat connection that stays open: ``async with memoria.connect() as
        conversation``, then ``await conversation.send(thread_id, content)`` and ``async for
        frame in conversation`` for every frame of every thread, as they come. A dropped
        socket is reopened after each of ``reconnect_delays`` in turn and resumed from the
        last ``event_id``; ``since`` resumes from an earlier one at once."""
        return Conversation(
            self.base_url,
            self._settings.chat_token(),
            since=since,
            reconnect_delays=reconnect_delays,
            trust_env=self._trust_env,
        )

    async def ask(
        self, content: str, *, thread: str = "main", options: ChatOptions | None = None
    ) -> ChatReply:
        """Send a chat message and return the whole answer, its actions and memories."""
        return await ChatReply.collect(self.chat(content, thread=thread, options=options))

    async def export(self, sink: IO[str]) -> int:
        count = 0
        async for memory in self.list_memories(page_size=EXPORT_PAGE_SIZE):
            sink.write(export_line(memory) + "\n")
            count += 1
        return count

    async def import_lines(self, lines: Iterable[str] | AsyncIterable[str]) -> ImportSummary:
        summary = ImportSummary()
        mine = {memory.memory_id async for memory in self.list_memories(page_size=EXPORT_PAGE_SIZE)}
        pending = PendingImport()

        async def send() -> None:
            for attempt in range(1, BATCH_TRIES + 1):
                try:
                    answer = await self.run(pending.call())
                except APIError as exc:
                    pending.fail(summary, _import_failure(exc))
                    return
                pending.count(summary, answer, last_try=attempt == BATCH_TRIES)
                if not pending.items:
                    return
                await asyncio.sleep(RESEND_DELAY_S * attempt)

        number = 0
        async for line in _aiter(lines):
            number += 1
            item = import_item(number, line, mine, summary)
            if item is not None and pending.add(number, item):
                await send()
        if pending.items:
            await send()
        return summary


async def _aiter(lines: Iterable[str] | AsyncIterable[str]) -> AsyncIterator[str]:
    if isinstance(lines, AsyncIterable):
        async for line in lines:
            yield line
    else:
        for line in lines:
            yield line

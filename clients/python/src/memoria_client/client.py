"""``AsyncMemoria`` (asyncio) sends the API's calls, described once in ``memoria_client.calls``,
retries them and reads the answers. ``Memoria`` is the same client for blocking code: each of
its methods is made from ``AsyncMemoria``'s, and runs it on the client's own event loop in a
background thread."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import (
    AsyncGenerator,
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Iterator,
    Sequence,
)
from datetime import datetime
from typing import IO, Any, Concatenate, Final, ParamSpec, Self, TypeVar

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
P = ParamSpec("P")

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


class AsyncMemoria:
    """The asyncio client. ``token`` defaults to ``MEMORIA_TOKEN``, ``base_url`` to
    ``MEMORIA_URL`` or the local gateway. ``trust_env=False`` ignores HTTP(S)_PROXY and the
    like (a gateway on this machine must not go through a proxy). Use ``async with``, or
    ``await aclose()``."""

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
        """Send ``call``, retrying 429/503 as the retry policy says; its answer or its error."""
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
        """Whether the gateway is ready (``Unavailable`` when its broker does not answer)."""
        return await self.run(calls.health())

    async def login(self, user_id: str) -> Token:
        """Dev login (``POST /api/token``); later calls use the token it returns."""
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
        """Save a memory. ``bindings`` (the phrases it is found by) default to a text's own
        words. The same ``idempotency_key`` again returns the first memory, ``created`` False."""
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
        """One page of memories, newest first; pass ``next_cursor`` as ``cursor``."""
        return await self.run(
            calls.list_memories(memory_type=memory_type, limit=limit, cursor=cursor)
        )

    async def list_memories(
        self, *, memory_type: MemoryType | None = None, page_size: int = PAGE_SIZE
    ) -> AsyncIterator[Memory]:
        """Every memory, newest first, fetched a page at a time as you iterate."""
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
        """Semantic (1-8 queries; most relevant first, with ``relevance_score``) or
        ``mode="chronological"`` (newest first, no query). ``since``/``until`` (aware
        datetimes; ``since`` inclusive, ``until`` exclusive) keep the memories told then."""
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
        """The latest ``limit`` (1-200) threads, most recently updated first."""
        return await self.run(calls.list_threads(limit=limit))

    async def create_thread(self, title: str | None = None) -> Thread:
        return await self.run(calls.create_thread(title))

    async def rename_thread(self, thread_id: str, title: str) -> Thread:
        return await self.run(calls.rename_thread(thread_id, title))

    async def messages(
        self, thread_id: str, *, limit: int = 100, before: str | None = None
    ) -> list[Message]:
        """One page of a thread's stored messages, oldest first."""
        return await self.run(calls.thread_messages(thread_id, limit=limit, before=before))

    async def iter_messages(
        self, thread_id: str, *, page_size: int = 100
    ) -> AsyncIterator[Message]:
        """Every stored message of the thread, newest first, paging back as you iterate."""
        before: str | None = None
        while True:
            page = await self.messages(thread_id, limit=page_size, before=before)
            for message in reversed(page):
                yield message
            if len(page) < page_size:
                return
            before = page[0].id

    async def cycle(self, cycle_id: str) -> CycleTrace:
        """Everything that happened in one of your cycles (``cycle_id`` is in its frames)."""
        return await self.run(calls.cycle_trace(cycle_id))

    async def personas(self) -> PersonaList:
        """The personas a thread can switch to, the default first."""
        return await self.run(calls.list_personas())

    async def thread_config(self, thread_id: str) -> ThreadConfig:
        """The thread's session config (``NotFound`` for a thread nothing was sent to yet)."""
        return await self.run(calls.thread_config(thread_id))

    async def update_thread_config(self, /, thread_id: str, **changes: Any) -> ThreadConfig:
        """Change the thread's session config, e.g. ``persona="coach"``; the config after."""
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
        """Write every memory as a line of ``memoria export`` (newest first); how many."""
        count = 0
        async for memory in self.list_memories(page_size=EXPORT_PAGE_SIZE):
            sink.write(export_line(memory) + "\n")
            count += 1
        return count

    async def import_lines(self, lines: Iterable[str] | AsyncIterable[str]) -> ImportSummary:
        """Create the memories of ``memoria export`` lines; safe to repeat. Bad or refused
        lines are counted and listed in ``failures``, the others still imported."""
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


# -- the blocking client, made from the asyncio one --------------------------------------------


class _Loop:
    """The event loop a blocking client's calls run on, in a daemon thread (so a client never
    closed cannot keep the program from exiting)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.name = "memoria-client"
        self._thread.start()

    def run(self, work: Awaitable[T]) -> T:
        if threading.current_thread() is self._thread:
            raise RuntimeError("a blocking Memoria call inside its own loop: use AsyncMemoria")
        return asyncio.run_coroutine_threadsafe(_awaited(work), self.loop).result()

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()


async def _awaited(work: Awaitable[T]) -> T:
    return await work


class _InThread(httpx.AsyncBaseTransport):
    """A blocking transport given to ``Memoria``, run in a worker thread."""

    def __init__(self, transport: httpx.BaseTransport) -> None:
        self._transport = transport

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return await asyncio.to_thread(self._send, request)

    def _send(self, request: httpx.Request) -> httpx.Response:
        response = self._transport.handle_request(request)
        try:
            response.read()
        finally:
            response.close()
        return httpx.Response(
            response.status_code, headers=response.headers, content=response.content
        )

    async def aclose(self) -> None:
        await asyncio.to_thread(self._transport.close)


def _blocking(
    method: Callable[Concatenate[AsyncMemoria, P], Awaitable[T]],
) -> Callable[Concatenate[Memoria, P], T]:
    def call(self: Memoria, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._loop.run(method(self._client, *args, **kwargs))

    call.__name__, call.__doc__ = method.__name__, method.__doc__
    return call


def _blocking_iter(
    method: Callable[Concatenate[AsyncMemoria, P], AsyncIterator[T]],
) -> Callable[Concatenate[Memoria, P], Iterator[T]]:
    def iterate(self: Memoria, /, *args: P.args, **kwargs: P.kwargs) -> Iterator[T]:
        items = method(self._client, *args, **kwargs)
        try:
            while True:
                try:
                    yield self._loop.run(anext(items))
                except StopAsyncIteration:
                    return
        finally:
            if isinstance(items, AsyncGenerator):
                self._loop.run(items.aclose())

    iterate.__name__, iterate.__doc__ = method.__name__, method.__doc__
    return iterate


class Memoria:
    """The blocking client: ``AsyncMemoria``'s calls, each waited for (its docs say what they
    do). The arguments are ``AsyncMemoria``'s; ``transport`` may be a blocking one. Use as a
    context manager, or call ``close()``."""

    def __init__(
        self,
        base_url: str | None = None,
        token: str | None = None,
        *,
        timeout: float = 30.0,
        retry: RetryPolicy | None = None,
        transport: httpx.BaseTransport | httpx.AsyncBaseTransport | None = None,
        trust_env: bool = True,
    ) -> None:
        if isinstance(transport, httpx.BaseTransport) and not isinstance(
            transport, httpx.AsyncBaseTransport
        ):
            transport = _InThread(transport)
        self._loop = _Loop()
        self._client = AsyncMemoria(
            base_url, token, timeout=timeout, retry=retry, transport=transport, trust_env=trust_env
        )

    @property
    def base_url(self) -> str:
        return self._client.base_url

    @property
    def token(self) -> str | None:
        return self._client.token

    def close(self) -> None:
        self._loop.run(self._client.aclose())
        self._loop.stop()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    run = _blocking(AsyncMemoria.run)
    health = _blocking(AsyncMemoria.health)
    login = _blocking(AsyncMemoria.login)
    add = _blocking(AsyncMemoria.add)
    get = _blocking(AsyncMemoria.get)
    update = _blocking(AsyncMemoria.update)
    delete = _blocking(AsyncMemoria.delete)
    list_page = _blocking(AsyncMemoria.list_page)
    list_memories = _blocking_iter(AsyncMemoria.list_memories)
    search = _blocking(AsyncMemoria.search)
    history = _blocking(AsyncMemoria.history)
    threads = _blocking(AsyncMemoria.threads)
    create_thread = _blocking(AsyncMemoria.create_thread)
    rename_thread = _blocking(AsyncMemoria.rename_thread)
    messages = _blocking(AsyncMemoria.messages)
    iter_messages = _blocking_iter(AsyncMemoria.iter_messages)
    cycle = _blocking(AsyncMemoria.cycle)
    personas = _blocking(AsyncMemoria.personas)
    thread_config = _blocking(AsyncMemoria.thread_config)
    update_thread_config = _blocking(AsyncMemoria.update_thread_config)
    ask = _blocking(AsyncMemoria.ask)
    export = _blocking(AsyncMemoria.export)
    import_lines = _blocking(AsyncMemoria.import_lines)

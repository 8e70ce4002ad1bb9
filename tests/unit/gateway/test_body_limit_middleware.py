"""The body-limit middleware on its own, driven at the ASGI level with a bare app behind it:
where exactly the limit falls, what its own 413 holds, and when it leaves the answer to the
app or gives up on the connection."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import pytest
from starlette.types import Receive, Scope, Send

from memoria_gateway.body_limit import BodyLimit, BodyTooLarge, too_large_text

LIMIT = 10
Message = MutableMapping[str, Any]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


def refusal(path: str, text: str) -> dict[str, object]:
    return {"path": path, "detail": text}


def scope(headers: list[tuple[bytes, bytes]], kind: str = "http") -> Scope:
    return {"type": kind, "path": "/somewhere", "headers": headers}


class Exchange:
    """One request through ``BodyLimit(app)``: the body's messages in, the answer's out."""

    def __init__(self, app: App, *bodies: Message) -> None:
        self.middleware = BodyLimit(app, lambda path: LIMIT, refusal)
        self.pending = list(bodies)
        self.sent: list[Message] = []

    async def receive(self) -> Message:
        return self.pending.pop(0)

    async def send(self, message: Message) -> None:
        self.sent.append(message)

    async def run(self, request: Scope) -> list[Message]:
        await self.middleware(request, self.receive, self.send)
        return self.sent


def piece(body: bytes, more: bool = False) -> Message:
    return {"type": "http.request", "body": body, "more_body": more}


async def read_all(receive: Receive) -> bytes:
    body = b""
    while True:
        message = await receive()
        body += bytes(message.get("body", b""))
        if not message.get("more_body"):
            return body


def echo(headers: list[tuple[bytes, bytes]] | None = None) -> App:
    """An app that reads the whole body and answers 200 with it."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        body = await read_all(receive)
        await send({"type": "http.response.start", "status": 200, "headers": headers or []})
        await send({"type": "http.response.body", "body": body})

    return app


def never_called() -> App:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        raise AssertionError("the app was called")

    return app


def the_413(path: str = "/somewhere") -> list[Message]:
    body = json.dumps(refusal(path, too_large_text(LIMIT))).encode()
    return [
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        },
        {"type": "http.response.body", "body": body},
    ]


async def test_a_declared_body_of_exactly_the_limit_is_read() -> None:
    exchange = Exchange(echo(), piece(b"a" * LIMIT))
    sent = await exchange.run(scope([(b"host", b"x"), (b"content-length", b"10")]))
    assert sent[0]["status"] == 200
    assert sent[1]["body"] == b"a" * LIMIT


async def test_a_declared_body_over_the_limit_is_refused_without_calling_the_app() -> None:
    request = scope([(b"host", b"x"), (b"content-length", b"11")])
    assert await Exchange(never_called(), piece(b"")).run(request) == the_413()


async def test_chunks_adding_up_to_exactly_the_limit_are_read() -> None:
    exchange = Exchange(echo(), piece(b"a" * 6, more=True), piece(b"b" * 4))
    sent = await exchange.run(scope([]))
    assert sent[0]["status"] == 200
    assert sent[0]["headers"] == []  # nothing added to an answer that refused nothing
    assert sent[1]["body"] == b"a" * 6 + b"b" * 4


async def test_a_message_without_a_body_counts_as_empty() -> None:
    exchange = Exchange(echo(), {"type": "http.request", "more_body": True}, piece(b"a" * LIMIT))
    assert (await exchange.run(scope([])))[0]["status"] == 200


async def test_chunks_passing_the_limit_get_the_middlewares_413_if_the_app_lets_it_through() -> (
    None
):
    exchange = Exchange(echo(), piece(b"a" * 6, more=True), piece(b"b" * 5))
    assert await exchange.run(scope([(b"content-length", b"not a number")])) == the_413()


async def test_an_app_that_answers_the_413_itself_keeps_its_headers_and_closes() -> None:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await read_all(receive)
        except BodyTooLarge as too_large:
            headers = [(b"x-shape", b"the route's own")]
            await send({"type": "http.response.start", "status": 413, "headers": headers})
            await send({"type": "http.response.body", "body": too_large.detail.encode()})

    exchange = Exchange(app, piece(b"a" * 11))
    sent = await exchange.run(scope([]))
    assert sent[0]["headers"] == [(b"x-shape", b"the route's own"), (b"connection", b"close")]
    assert sent[1]["body"] == too_large_text(LIMIT).encode()


async def test_too_late_for_a_413_the_connection_is_dropped() -> None:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await read_all(receive)

    exchange = Exchange(app, piece(b"a" * 11))
    with pytest.raises(BodyTooLarge):
        await exchange.run(scope([]))
    assert [message["type"] for message in exchange.sent] == ["http.response.start"]


async def test_a_websocket_passes_through_whatever_it_declares() -> None:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "websocket.accept"})

    sent = await Exchange(app).run(scope([(b"content-length", b"999")], kind="websocket"))
    assert sent == [{"type": "websocket.accept"}]

"""The HTTP clients against a scripted transport: retries on 429/503, typed errors,
pagination, and the requests each call sends."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import httpx
import pytest

from memoria_client import (
    APIError,
    AsyncMemoria,
    AuthenticationError,
    GatewayUnreachable,
    InvalidRequest,
    Memoria,
    NotFound,
    RateLimited,
    RetryPolicy,
    Unavailable,
    UnreadableAnswer,
)

FAST = RetryPolicy(attempts=3, backoff=0.0, max_wait=1.0)
Handler = Callable[[httpx.Request], httpx.Response]


def memory(n: int, **fields: Any) -> dict[str, Any]:
    return {
        "memory_id": f"mem_{n}",
        "memory_type": "preference",
        "content_kind": "text",
        "content": f"fact {n}",
        "bindings": [f"fact {n}"],
        "creation_datetime": "2025-01-02T03:04:05Z",
        "last_accessed": "2025-01-02T03:04:05Z",
        "updated_at": "2025-01-02T03:04:05Z",
        "relevance_score": None,
        **fields,
    }


class Recorder:
    """Answers from a list, one response a request, and keeps the requests."""

    def __init__(self, *responses: httpx.Response) -> None:
        self.responses = list(responses)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return self.responses.pop(0)


def waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The waits between tries, recorded instead of waited (both clients wait in asyncio:
    the blocking one runs the asyncio one)."""
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    monkeypatch.setattr("memoria_client.client.asyncio.sleep", sleep)
    return slept


def sync_client(handler: Handler, retry: RetryPolicy = FAST) -> Memoria:
    return Memoria("http://gw", "tok", retry=retry, transport=httpx.MockTransport(handler))


def async_client(handler: Handler, retry: RetryPolicy = FAST) -> AsyncMemoria:
    return AsyncMemoria("http://gw", "tok", retry=retry, transport=httpx.MockTransport(handler))


def test_429_is_retried_after_retry_after_then_succeeds(monkeypatch: pytest.MonkeyPatch) -> None:
    slept = waits(monkeypatch)
    recorder = Recorder(
        httpx.Response(429, json={"detail": "too many"}, headers={"Retry-After": "1"}),
        httpx.Response(200, json=memory(1)),
    )
    with sync_client(recorder) as client:
        assert client.get("mem_1").content == "fact 1"
    assert slept == [1.0]
    assert len(recorder.requests) == 2
    assert recorder.requests[0].headers["Authorization"] == "Bearer tok"


def test_retries_are_bounded_and_the_last_error_is_typed(monkeypatch: pytest.MonkeyPatch) -> None:
    waits(monkeypatch)
    recorder = Recorder(*[httpx.Response(503, json={"detail": "down"}) for _ in range(5)])
    with sync_client(recorder) as client, pytest.raises(Unavailable, match="down"):
        client.get("mem_1")
    assert len(recorder.requests) == FAST.attempts


def test_a_retry_after_longer_than_the_cap_is_raised_at_once() -> None:
    recorder = Recorder(
        httpx.Response(429, json={"detail": "slow down"}, headers={"Retry-After": "60"})
    )
    with sync_client(recorder) as client, pytest.raises(RateLimited) as caught:
        client.search("x")
    assert caught.value.retry_after == 60.0
    assert len(recorder.requests) == 1


def test_delete_is_not_retried_on_503() -> None:
    recorder = Recorder(httpx.Response(503, json={"detail": "not answering"}))
    with sync_client(recorder) as client, pytest.raises(Unavailable):
        client.delete("mem_1")
    assert len(recorder.requests) == 1


def test_add_sends_an_idempotency_key_so_its_retry_cannot_create_twice(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    waits(monkeypatch)
    recorder = Recorder(
        httpx.Response(503, json={"detail": "not answering"}),
        httpx.Response(200, json=memory(1, created=False)),
    )
    with sync_client(recorder) as client:
        created = client.add("fact 1", memory_type="preference")
    assert created.created is False
    first, second = recorder.requests
    assert first.headers["Idempotency-Key"] == second.headers["Idempotency-Key"]
    assert json.loads(first.content) == {
        "content": "fact 1",
        "bindings": ["fact 1"],
        "memory_type": "preference",
    }


@pytest.mark.parametrize(
    ("status", "body", "error"),
    [
        (401, {"detail": "invalid token"}, AuthenticationError),
        (404, {"detail": "memory not found"}, NotFound),
        (400, {"detail": "bad"}, InvalidRequest),
        (502, {"detail": "unexpected"}, APIError),
    ],
)
def test_refusals_become_typed_errors(
    status: int, body: dict[str, Any], error: type[APIError]
) -> None:
    client = sync_client(Recorder(httpx.Response(status, json=body)))
    with client, pytest.raises(error) as caught:
        client.get("mem_1")
    assert type(caught.value) is error
    assert caught.value.status_code == status
    assert caught.value.detail == body["detail"]


def test_422_carries_the_field_errors() -> None:
    detail = [{"loc": ["body", "bindings"], "msg": "too short", "type": "too_short"}]
    client = sync_client(Recorder(httpx.Response(422, json={"detail": detail})))
    with client, pytest.raises(InvalidRequest, match="bindings: too short") as caught:
        client.update("mem_1", content="x")
    assert caught.value.errors == detail


def test_no_gateway_is_a_clear_error_without_the_token() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    with sync_client(refuse) as client, pytest.raises(GatewayUnreachable) as caught:
        client.get("mem_1")
    assert "http://gw" in str(caught.value)
    assert "tok" not in str(caught.value).replace("gw", "")


def test_ids_stay_one_path_segment() -> None:
    recorder = Recorder(httpx.Response(404, json={"detail": "memory not found"}))
    with sync_client(recorder) as client, pytest.raises(NotFound):
        client.get("../threads")
    assert recorder.requests[0].url.raw_path == b"/api/memories/..%2Fthreads"


def pages(request: httpx.Request) -> httpx.Response:
    cursor = request.url.params.get("cursor")
    page = {None: ([1, 2], "c1"), "c1": ([3, 4], "c2"), "c2": ([5], None)}[cursor]
    return httpx.Response(
        200, json={"memories": [memory(n) for n in page[0]], "next_cursor": page[1]}
    )


def test_list_memories_follows_the_cursor_to_the_end() -> None:
    with sync_client(pages) as client:
        ids = [m.memory_id for m in client.list_memories(page_size=2, memory_type="preference")]
    assert ids == [f"mem_{n}" for n in range(1, 6)]


async def test_async_list_memories_follows_the_cursor_to_the_end() -> None:
    async with async_client(pages) as client:
        ids = [m.memory_id async for m in client.list_memories(page_size=2)]
    assert ids == [f"mem_{n}" for n in range(1, 6)]


def test_a_repeated_cursor_stops_instead_of_looping() -> None:
    def same(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"memories": [memory(1)], "next_cursor": "again"})

    with sync_client(same) as client, pytest.raises(Exception, match="same page cursor"):
        list(client.list_memories())


def test_messages_page_back_with_before() -> None:
    stored = [
        {
            "type": "message",
            "id": f"m{n}",
            "thread_id": "t1",
            "cycle_id": None,
            "chat-history": True,
            "modal": "text",
            "role": "user",
            "content": f"hi {n}",
            "created_at": "2025-01-02T03:04:05Z",
        }
        for n in range(5)
    ]

    def history(request: httpx.Request) -> httpx.Response:
        limit = int(request.url.params["limit"])
        before = request.url.params.get("before")
        end = next(i for i, m in enumerate(stored) if m["id"] == before) if before else 5
        return httpx.Response(200, json=stored[max(0, end - limit) : end])

    with sync_client(history) as client:
        ids = [m.id for m in client.iter_messages("t1", page_size=2)]
    assert ids == ["m4", "m3", "m2", "m1", "m0"]


async def test_async_search_sends_each_query_and_the_filters() -> None:
    recorder = Recorder(httpx.Response(200, json={"memories": [memory(1, relevance_score=0.9)]}))
    async with async_client(recorder) as client:
        found = await client.search("seat", "plane", memory_type="preference", limit=3)
    assert found[0].relevance_score == 0.9
    params = recorder.requests[0].url.params
    assert params.get_list("q") == ["seat", "plane"]
    assert (params["mode"], params["memory_type"], params["limit"]) == (
        "semantic",
        "preference",
        "3",
    )


async def test_a_search_sends_its_time_window_with_the_offset() -> None:
    recorder = Recorder(
        httpx.Response(200, json={"memories": []}), httpx.Response(200, json={"memories": []})
    )
    since = datetime(2026, 11, 16, tzinfo=timezone(timedelta(hours=1)))
    until = datetime(2026, 11, 23, tzinfo=UTC)
    async with async_client(recorder) as client:
        await client.search(mode="chronological", since=since, until=until)
    with sync_client(recorder) as sync:
        sync.search("tea", since=since)
    first, second = (request.url.params for request in recorder.requests)
    assert (first["since"], first["until"]) == (since.isoformat(), until.isoformat())
    assert b"%2B01%3A00" in recorder.requests[0].url.query  # "+" kept, not a space
    assert (second["since"], second.get("until")) == (since.isoformat(), None)


def test_a_naive_time_is_refused_before_anything_is_sent() -> None:
    recorder = Recorder()
    with sync_client(recorder) as client, pytest.raises(ValueError, match="until"):
        client.search("tea", until=datetime(2026, 11, 23))
    assert recorder.requests == []


async def test_async_retries_429(monkeypatch: pytest.MonkeyPatch) -> None:
    slept = waits(monkeypatch)
    recorder = Recorder(
        httpx.Response(429, json={"detail": "too many"}, headers={"Retry-After": "0"}),
        httpx.Response(200, json={"memories": []}),
    )
    async with async_client(recorder) as client:
        assert await client.search(mode="chronological") == []
    assert slept == [0.0]
    assert "q" not in recorder.requests[1].url.params


def test_login_keeps_the_token_for_later_calls() -> None:
    recorder = Recorder(
        httpx.Response(200, json={"token": "new", "user_id": "ana"}),
        httpx.Response(200, json={"threads": []}),
    )
    client = Memoria("http://gw", token=None, transport=httpx.MockTransport(recorder))
    client.login("ana")
    assert client.threads() == []
    assert "Authorization" not in recorder.requests[0].headers
    assert recorder.requests[1].headers["Authorization"] == "Bearer new"


def test_a_policy_may_report_503_at_once_and_still_wait_out_429(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    waits(monkeypatch)
    no_503 = RetryPolicy(attempts=3, backoff=0.0, unavailable=False)
    recorder = Recorder(
        httpx.Response(429, json={"detail": "slow"}, headers={"Retry-After": "0"}),
        httpx.Response(503, json={"detail": "down"}),
    )
    with sync_client(recorder, no_503) as client, pytest.raises(Unavailable):
        client.get("mem_1")
    assert len(recorder.requests) == 2  # the 429 was sent again, the 503 was not


def test_trust_env_false_keeps_a_proxy_from_the_environment_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.invalid:3128")
    monkeypatch.setenv("ALL_PROXY", "http://proxy.invalid:3128")
    with Memoria("http://gw", "tok", trust_env=False) as direct:
        assert direct._client._http._mounts == {}
    with Memoria("http://gw", "tok") as proxied:
        assert proxied._client._http._mounts  # the environment's proxy is mounted


async def test_personas_and_a_threads_config() -> None:
    config = {"user_id": "ana", "config": {"persona": "coach"}, "overrides": {}}
    recorder = Recorder(
        httpx.Response(
            200,
            json={"default": "assistant", "personas": [{"id": "coach", "name": "Coach"}]},
        ),
        httpx.Response(200, json=config),
        httpx.Response(200, json=config),
    )
    async with async_client(recorder) as client:
        listed = await client.personas()
        assert (listed.default, listed.personas[0].id) == ("assistant", "coach")
        assert (await client.thread_config("a/b")).config["persona"] == "coach"
        await client.update_thread_config("t1", persona="coach")
    read, patch = recorder.requests[1], recorder.requests[2]
    assert read.url.raw_path == b"/api/threads/a%2Fb/config"
    assert (patch.method, patch.url.path) == ("PATCH", "/api/threads/t1/config")
    assert json.loads(patch.content) == {"persona": "coach"}


def test_an_answer_out_of_format_is_a_client_error_naming_the_field() -> None:
    recorder = Recorder(
        httpx.Response(200, json={"threads": [{"thread_id": "t1"}]}),
        httpx.Response(200, text="<html>proxy error</html>"),
    )
    with sync_client(recorder) as client:
        with pytest.raises(UnreadableAnswer, match=r"GET /api/threads: .*threads\.0\.title"):
            client.threads()
        with pytest.raises(UnreadableAnswer, match="cannot read"):
            client.get("mem_1")


def test_health_sends_no_token_and_reports_a_broker_outage_at_once() -> None:
    recorder = Recorder(
        httpx.Response(200, json={"status": "ok", "connections": 2, "instance": "abc"}),
        httpx.Response(503, json={"status": "unavailable", "broker": "down"}),
    )
    with sync_client(recorder) as client:
        assert client.health().instance == "abc"
        with pytest.raises(Unavailable):
            client.health()
    assert len(recorder.requests) == 2  # the 503 was not retried
    assert "Authorization" not in recorder.requests[0].headers
    assert recorder.requests[0].url.path == "/healthz"


def test_a_blocking_transport_still_serves_the_blocking_client() -> None:
    class Blocking(httpx.BaseTransport):
        def handle_request(self, request: httpx.Request) -> httpx.Response:
            return httpx.Response(200, json=memory(1))

    with Memoria("http://gw", "tok", transport=Blocking()) as client:
        assert client.get("mem_1").content == "fact 1"


def test_the_blocking_client_is_made_from_the_async_one() -> None:
    assert Memoria.search.__doc__ == AsyncMemoria.search.__doc__
    assert Memoria.search.__doc__ and "chronological" in Memoria.search.__doc__


def test_leaving_a_listing_early_stops_its_paging() -> None:
    pages = [
        {"memories": [memory(1)], "next_cursor": "c1"},
        {"memories": [memory(2)], "next_cursor": None},
    ]
    recorder = Recorder(*[httpx.Response(200, json=page) for page in pages])
    with sync_client(recorder) as client:
        assert next(iter(client.list_memories())).memory_id == "mem_1"
    assert len(recorder.requests) == 1

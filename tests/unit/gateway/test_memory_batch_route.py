"""POST /api/memories/batch: each item saved as the single create would save it, results in
order, one bad item refused alone, and the whole body bounded."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from memoria_contracts.memory import MemoryFailure, MemorySave, MemorySaved
from memoria_gateway.memory_routes import BATCH_SAVES_IN_FLIGHT, memory_router
from memoria_gateway.memory_schemas import IDEMPOTENCY_PREFIX, MAX_BATCH_MEMORIES
from memoria_runtime.auth import TokenIssuer
from tests.unit.gateway.test_memory_routes import SECRET, TTL_S, USER, a_memory

URL = "/api/memories/batch"


class SavingMemory:
    """Saves by idempotency key (a repeated key finds its memory); a content of "down" is
    a memory service that does not answer, "refused" one it refuses as invalid."""

    def __init__(self) -> None:
        self.saved: dict[str, MemorySave] = {}
        self.in_flight = 0
        self.most_in_flight = 0

    async def save(
        self, user_id: str, request: MemorySave, **_: Any
    ) -> MemorySaved | MemoryFailure:
        assert user_id == USER
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await asyncio.sleep(0.001)
            if request.content == "down":
                raise TimeoutError
            if request.content == "refused":
                return MemoryFailure(code="invalid", error_message="refused: not storable")
            known = request.idempotency_key in self.saved
            self.saved.setdefault(request.idempotency_key, request)
            memory_id = f"mem_{len(self.saved):04d}" if not known else "mem_again"
            return MemorySaved(
                memory_id=memory_id,
                created=not known,
                memory=a_memory(memory_id, request.content),
            )
        finally:
            self.in_flight -= 1


@pytest.fixture
def memory() -> SavingMemory:
    return SavingMemory()


@pytest.fixture
def client(memory: SavingMemory) -> Iterator[TestClient]:
    issuer = TokenIssuer(SECRET, TTL_S)
    app = FastAPI()
    app.include_router(memory_router(memory, lambda: issuer))  # type: ignore[arg-type]
    with TestClient(app) as test_client:
        test_client.headers["Authorization"] = f"Bearer {issuer.issue(USER)}"
        yield test_client


def item(content: Any, **more: Any) -> dict[str, Any]:
    return {"content": content, "bindings": [str(content)[:50]], **more}


def test_results_come_in_the_order_sent(client: TestClient, memory: SavingMemory) -> None:
    body = {"memories": [item(f"fact {n}", idempotency_key=f"k{n}") for n in range(40)]}
    response = client.post(URL, json=body)
    assert response.status_code == 200
    answer = response.json()
    assert [r["status"] for r in answer["results"]] == [201] * 40
    assert [r["memory"]["content"] for r in answer["results"]] == [f"fact {n}" for n in range(40)]
    assert (answer["created"], answer["present"], answer["failed"]) == (40, 0, 0)
    assert set(memory.saved) == {f"{IDEMPOTENCY_PREFIX}k{n}" for n in range(40)}
    assert 1 < memory.most_in_flight <= BATCH_SAVES_IN_FLIGHT


def test_saves_as_the_single_create_does(client: TestClient, memory: SavingMemory) -> None:
    body = {
        "memories": [
            item("Imported fact", imported=True, memory_type="preference"),
            {"content": {"a": 1}, "bindings": ["a json memory"]},
        ]
    }
    assert client.post(URL, json=body).status_code == 200
    data, text = sorted(memory.saved.values(), key=lambda save: save.content_kind)
    assert (data.content_kind, data.source) == ("json", "api")
    assert (text.content_kind, text.source, text.memory_type) == ("text", "import", "preference")
    # Without a key, a random one: the same body twice creates twice.
    assert client.post(URL, json=body).json()["created"] == 2


def test_a_retry_with_the_same_keys_creates_nothing_twice(
    client: TestClient, memory: SavingMemory
) -> None:
    body = {"memories": [item("a", idempotency_key="same"), item("b", idempotency_key="other")]}
    client.post(URL, json=body)
    again = client.post(URL, json=body).json()
    assert [r["status"] for r in again["results"]] == [200, 200]
    assert (again["created"], again["present"]) == (0, 2)
    assert len(memory.saved) == 2
    # The single route with the same key finds the same memory.
    single = client.post("/api/memories", json=item("a"), headers={"Idempotency-Key": "same"})
    assert single.status_code == 200


def test_a_bad_item_is_refused_alone(client: TestClient, memory: SavingMemory) -> None:
    body = {
        "memories": [
            item("kept 1"),
            {"content": {"json": "without bindings"}},
            "not an object",
            item("x", user_id="mallory"),
            item("refused"),
            item("down"),
            {"content": "x" * 9000, "bindings": ["long"]},
            item("kept 2"),
        ]
    }
    response = client.post(URL, json=body)
    assert response.status_code == 200
    results = response.json()["results"]
    assert [r["status"] for r in results] == [201, 422, 422, 422, 422, 503, 422, 201]
    assert results[1]["detail"][0]["loc"] == ["body", "memories", 1]
    assert results[1]["detail"][0]["msg"].startswith("A JSON memory needs bindings")
    assert results[2]["detail"][0]["loc"] == ["body", "memories", 2]
    assert results[3]["detail"][0]["loc"] == ["body", "memories", 3, "user_id"]
    assert results[4]["detail"][0]["msg"] == "Refused: not storable."
    assert results[5]["detail"] == "the memory service is not answering"
    assert results[6]["detail"][0]["loc"][:3] == ["body", "memories", 6]
    assert "longer than" in results[6]["detail"][0]["msg"]
    assert all(r["memory"] is None for r in results[1:7])
    assert sorted(save.content for save in memory.saved.values()) == ["kept 1", "kept 2"]
    assert response.json()["failed"] == 6
    assert "x" * 100 not in response.text  # a refused item's content is not echoed


@pytest.mark.parametrize(
    "body",
    [
        {"memories": []},
        {"memories": [item("x")] * (MAX_BATCH_MEMORIES + 1)},
        {"memories": "not a list"},
        {},
        [item("x")],
        {"memories": [item("x")], "user_id": "mallory"},
    ],
)
def test_a_body_that_is_no_batch_is_a_422(
    client: TestClient, memory: SavingMemory, body: Any
) -> None:
    assert client.post(URL, json=body).status_code == 422
    assert memory.saved == {}


def test_openapi_describes_the_items(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    operation = spec["paths"][URL]["post"]
    schema = operation["requestBody"]["content"]["application/json"]["schema"]
    body = spec["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    items = body["properties"]["memories"]
    assert items["maxItems"] == MAX_BATCH_MEMORIES
    # A memory, or anything else: a bad item is refused in its own result, not the request.
    item_schema, anything = items["items"]["anyOf"]
    assert {"content", "bindings", "idempotency_key"} <= set(item_schema["properties"])
    assert anything == {}
    assert "200" in operation["responses"]


async def test_batches_served_at_once_share_the_saves_in_flight(memory: SavingMemory) -> None:
    issuer = TokenIssuer(SECRET, TTL_S)
    app = FastAPI()
    app.include_router(memory_router(memory, lambda: issuer))  # type: ignore[arg-type]
    headers = {"Authorization": f"Bearer {issuer.issue(USER)}"}
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(
        transport=transport, base_url="http://gw", headers=headers
    ) as http:
        bodies = [{"memories": [item(f"{b}-{n}") for n in range(40)]} for b in range(3)]
        answers = await asyncio.gather(*(http.post(URL, json=body) for body in bodies))
    assert [answer.json()["created"] for answer in answers] == [40, 40, 40]
    assert memory.most_in_flight == BATCH_SAVES_IN_FLIGHT

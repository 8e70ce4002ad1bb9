"""POST /api/memories/batch on the real stack: every good item is saved and searchable, a bad
one refused alone, a retry with the same keys creates nothing, and the items are stored as
single creates store them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from stack import Stack, running_stack

pytestmark = pytest.mark.integration

USER = "bulk-importer"
TOPICS = ["green tea", "cycling to work", "a cat named Miso", "learning Portuguese", "jazz"]


@pytest.fixture(scope="module")
def stack(
    valkey_server: Any, milvus_server: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    redis_url = f"redis://127.0.0.1:{valkey_server.port}/8"
    data_dir: Path = tmp_path_factory.mktemp("batch-stack")
    with running_stack(redis_url, milvus_server.uri, data_dir, {"rules": []}) as running:
        yield running


@pytest.fixture
def api(stack: Stack) -> Iterator[httpx.Client]:
    headers = {"Authorization": f"Bearer {stack.token(USER)}"}
    with httpx.Client(base_url=stack.base_url, headers=headers, timeout=60) as client:
        yield client


def batch(count: int) -> list[dict[str, Any]]:
    return [
        {
            "content": f"I like {TOPICS[n % len(TOPICS)]} (note {n})",
            "bindings": [f"I like {TOPICS[n % len(TOPICS)]}", f"note {n}"],
            "idempotency_key": f"bulk-{n}",
            "creation_datetime": "2024-05-06T07:08:09Z",
            "imported": True,
        }
        for n in range(count)
    ]


def test_a_batch_is_saved_in_order_searchable_and_safe_to_repeat(api: httpx.Client) -> None:
    items = batch(60)
    bad = {"content": "an empty list of bindings", "bindings": []}
    response = api.post("/api/memories/batch", json={"memories": [*items[:30], bad, *items[30:]]})
    assert response.status_code == 200, response.text
    answer = response.json()
    statuses = [result["status"] for result in answer["results"]]
    assert statuses == [201] * 30 + [422] + [201] * 30
    assert answer["results"][30]["detail"][0]["loc"] == ["body", "memories", 30, "bindings"]
    saved = [r["memory"] for r in answer["results"] if r["memory"]]
    assert [m["content"] for m in saved] == [item["content"] for item in items]
    assert all(m["creation_datetime"].startswith("2024-05-06T07:08:09") for m in saved)

    listed = api.get("/api/memories", params={"limit": 100}).json()["memories"]
    assert {m["memory_id"] for m in listed} == {m["memory_id"] for m in saved}
    history = api.get(f"/api/memories/{saved[0]['memory_id']}/history").json()
    assert history["changes"][0]["source"] == "import"

    # Every memory has its vectors: a search by a binding finds it.
    found = api.get("/api/memories/search", params={"q": "note 47", "min_relevance": 0})
    assert found.status_code == 200
    assert saved[47]["memory_id"] in [m["memory_id"] for m in found.json()["memories"][:5]]

    again = api.post("/api/memories/batch", json={"memories": items}).json()
    assert [result["status"] for result in again["results"]] == [200] * 60
    assert [r["memory"]["memory_id"] for r in again["results"]] == [m["memory_id"] for m in saved]
    # The single route with one of the keys finds the same memory too.
    body = {field: value for field, value in items[0].items() if field != "idempotency_key"}
    single = api.post("/api/memories", json=body, headers={"Idempotency-Key": "bulk-0"})
    assert single.status_code == 200
    assert single.json()["memory_id"] == saved[0]["memory_id"]
    assert len(api.get("/api/memories", params={"limit": 100}).json()["memories"]) == 60


def test_a_body_that_is_no_batch_saves_nothing(stack: Stack) -> None:
    headers = {"Authorization": f"Bearer {stack.token('nobody-saved')}"}
    with httpx.Client(base_url=stack.base_url, headers=headers, timeout=30) as client:
        too_many = {"memories": batch(257)}
        assert client.post("/api/memories/batch", json=too_many).status_code == 422
        assert client.post("/api/memories/batch", content=b"{not json").status_code == 422
        assert client.get("/api/memories").json()["memories"] == []

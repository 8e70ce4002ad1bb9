"""Export/import helpers: the same lines and keys as ``memoria export``/``import``."""

from __future__ import annotations

import io
import json
from typing import Any

import httpx
import pytest

from memoria_client import AsyncMemoria, Memoria
from memoria_client import client as client_module
from memoria_client.transfer import IMPORT_BATCH
from tests.unit.client.test_http import memory


def test_import_counts_created_present_and_failed_lines() -> None:
    batches: list[list[dict[str, Any]]] = []

    def gateway(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            return httpx.Response(200, json={"memories": [memory(1)], "next_cursor": None})
        assert request.url.path == "/api/memories/batch"
        items = json.loads(request.content)["memories"]
        batches.append(items)
        results: list[dict[str, Any]] = []
        for item in items:
            if item["content"] == "refused":
                detail = [{"loc": ["body", "memories", 0, "content"], "msg": "no"}]
                results.append({"status": 422, "memory": None, "detail": detail})
                continue
            status = 200 if item["idempotency_key"] == "import:mem_2" else 201
            results.append({"status": status, "memory": memory(9, created=status == 201)})
        return httpx.Response(
            200, json={"results": results, "created": 0, "present": 0, "failed": 0}
        )

    lines = [
        json.dumps(memory(1)),  # already mine: not sent
        json.dumps(memory(2)),  # imported before: present
        "",
        "not json",
        json.dumps({"content": "new fact"}),
        json.dumps({"content": "refused"}),
    ]
    with Memoria("http://gw", "tok", transport=httpx.MockTransport(gateway)) as client:
        summary = client.import_lines(lines)
    assert (summary.created, summary.present, summary.failed) == (1, 2, 2)
    assert [number for number, _ in summary.failures] == [4, 6]
    assert summary.failures[1][1] == "refused (422): content: no"
    (sent,) = batches  # one request for the whole file
    assert sent[0]["idempotency_key"] == "import:mem_2"
    assert all(item["imported"] is True for item in sent)


def test_import_sends_batches_of_bounded_size_in_line_order() -> None:
    batches: list[list[str]] = []

    def gateway(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            return httpx.Response(200, json={"memories": [], "next_cursor": None})
        items = json.loads(request.content)["memories"]
        batches.append([item["content"] for item in items])
        results = [{"status": 201, "memory": memory(n, created=True)} for n in range(len(items))]
        return httpx.Response(
            200, json={"results": results, "created": 0, "present": 0, "failed": 0}
        )

    lines = [json.dumps({"content": f"fact {n}"}) for n in range(IMPORT_BATCH * 2 + 3)]
    with Memoria("http://gw", "tok", transport=httpx.MockTransport(gateway)) as client:
        summary = client.import_lines(lines)
    assert summary.created == len(lines)
    assert [len(batch) for batch in batches] == [IMPORT_BATCH, IMPORT_BATCH, 3]
    assert [content for batch in batches for content in batch] == [
        f"fact {n}" for n in range(len(lines))
    ]


async def test_a_refused_batch_fails_each_of_its_lines() -> None:
    def gateway(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            return httpx.Response(200, json={"memories": [], "next_cursor": None})
        return httpx.Response(422, json={"detail": [{"loc": ["body"], "msg": "too big"}]})

    lines = ["", json.dumps({"content": "a"}), json.dumps({"content": "b"})]
    async with AsyncMemoria("http://gw", "tok", transport=httpx.MockTransport(gateway)) as client:
        summary = await client.import_lines(lines)
    assert summary.failed == 2
    assert [number for number, _ in summary.failures] == [2, 3]
    assert summary.failures[0][1].startswith("refused (422)")


def test_export_writes_every_page() -> None:
    def gateway(request: httpx.Request) -> httpx.Response:
        if request.url.params.get("cursor") is None:
            return httpx.Response(200, json={"memories": [memory(1)], "next_cursor": "c"})
        return httpx.Response(200, json={"memories": [memory(2)], "next_cursor": None})

    sink = io.StringIO()
    with Memoria("http://gw", "tok", transport=httpx.MockTransport(gateway)) as client:
        assert client.export(sink) == 2
    assert [json.loads(line)["memory_id"] for line in sink.getvalue().splitlines()] == [
        "mem_1",
        "mem_2",
    ]


def test_lines_the_memory_service_could_not_take_are_sent_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(client_module, "RESEND_DELAY_S", 0.0)
    sent: list[list[str]] = []

    def gateway(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            return httpx.Response(200, json={"memories": [], "next_cursor": None})
        items = json.loads(request.content)["memories"]
        sent.append([item["content"] for item in items])
        results = [
            {"status": 503, "memory": None, "detail": "the memory service is not answering"}
            if item["content"] == "busy" or (item["content"] == "late" and len(sent) == 1)
            else {"status": 201, "memory": memory(n, created=True)}
            for n, item in enumerate(items)
        ]
        return httpx.Response(
            200, json={"results": results, "created": 0, "present": 0, "failed": 0}
        )

    lines = [json.dumps({"content": c}) for c in ("a", "late", "busy", "b")]
    with Memoria("http://gw", "tok", transport=httpx.MockTransport(gateway)) as client:
        summary = client.import_lines(lines)
    # "late" got in on the second try; "busy" never did, and only it is reported.
    assert sent == [["a", "late", "busy", "b"], ["late", "busy"], ["busy"]]
    assert (summary.created, summary.failed) == (3, 1)
    assert summary.failures == [(3, "refused (503): the memory service is not answering")]

"""Export/import helpers: the same lines and keys as ``memoria export``/``import``."""

from __future__ import annotations

import io
import json
from typing import Any

import httpx

from memoria_client import Memoria
from tests.unit.client.test_http import memory


def test_import_counts_created_present_and_failed_lines() -> None:
    sent: list[dict[str, Any]] = []

    def gateway(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            return httpx.Response(200, json={"memories": [memory(1)], "next_cursor": None})
        body = json.loads(request.content)
        sent.append({"key": request.headers["Idempotency-Key"], **body})
        if body["content"] == "refused":
            return httpx.Response(422, json={"detail": [{"loc": ["body"], "msg": "no"}]})
        status = 200 if request.headers["Idempotency-Key"] == "import:mem_2" else 201
        return httpx.Response(status, json=memory(9, created=status == 201))

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
    assert sent[0]["key"] == "import:mem_2"
    assert all(s["imported"] is True for s in sent)


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

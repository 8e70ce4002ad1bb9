"""Refusals a person can act on: every 422 says what to change in one sentence naming the
field ("Content is empty.", never "bindings: Field required" or "Value error, …"), echoes at
most a short excerpt of what was sent, and the edge refuses what the stores could not keep
(times outside their range, numbers posing as times, control characters in any text) before
anything reaches the memory service."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from memoria_gateway import validation_errors
from memoria_gateway.error_words import EXCERPT_CHARS, excerpt, field_name, sentence
from memoria_gateway.memory_routes import memory_router
from memoria_runtime.auth import TokenIssuer
from tests.unit.gateway.test_memory_routes import SECRET, TTL_S, USER, ScriptedMemory


@pytest.fixture
def memory() -> ScriptedMemory:
    return ScriptedMemory()


@pytest.fixture
def client(memory: ScriptedMemory) -> Iterator[TestClient]:
    issuer = TokenIssuer(SECRET, TTL_S)
    app = FastAPI()
    validation_errors.install(app)
    app.include_router(memory_router(memory, lambda: issuer))
    with TestClient(app) as test_client:
        test_client.headers["Authorization"] = f"Bearer {issuer.issue(USER)}"
        yield test_client


def messages(response: Any) -> list[str]:
    assert response.status_code == 422, response.text
    return [error["msg"] for error in response.json()["detail"]]


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ({"content": ""}, "Content is empty."),
        ({"content": "   "}, "Content is empty."),
        ({"content": None}, "Content is empty."),
        ({"content": "", "bindings": ["x"]}, "Content is empty."),
        ({"bindings": ["x"]}, "Content is required."),
        ({"content": "x", "bindings": []}, "Bindings must have at least 1 item."),
        ({"content": "x", "bindings": ["ok", " "]}, "Binding 2 is empty."),
        ({"content": "x", "bindings": ["b" * 301]}, "Binding 1 is longer than 300 characters."),
        ({"content": "x", "user_id": "bob"}, "'user_id' is not a field this request takes."),
        ({"content": "x" * 8001}, "Content is longer than 8000 characters."),
        (
            {"content": "x", "memory_type": "gossip"},
            "The memory type must be 'user_profile', 'preference', 'goal', 'constraint' or "
            "'critical_info'.",
        ),
        (
            {"content": {"a": 1}},
            "A JSON memory needs bindings: the short phrases it is to be found by.",
        ),
    ],
)
def test_a_refused_memory_is_told_in_the_users_words(
    client: TestClient, memory: ScriptedMemory, body: dict[str, Any], said: str
) -> None:
    assert said in messages(client.post("/api/memories", json=body))
    assert memory.calls == []


@pytest.mark.parametrize(
    ("when", "said"),
    [
        ("0.5", "must be a date and time in ISO 8601 with its UTC offset"),
        (1700000000, "must be a date and time in ISO 8601 with its UTC offset"),
        ("2024-05-06T07:08:09", "must be a date and time in ISO 8601 with its UTC offset"),
        ("0001-01-01T00:30:00+01:00", "must fall between 0001-01-01T00:00:00Z and 9999-12-31"),
        ("9999-12-31T23:00:00-02:00", "must fall between 0001-01-01T00:00:00Z and 9999-12-31"),
        ("10000-01-01T00:00:00Z", "must be a date and time in ISO 8601"),
    ],
)
def test_a_creation_time_the_stores_cannot_keep_is_refused_with_the_reason(
    client: TestClient, memory: ScriptedMemory, when: Any, said: str
) -> None:
    body = {"content": "x", "creation_datetime": when}
    (message,) = messages(client.post("/api/memories", json=body))
    assert message.startswith("The creation time ") and said in message, message
    assert memory.calls == []


@pytest.mark.parametrize("bound", ["since", "until"])
@pytest.mark.parametrize("value", ["0.5", "1700000000", "0001-01-01T00:00:00+01:00"])
def test_since_and_until_take_iso_8601_times_only(
    client: TestClient, memory: ScriptedMemory, bound: str, value: str
) -> None:
    (message,) = messages(client.get("/api/memories", params={bound: value}))
    assert message.startswith(f"{bound} must "), message
    assert memory.calls == []


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"content": "my pin is \x001234"}, "Content"),
        ({"content": "bell\x07"}, "Content"),
        ({"content": "escape \x1b[2J cleared"}, "Content"),
        ({"content": "lone \r return"}, "Content"),
        ({"content": {"note": "nul \x00 inside"}, "bindings": ["x"]}, "Content"),
        ({"content": "x", "bindings": ["key\x00"]}, "Binding 1"),
    ],
)
def test_control_characters_are_refused_in_every_text_field(
    client: TestClient, memory: ScriptedMemory, body: dict[str, Any], field: str
) -> None:
    (message,) = messages(client.post("/api/memories", json=body))
    assert message.startswith(f"{field} holds the control character U+00"), message
    assert "tab and newline" in message
    assert memory.calls == []


@pytest.mark.parametrize("text", ["tab\tand\nnewline", "windows\r\nnewline"])
def test_tab_and_newlines_are_text(client: TestClient, memory: ScriptedMemory, text: str) -> None:
    memory.script("save", RuntimeError("stop here"))  # reached the memory service: accepted
    with pytest.raises(RuntimeError):
        client.post("/api/memories", json={"content": text})
    assert memory.calls[0].request.content == text
    assert memory.calls[0].request.bindings == [text.strip()]


def test_a_refusal_echoes_no_more_than_an_excerpt(client: TestClient) -> None:
    huge = "x" * 100_000
    response = client.post("/api/memories", json={"content": "x", "bindings": [huge]})
    assert response.status_code == 422
    assert len(response.content) < 1000
    (error,) = response.json()["detail"]
    assert len(error["input"]) == EXCERPT_CHARS and error["input"].endswith("…")
    whole_body = client.post("/api/memories", json={"content": "y", "bogus": [huge, huge]})
    assert len(whole_body.content) < 1000


def test_a_body_that_is_not_utf8_is_a_422_like_any_unreadable_json(client: TestClient) -> None:
    response = client.post(
        "/api/memories",
        content=b'{"content": "\xff\xfe"}',
        headers={"content-type": "application/json"},
    )
    assert messages(response) == ["The body is not valid JSON (it is not UTF-8 text)."]
    broken = client.post(
        "/api/memories", content=b'{"content": ', headers={"content-type": "application/json"}
    )
    (message,) = messages(broken)
    assert message.startswith("The body is not valid JSON")


# -- the sentences themselves ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("loc", "name"),
    [
        (("body", "content"), "Content"),
        (("body", "bindings", 2), "Binding 3"),
        (("body", "memories", 4, "memory_type"), "The memory type"),
        (("body", "memories", 0), "Memory 1"),
        (("query", "q", 1), "Q 2"),
        (("body",), "The request"),
        ((), "The request"),
    ],
)
def test_fields_are_named_as_people_read_them(loc: tuple[Any, ...], name: str) -> None:
    assert field_name(loc) == name


def test_a_validators_own_message_loses_its_prefix_and_ends_a_sentence() -> None:
    error = {"type": "value_error", "loc": ("body",), "msg": "Value error, since is late"}
    assert sentence(error) == "Since is late."


def test_excerpts_are_short_scalars_only() -> None:
    assert excerpt("short") == "short"
    assert excerpt("a\ud800b") == "a?b"
    assert excerpt(3) == 3 and excerpt(True) is True and excerpt(None) is None
    assert excerpt(float("nan")) == "nan"
    assert excerpt(10**200) == str(10**200)[: EXCERPT_CHARS - 1] + "…"
    assert excerpt({"a": 1}) is None and excerpt([1, 2]) is None

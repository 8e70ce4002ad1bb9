"""Session config end to end: the four services as processes, a real broker, HTTP and
a WebSocket. A thread's config changes what its next cycle does — proactive retrieval shows
memories before the first decision and gives them to the model, the system prompt and chat
model reach the model — and nobody else can read or change it.

The scripted model writes every prompt it is given to a file (``prompt_log``): that is how
the test sees what the decision was asked."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from stack import Stack, running_stack
from ws_client import Frame, chat

pytestmark = pytest.mark.integration

ANSWER = "Arr, noted."
PIRATE = "Always answer like a pirate."
MEMORIES = (
    ("I am allergic to peanuts", ["food allergy", "peanut allergy"]),
    ("My favourite colour is green", ["favourite colour"]),
    ("I live in Lisbon", ["home city"]),
)


@pytest.fixture(scope="module")
def prompt_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("session-prompts") / "prompts.jsonl"


@pytest.fixture(scope="module")
def stack(
    valkey_server: Any,
    milvus_server: Any,
    tmp_path_factory: pytest.TempPathFactory,
    prompt_log: Path,
) -> Iterator[Stack]:
    redis_url = f"redis://127.0.0.1:{valkey_server.port}/9"
    data_dir: Path = tmp_path_factory.mktemp("session-stack")
    script = {
        "rules": [{"match": "", "decide": ["Finalize"], "chat": {"Finalize": ANSWER}}],
        "prompt_log": str(prompt_log),
    }
    # Every memory above the session's bar is recalled, so the session's memory_limit is what
    # caps the cards (the cut relative to the best match has tests of its own).
    with running_stack(
        redis_url, milvus_server.uri, data_dir, script, memory_relative_relevance="0"
    ) as running:
        yield running


class User:
    def __init__(self, stack: Stack, http: httpx.Client) -> None:
        self.stack = stack
        self.id = f"u{uuid.uuid4().hex[:10]}"
        self.http = http
        self.headers = {"Authorization": f"Bearer {stack.token(self.id)}"}

    def new_thread(self) -> str:
        response = self.http.post("/api/threads", json={}, headers=self.headers)
        assert response.status_code == 201, response.text
        return str(response.json()["thread_id"])

    def config(self, thread_id: str) -> httpx.Response:
        return self.http.get(f"/api/threads/{thread_id}/config", headers=self.headers)

    def patch(self, thread_id: str, body: dict[str, Any]) -> httpx.Response:
        return self.http.patch(f"/api/threads/{thread_id}/config", json=body, headers=self.headers)

    def remember(self, content: str, bindings: list[str]) -> None:
        response = self.http.post(
            "/api/memories",
            json={"content": content, "bindings": bindings},
            headers=self.headers,
        )
        assert response.status_code == 201, response.text


@pytest.fixture
def http(stack: Stack) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=stack.base_url, timeout=30) as client:
        yield client


def prompts_of(log: Path, text: str) -> list[dict[str, Any]]:
    """The prompts of the cycle whose user message is ``text`` (unique per test)."""
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    return [e for e in entries if any(text in content for _, content in e["messages"])]


def memory_frames(frames: list[Frame]) -> list[Frame]:
    return [f for f in frames if f["type"] == "message" and f["modal"] == "memory"]


async def test_proactive_retrieval_shows_memories_before_the_first_decision(
    stack: Stack, http: httpx.Client, prompt_log: Path
) -> None:
    ana = User(stack, http)
    for content, bindings in MEMORIES:
        ana.remember(content, bindings)
    thread = ana.new_thread()
    patched = ana.patch(
        thread,
        {
            "proactive_retrieval": True,
            "memory_limit": 2,
            "memory_min_relevance": 0,
            "system_prompt": PIRATE,
            "chat_model": "pirate-model-1",
        },
    )
    assert patched.status_code == 200, patched.text
    assert patched.json()["config"]["memory_limit"] == 2

    question = f"what should I avoid eating {uuid.uuid4().hex[:6]}"
    async with chat(stack.ws_url(ana.id)) as client:
        # The socket reads the same config.
        await client.connection.send(json.dumps({"type": "session_config", "thread_id": thread}))
        read = await client.wait_for(lambda f: f["type"] == "session_config")
        assert read["config"] == patched.json()["config"]
        assert read["user_id"] == ana.id
        accepted = await client.send(thread, question)
        frames = await client.cycle(accepted["id"], timeout=60)

    cards = memory_frames(frames)
    assert len(cards) == 2  # memory_limit
    assert all(card["chat-history"] and card["role"] == "system" for card in cards)
    assert [(card["card"]["kind"], card["card"]["match"]) for card in cards] == [
        ("found", "best"),
        ("found", "related"),
    ]
    ids = [f["id"] for f in frames if f["type"] == "message"]
    first_decision = next(i for i, f in enumerate(ids) if f.endswith(".1.status"))
    assert all(ids.index(card["id"]) < first_decision for card in cards)
    assert ids[0] == accepted["id"]  # the user's message still comes first
    end = frames[-1]
    assert end["type"] == "cycle_end" and end["actions"] == ["Finalize"]

    prompts = prompts_of(prompt_log, question)
    decision = next(p for p in prompts if p["task"] == "decide")
    asked = "\n".join(content for _, content in decision["messages"])
    for card in cards:
        assert card["content"]["content"] in asked
    assert "[memory found]" in asked
    assert PIRATE in decision["system"]
    finalize = next(p for p in prompts if p["task"] == "Finalize")
    assert finalize["model"] == "pirate-model-1"
    # The persona's identity first, then the thread's system prompt.
    identity = "You are Memoria, an assistant with long-term memory."
    assert finalize["system"].startswith(f"{identity}\n\n{PIRATE}")


async def test_without_proactive_retrieval_no_memory_is_shown_first(
    stack: Stack, http: httpx.Client, prompt_log: Path
) -> None:
    ana = User(stack, http)
    ana.remember(*MEMORIES[0])
    thread = ana.new_thread()
    assert ana.config(thread).json()["config"]["proactive_retrieval"] is False
    question = f"what should I avoid eating {uuid.uuid4().hex[:6]}"
    async with chat(stack.ws_url(ana.id)) as client:
        accepted = await client.send(thread, question)
        frames = await client.cycle(accepted["id"], timeout=60)
    assert memory_frames(frames) == []
    decision = next(p for p in prompts_of(prompt_log, question) if p["task"] == "decide")
    assert "[memory found]" not in "\n".join(content for _, content in decision["messages"])


async def test_another_user_can_neither_read_nor_change_a_config(
    stack: Stack, http: httpx.Client
) -> None:
    ana, bob = User(stack, http), User(stack, http)
    thread = ana.new_thread()
    assert ana.patch(thread, {"memory_limit": 4}).status_code == 200
    assert bob.config(thread).status_code == 404
    refused = bob.patch(thread, {"memory_limit": 1, "proactive_retrieval": True})
    assert refused.status_code == 404
    assert refused.json() == {"detail": "thread not found"}
    async with chat(stack.ws_url(bob.id)) as client:
        reply = await client.send_raw(
            json.dumps(
                {"type": "session_config", "thread_id": thread, "config": {"memory_limit": 1}}
            )
        )
    assert reply["type"] == "error" and reply["code"] == "not_found"
    config = ana.config(thread).json()
    assert config["config"]["memory_limit"] == 4
    assert config["overrides"]["proactive_retrieval"] is None
    invalid = ana.patch(thread, {"memory_limit": 0})
    assert invalid.status_code == 422
    assert invalid.json()["detail"][0]["loc"][-1] == "memory_limit"


def prompts_asking(log: Path, text: str) -> dict[str, dict[str, Any]]:
    """The decision's and Finalize's prompts of the cycle whose user message is ``text``: the
    first of each task whose latest turn has it (later cycles have it in their history,
    merged into their latest user turn when no assistant turn stands between)."""
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    found: dict[str, dict[str, Any]] = {}
    for entry in entries:
        if entry["messages"] and text in entry["messages"][-1][1]:
            found.setdefault(entry["task"], entry)
    return found


async def test_a_persona_switch_resets_the_next_prompt_only(
    stack: Stack, http: httpx.Client, prompt_log: Path
) -> None:
    """Personas end to end: switch over the socket; the cycle after it gets the hard reset worded
    for each model (decision: the scripted model, an unknown id, so the default family;
    Finalize: the thread's chat model, a Claude, so the anthropic family); the cycle after
    that only the new identity."""
    ana = User(stack, http)
    thread = ana.new_thread()
    tag = uuid.uuid4().hex[:6]
    before, during, after = (f"{word} {tag}" for word in ("hello", "who are you", "thanks"))
    async with chat(stack.ws_url(ana.id)) as client:
        await client.cycle((await client.send(thread, before))["id"], timeout=60)
        await client.connection.send(
            json.dumps(
                {
                    "type": "session_config",
                    "thread_id": thread,
                    "config": {"persona": "tutor", "chat_model": "claude-sonnet-4-5"},
                }
            )
        )
        switched = await client.wait_for(lambda f: f["type"] == "session_config")
        assert switched["config"]["persona"] == "tutor"
        [entry] = switched["agentHistory"]
        assert (entry["previous"], entry["persona"], entry["by"]) == ("memoria", "tutor", ana.id)
        # A fast path asks no model: it does not use up the reset.
        listed = await client.cycle((await client.send(thread, "list all my memories"))["id"])
        assert listed[-1]["type"] == "cycle_end" and listed[-1]["actions"] == ["ListMemories"]
        await client.cycle((await client.send(thread, during))["id"], timeout=60)
        await client.cycle((await client.send(thread, after))["id"], timeout=60)

    first = prompts_asking(prompt_log, before)
    assert "You are Memoria, an assistant with long-term memory." in first["decide"]["system"]
    assert "NEW PERSONA" not in first["decide"]["system"]

    reset = prompts_asking(prompt_log, during)
    decide, finalize = reset["decide"], reset["Finalize"]
    assert decide["system"].startswith(
        "IMPORTANT - NEW PERSONA: You are now Ada the Tutor, no longer Memoria."
    )
    assert "Persona switch" not in decide["messages"][-1][1]  # the ask wants an action name
    assert finalize["model"] == "claude-sonnet-4-5"
    assert finalize["system"].startswith("<system_reset>")
    assert '<new_identity name="Ada the Tutor">' in finalize["system"]

    later = prompts_asking(prompt_log, after)
    assert later["decide"]["system"].startswith("You are Ada, a patient tutor.")
    assert "NEW PERSONA" not in later["decide"]["system"]
    assert later["Finalize"]["system"].startswith('<identity name="Ada the Tutor">')
    assert "<system_reset>" not in later["Finalize"]["system"]

    history = ana.config(thread).json()["agentHistory"]
    assert [e["persona"] for e in history] == ["tutor"]

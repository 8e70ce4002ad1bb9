"""The thought cycle end to end: four services as processes, a real broker, a WebSocket."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from redis.asyncio import Redis
from scraped_metrics import metrics_url, scrape, total
from stack import Stack, free_port, running_stack
from ws_client import Frame, chat

pytestmark = pytest.mark.integration

SCRIPT: dict[str, Any] = {
    "rules": [
        {
            "match": "^ask me",
            "decide": ["Question"],
            "chat": {"Question": "Which city do you mean?"},
        },
        {"match": "^confused", "decide": [["Bogus", "Finalize"]], "chat": {"Finalize": "Sorted."}},
        {"match": "^hopeless", "decide": ["Nonsense"], "chat": {"Finalize": "Fell back."}},
        {"match": "^ponder", "decide": ["Ponder"]},
        {"match": "^r6 ", "decide": ["Ponder", "Finalize"], "chat": {"Finalize": "Pondered."}},
        {"match": "^slow", "decide": ["Slow", "Finalize"], "chat": {"Finalize": "Slow one done."}},
        {"match": "^stall", "decide": ["Stall"]},
        {
            "match": "^explode",
            "decide": ["Explode", "Finalize"],
            "chat": {"Finalize": "Recovered."},
        },
        {"match": "", "decide": ["Finalize"], "chat": {"Finalize": "Hello there, friend!"}},
    ],
    "chat_chunk_words": 1,
}


PROMPT_LOG = "prompts.jsonl"
SUMMARY_SETTLE_S = 1.0  # the memory service summarizes 0.1 s after a thread's last message

# USD per million tokens for the scripted model (which counts words): costs big enough to see.
SCRIPTED_PRICE = (1000.0, 2000.0)


@pytest.fixture(scope="module")
def stack(
    valkey_server: Any, milvus_server: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    redis_url = f"redis://127.0.0.1:{valkey_server.port}/1"
    data_dir: Path = tmp_path_factory.mktemp("stack")
    with running_stack(
        redis_url,
        milvus_server.uri,
        data_dir,
        {**SCRIPT, "prompt_log": str(data_dir / PROMPT_LOG)},
        service_settings={  # the gateway serves /metrics on its main port too
            "gateway": {"metrics_port": str(free_port())},
            "decision": {"metrics_port": str(free_port())},
            "action-worker": {"metrics_port": str(free_port())},
            "memory": {"metrics_port": str(free_port())},
        },
        llm_prices=json.dumps({"scripted": SCRIPTED_PRICE}),
        cycle_max_steps="3",
        step_timeout_seconds="10",
        otel_exporter="console",
        otel_console_path=str(data_dir / "spans.jsonl"),
        # Small summary windows, so a few cycles reach every layer.
        history_verbatim_messages="3",
        history_structured_messages="6",
        history_summary_delay_seconds="0.1",
    ) as running:
        yield running


def of_type(frames: list[Frame], kind: str) -> list[Frame]:
    return [f for f in frames if f["type"] == kind]


async def test_a_message_streams_thinking_deltas_answer_and_cycle_end(stack: Stack) -> None:
    async with chat(stack.ws_url("ana")) as client:
        accepted = await client.send("t-basic", "hi Memoria")
        assert accepted["type"] == "accepted"
        assert accepted["queued"] is False
        frames = await client.cycle(accepted["id"])

    echo, thinking, *_ = [f for f in frames if f["type"] != "delta"]
    assert echo["type"] == "message"
    assert (echo["id"], echo["role"], echo["chat-history"]) == (accepted["id"], "user", True)
    assert echo["content"] == "hi Memoria"
    assert (thinking["modal"], thinking["content"], thinking["chat-history"]) == (
        "textForReplace",
        "Thinking...",
        False,
    )
    answer = of_type(frames, "message")[-1]
    deltas = [f for f in of_type(frames, "delta") if f["id"] == answer["id"]]
    assert len(deltas) > 1, "the answer must stream in pieces"
    assert "".join(d["content"] for d in deltas) == answer["content"] == "Hello there, friend!"
    assert frames.index(deltas[-1]) < frames.index(answer)
    assert (answer["role"], answer["chat-history"], answer["modal"]) == ("assistant", False, "text")
    assert answer["model"] == "scripted"
    end = dict(frames[-1])
    assert end.pop("usage") is not None
    # Every frame of the cycle names its chat.out entry, so a client can resume after it.
    assert re.fullmatch(r"[0-9]+-[0-9]+", end.pop("event_id"))
    assert end == {
        "type": "cycle_end",
        "cycle_id": answer["cycle_id"],
        "thread_id": "t-basic",
        "actions": ["Finalize"],
        "reason": "done",
    }


def scripted_cost(input_tokens: int, output_tokens: int) -> float:
    return (input_tokens * SCRIPTED_PRICE[0] + output_tokens * SCRIPTED_PRICE[1]) / 1e6


async def test_cycle_end_reports_the_cycles_token_usage_and_cost(stack: Stack) -> None:
    async with chat(stack.ws_url("ana")) as client:
        accepted = await client.send("t-usage", "hi, what does this cost?")
        frames = await client.cycle(accepted["id"])

    usage = frames[-1]["usage"]
    # The scripted model counts words, and a streamed answer as pydantic-ai's FunctionModel
    # does: "Finalize" (decision, 1) and "Hello there, friend!" (the Finalize step's answer,
    # 4: its words and the comma) out; the decision and answer prompts in.
    assert usage["output_tokens"] == 1 + 4
    assert usage["input_tokens"] > 0
    assert usage["cost_usd"] == pytest.approx(
        scripted_cost(usage["input_tokens"], usage["output_tokens"])
    )
    assert usage["by_model"] == {
        "scripted": {key: usage[key] for key in ("input_tokens", "output_tokens", "cost_usd")}
    }

    spans_file = stack.data_dir / "spans.jsonl"

    def cycle_end_span() -> dict[str, Any] | None:
        spans = [json.loads(line) for line in spans_file.read_text().splitlines() if line]
        ends = [
            s
            for s in spans
            if s["name"] == "cycle.end"
            and s["attributes"].get("memoria.cycle_id") == frames[-1]["cycle_id"]
        ]
        return ends[0] if ends else None

    async with asyncio.timeout(15):  # spans are exported in batches
        while (span := cycle_end_span()) is None:
            await asyncio.sleep(0.25)
    assert span["attributes"]["gen_ai.usage.input_tokens"] == usage["input_tokens"]
    assert span["attributes"]["gen_ai.usage.output_tokens"] == usage["output_tokens"]
    assert span["attributes"]["memoria.cycle.cost_usd"] == pytest.approx(usage["cost_usd"])


async def test_a_cycles_end_is_on_its_last_stored_message(stack: Stack) -> None:
    """What the live cycle_end said is there for a client that draws the thread again."""
    async with chat(stack.ws_url("ana")) as client:
        accepted = await client.send("t-ends", "hi, how did that go?")
        end = (await client.cycle(accepted["id"]))[-1]

    stored = await asyncio.to_thread(stack.history, "ana", "t-ends")
    assert [m["role"] for m in stored] == ["user", "assistant"]
    assert "cycle_end" not in stored[0]  # only the cycle's last message carries it
    summary = stored[-1]["cycle_end"]
    assert summary["cycle_id"] == end["cycle_id"] == stored[-1]["cycle_id"]
    assert (summary["actions"], summary["reason"]) == (end["actions"], end["reason"])
    assert summary["usage"] == end["usage"]
    assert 0 <= summary["duration_ms"] < 60_000


async def test_metrics_count_messages_cycles_and_tokens(stack: Stack) -> None:
    async with chat(stack.ws_url("ana")) as client:
        accepted = await client.send("t-metrics", "hi, count me")
        await client.cycle(accepted["id"])

    gateway = await scrape(f"{stack.base_url}/metrics")
    assert total(gateway, "memoria_bus_entries_total", service="gateway", outcome="handled") > 0
    assert total(gateway, "process_resident_memory_bytes") > 0

    decision = await scrape(metrics_url(stack, "decision"))
    assert total(decision, "memoria_cycles_total", reason="done") >= 1
    assert total(decision, "memoria_cycle_duration_seconds_count") >= 1
    assert total(decision, "memoria_bus_entries_total", service="decision", outcome="handled") > 0
    assert total(decision, "memoria_bus_published_total", service="decision") > 0
    assert (
        total(
            decision,
            "memoria_llm_tokens_total",
            model="scripted",
            direction="output",
            service="decision",
        )
        >= 1
    )

    worker = await scrape(metrics_url(stack, "action-worker"))
    worker_out = total(
        worker,
        "memoria_llm_tokens_total",
        model="scripted",
        direction="output",
        service="action-worker",
    )
    assert worker_out >= 3  # at least this cycle's answer
    assert total(worker, "memoria_llm_cost_usd_total", service="action-worker") > 0


async def test_history_is_persisted_by_the_memory_service(stack: Stack) -> None:
    async with chat(stack.ws_url("ana")) as client:
        first = await client.send("t-history", "ask me something")
        await client.cycle(first["id"])
        second = await client.send("t-history", "hi again")
        await client.cycle(second["id"])

    stored = await asyncio.to_thread(stack.history, "ana", "t-history")
    assert [(m["role"], m["content"], m["chat-history"]) for m in stored] == [
        ("user", "ask me something", True),
        ("assistant", "Which city do you mean?", True),
        ("user", "hi again", True),
        ("assistant", "Hello there, friend!", False),
    ]
    assert not any(m["modal"] == "textForReplace" for m in stored)
    assert await asyncio.to_thread(stack.history, "bob", "t-history") == []


async def test_steps_are_history_as_tool_calls_and_old_turns_are_summarized(stack: Stack) -> None:
    """Across the services: each Ponder step is stored as a tool call and its result,
    never shown to the client; a later decision gets them as tool turns, and the turns
    before the newest messages as the memory service's summaries."""
    async with chat(stack.ws_url("ana")) as client:
        for n in range(5):
            accepted = await client.send("t-r6", f"r6 turn {n}. Then more words.")
            frames = await client.cycle(accepted["id"])
            messages = [f for f in frames if f["type"] == "message"]
            assert all(f["role"] != "tool" and "tool_calls" not in f for f in messages)
            await asyncio.sleep(SUMMARY_SETTLE_S)

    stored = await asyncio.to_thread(stack.history, "ana", "t-r6")
    assert {m["role"] for m in stored} == {"user", "assistant"}  # no tool records listed
    prompts = [json.loads(line) for line in (stack.data_dir / PROMPT_LOG).read_text().splitlines()]
    last = next(
        p
        for p in prompts
        if p["task"] == "decide" and any("r6 turn 4" in c for _, c in p["messages"])
    )
    roles = [role for role, _ in last["messages"]]
    assert ["assistant", "tool"] in [roles[i : i + 2] for i in range(len(roles) - 1)]
    assert ["tool", "pondered"] in last["messages"]  # turn 3, verbatim: a native tool turn
    assert ["assistant", "[Ponder] pondered"] not in last["messages"]  # no turn cut in half
    system = last["system"]
    # Turn 0 archived, turns 1 and 2 structured (3 messages verbatim + 6 structured).
    assert (
        "Summary of the oldest part of this conversation:\n- user: r6 turn 0. | actions: Ponder"
        in system
    )
    assert "user: r6 turn 1. Then more words.\nPonder: pondered" in system
    assert "user: r6 turn 2. Then more words.\nPonder: pondered" in system
    assert "r6 turn 3" not in system


async def test_question_ends_the_cycle_with_a_chat_history_question(stack: Stack) -> None:
    async with chat(stack.ws_url("ana")) as client:
        accepted = await client.send("t-question", "ask me where I live")
        frames = await client.cycle(accepted["id"])
    question = of_type(frames, "message")[-1]
    assert (question["content"], question["chat-history"], question["role"]) == (
        "Which city do you mean?",
        True,
        "assistant",
    )
    assert frames[-1]["actions"] == ["Question"]


async def test_an_unknown_action_name_is_asked_again(stack: Stack) -> None:
    async with chat(stack.ws_url("ana")) as client:
        accepted = await client.send("t-retry", "confused request")
        frames = await client.cycle(accepted["id"])
    assert frames[-1]["actions"] == ["Finalize"]
    assert of_type(frames, "message")[-1]["content"] == "Sorted."


async def test_only_unknown_names_fall_back_to_finalize(stack: Stack) -> None:
    async with chat(stack.ws_url("ana")) as client:
        accepted = await client.send("t-fallback", "hopeless request")
        frames = await client.cycle(accepted["id"])
    assert frames[-1]["actions"] == ["Finalize"]
    assert "falling back to Finalize" in stack.logs("decision")


async def test_max_steps_ends_the_cycle_with_a_visible_message(stack: Stack) -> None:
    async with chat(stack.ws_url("ana")) as client:
        accepted = await client.send("t-steps", "ponder forever")
        frames = await client.cycle(accepted["id"])
    end = frames[-1]
    assert (end["reason"], end["actions"]) == ("max_steps", ["Ponder", "Ponder", "Ponder"])
    notice = of_type(frames, "message")[-1]
    assert notice["role"] == "system"
    assert "3 steps" in notice["content"]


async def test_a_step_that_runs_too_long_ends_the_cycle(stack: Stack) -> None:
    async with chat(stack.ws_url("ana")) as client:
        accepted = await client.send("t-timeout", "stall please")
        frames = await client.cycle(accepted["id"])
    assert frames[-1]["reason"] == "step_timeout"
    assert frames[-1]["actions"] == ["Stall"]
    assert "Stall" in of_type(frames, "message")[-1]["content"]
    async with asyncio.timeout(10):  # the worker stops the step nobody waits for any more
        while "stopped: its cycle ended" not in stack.logs("action-worker"):
            await asyncio.sleep(0.2)


async def test_a_failing_action_is_reported_and_the_cycle_goes_on(stack: Stack) -> None:
    async with chat(stack.ws_url("ana")) as client:
        accepted = await client.send("t-explode", "explode now")
        frames = await client.cycle(accepted["id"])
    assert frames[-1]["actions"] == ["Explode", "Finalize"]
    assert frames[-1]["reason"] == "done"


async def test_messages_sent_during_a_cycle_wait_their_turn(stack: Stack) -> None:
    async with chat(stack.ws_url("ana")) as client:
        first = await client.send("t-queue", "slow first")
        second = await client.send("t-queue", "then this")
        third = await client.send("t-queue", "and this")
        assert [first["queued"], second["queued"], third["queued"]] == [False, True, True]
        cycles = [await client.cycle(m["id"]) for m in (first, second, third)]

    ends = [client.frames.index(c[-1]) for c in cycles]
    starts = [client.frames.index(c[0]) for c in cycles]
    assert starts[1] > ends[0] and starts[2] > ends[1], "one cycle at a time, in order"
    assert [c[-1]["actions"] for c in cycles] == [["Slow", "Finalize"], ["Finalize"], ["Finalize"]]


async def test_a_resent_client_id_is_not_handled_twice(stack: Stack) -> None:
    async with chat(stack.ws_url("ana")) as client:
        first = await client.send("t-dedupe", "hello once", client_id="client-msg-0001")
        again = await client.send("t-dedupe", "hello once", client_id="client-msg-0001")
        await client.cycle(first["id"])
    assert again["duplicate"] is True and again["id"] == first["id"]
    stored = await asyncio.to_thread(stack.history, "ana", "t-dedupe")
    assert [m["content"] for m in stored if m["role"] == "user"] == ["hello once"]


async def test_frames_reach_only_their_users_sockets(stack: Stack) -> None:
    async with chat(stack.ws_url("ana")) as ana, chat(stack.ws_url("bob")) as bob:
        accepted = await ana.send("shared-name", "hi from ana")
        await ana.cycle(accepted["id"])
        bob_accepted = await bob.send("shared-name", "hi from bob")
        await bob.cycle(bob_accepted["id"])
    assert all(f.get("cycle_id") != f"cyc_{accepted['id'][4:]}" for f in bob.frames)
    assert "hi from bob" not in json.dumps(ana.frames)


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        ("not json", "invalid_frame"),
        (b"\x00\xff", "invalid_frame"),
        ('{"type": "message", "thread_id": "t1"}', "invalid_frame"),
        ('{"type": "dance", "thread_id": "t1", "content": "x"}', "invalid_frame"),
        ('{"type": "message", "thread_id": "a/b", "content": "x"}', "invalid_frame"),
        ('{"type": "message", "thread_id": "t1", "content": "   "}', "invalid_frame"),
        ('{"type": "message", "thread_id": "t1", "content": "' + "x" * 9000 + '"}', "too_large"),
        ('{"type": "message", "thread_id": "t1", "content": "' + "x" * 70000 + '"}', "too_large"),
    ],
)
async def test_bad_frames_get_an_error_and_the_socket_stays_usable(
    stack: Stack, raw: str | bytes, code: str
) -> None:
    async with chat(stack.ws_url("ana")) as client:
        reply = await client.send_raw(raw)
        assert reply["type"] == "error"
        assert reply["code"] == code
        assert reply["message"]
        accepted = await client.send("t-after-error", "still here?")
        assert accepted["type"] == "accepted"
        await client.cycle(accepted["id"])


@pytest.mark.parametrize("token", ["", "forged.token.value", None])
async def test_a_socket_without_a_valid_token_is_refused(stack: Stack, token: str | None) -> None:
    import websockets

    url = stack.ws_base if token is None else f"{stack.ws_base}?token={token}"
    async with websockets.connect(url) as connection:
        frame = json.loads(await connection.recv())
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await connection.recv()
    assert frame["type"] == "error" and frame["code"] == "unauthorized"
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 4401


async def test_http_api_needs_a_token(stack: Stack) -> None:
    async with httpx.AsyncClient(base_url=stack.base_url) as http:
        assert (await http.get("/api/threads/t1/messages")).status_code == 401
        bad = {"Authorization": "Bearer nope"}
        assert (await http.get("/api/threads/t1/messages", headers=bad)).status_code == 401
        assert (await http.post("/api/token", json={"user_id": "a:b"})).status_code == 422
        assert (await http.get("/healthz")).json()["status"] == "ok"
        page = await http.get("/")
        assert page.status_code == 200 and "Memoria" in page.text


async def test_every_service_answers_its_probes(stack: Stack) -> None:
    """What Kubernetes and compose health checks ask: live and ready, on each ops port and on
    the gateway's own port."""
    urls = [stack.base_url] + [
        f"http://127.0.0.1:{stack.service_env[s]['MEMORIA_METRICS_PORT']}"
        for s in ("gateway", "decision", "action-worker", "memory")
    ]
    async with httpx.AsyncClient() as http:
        for base in urls:
            for path in ("/livez", "/readyz", "/healthz"):
                response = await http.get(base + path)
                assert response.status_code == 200, (base, path, response.text)
                assert response.json()["status"] == "ok"
    probe = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "memoria_runtime.probe",
        f"{urls[4]}/readyz",
        stdout=asyncio.subprocess.DEVNULL,
    )
    assert await probe.wait() == 0


async def test_one_trace_per_cycle_across_all_four_services(stack: Stack) -> None:
    async with chat(stack.ws_url("ana")) as client:
        accepted = await client.send("t-trace", "hi, trace me")
        await client.cycle(accepted["id"])
    spans_file = stack.data_dir / "spans.jsonl"

    def services_in_trace() -> set[str]:
        spans = [json.loads(line) for line in spans_file.read_text().splitlines() if line]
        by_trace: dict[str, set[str]] = {}
        for span in spans:
            service = span["resource"]["attributes"]["service.name"]
            by_trace.setdefault(span["context"]["trace_id"], set()).add(service)
        started = [
            s["context"]["trace_id"]
            for s in spans
            if s["name"] == "gateway.user_message"
            and s["attributes"].get("memoria.thread_id") == "t-trace"
        ]
        return by_trace.get(started[0], set()) if started else set()

    expected = {f"memoria-{s}" for s in ("gateway", "decision", "action-worker", "memory")}
    async with asyncio.timeout(15):
        while services_in_trace() != expected:
            await asyncio.sleep(0.25)


async def test_disabling_an_action_needs_no_decision_restart(stack: Stack) -> None:
    stack.stop("action-worker")
    stack.start("action-worker", {"MEMORIA_ACTIONS_DISABLED": "Question"})
    try:
        redis = Redis.from_url(stack.redis_url)
        async with asyncio.timeout(30):
            while True:
                adverts = await redis.hgetall("memoria:actions:catalog")
                names = {a["name"] for v in adverts.values() for a in json.loads(v)["actions"]}
                if names and "Question" not in names:
                    break
                await asyncio.sleep(0.1)
        await redis.aclose()
        async with chat(stack.ws_url("ana")) as client:
            accepted = await client.send("t-disabled", "ask me again")
            frames = await client.cycle(accepted["id"])
        assert frames[-1]["actions"] == ["Finalize"], "Question is off: decision falls back"
    finally:
        stack.stop("action-worker")
        stack.start("action-worker")
        await asyncio.to_thread(stack.wait_ready, 5)


async def test_a_killed_action_worker_is_replaced_and_nothing_is_lost(stack: Stack) -> None:
    """kill -9 mid-step: the entry is reclaimed by the next worker and the cycle completes."""
    async with chat(stack.ws_url("ana")) as client:
        accepted = await client.send("t-crash", "slow and steady")
        await client.wait_for(lambda f: f.get("modal") == "textForReplace")
        await asyncio.sleep(0.3)  # the Slow step is running now
        stack.stop("action-worker", signal.SIGKILL)
        stack.start("action-worker")
        frames = await client.cycle(accepted["id"], timeout=60)
    assert frames[-1]["actions"] == ["Slow", "Finalize"]
    assert frames[-1]["reason"] == "done"

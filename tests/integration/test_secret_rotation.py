"""Both secrets rotated without a stop (ADR 0008): the four services restarted one at a time
through the three steps, a user chatting after every restart. Nothing is dead-lettered,
every cycle ends as it should, and a token issued before the rotation keeps working until the
old secret is dropped."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis as sync_redis
import websockets
from stack import SERVICES, TEST_BUS_SECRET, Stack, running_stack
from ws_client import Frame, one_cycle

from memoria_contracts.streams import Stream
from memoria_runtime.bus.signing import KEY_ID_KEY, Signer

pytestmark = pytest.mark.integration

DB = 10  # a database of its own: the rotation leaves another key id recorded
OLD_BUS, NEW_BUS = TEST_BUS_SECRET, "rotated-bus-secret-0123456789abcdef"
OLD_AUTH, NEW_AUTH = "auth-secret-before-0123456789abcdef", "auth-secret-after-0123456789abcdef"
UNSET = ""  # an empty setting is an unset one
STEPS: list[dict[str, str]] = [
    {  # 1: accept the new secrets, sign with the old ones
        "MEMORIA_BUS_SECRET": OLD_BUS,
        "MEMORIA_BUS_SECRET_NEXT": NEW_BUS,
        "MEMORIA_AUTH_SECRET": OLD_AUTH,
        "MEMORIA_AUTH_SECRET_NEXT": NEW_AUTH,
    },
    {  # 2: sign with the new ones, accept the old ones
        "MEMORIA_BUS_SECRET": NEW_BUS,
        "MEMORIA_BUS_SECRET_NEXT": UNSET,
        "MEMORIA_BUS_SECRET_PREVIOUS": OLD_BUS,
        "MEMORIA_AUTH_SECRET": NEW_AUTH,
        "MEMORIA_AUTH_SECRET_NEXT": UNSET,
        "MEMORIA_AUTH_SECRET_PREVIOUS": OLD_AUTH,
    },
    {  # 3: the old ones are gone
        "MEMORIA_BUS_SECRET": NEW_BUS,
        "MEMORIA_BUS_SECRET_PREVIOUS": UNSET,
        "MEMORIA_AUTH_SECRET": NEW_AUTH,
        "MEMORIA_AUTH_SECRET_PREVIOUS": UNSET,
    },
]
SCRIPT: dict[str, Any] = {
    "rules": [
        {  # a memory request and its reply cross the bus too, both signed
            "match": "^remember (.+)$",
            "decide": ["MemorySave", "Finalize"],
            "reasoning": {
                "MemorySave": {"memories": [{"type": "text", "content": "$1", "bindings": ["$1"]}]}
            },
            "chat": {"MemorySave": "Noted.", "Finalize": "Saved."},
        },
        {"match": "", "decide": ["Finalize"], "chat": {"Finalize": "Hello."}},
    ],
}


@pytest.fixture(scope="module")
def stack(
    valkey_server: Any, milvus_server: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    redis_url = f"redis://127.0.0.1:{valkey_server.port}/{DB}"
    data_dir: Path = tmp_path_factory.mktemp("rotation-stack")
    with running_stack(redis_url, milvus_server.uri, data_dir, SCRIPT, auth_secret=OLD_AUTH) as s:
        yield s
    client = sync_redis.Redis.from_url(redis_url)
    client.flushdb()  # no key id of the new secret left for anyone else
    client.close()


async def cycle_with(stack: Stack, token: str, thread_id: str, content: str) -> list[Frame]:
    return await one_cycle(f"{stack.ws_base}?token={token}", thread_id, content)


async def test_services_restarted_one_by_one_through_a_rotation_lose_nothing(
    stack: Stack,
) -> None:
    old_token = stack.token("ana")  # signed with the old token secret
    ended: list[tuple[str, list[str]]] = []

    async def chat_after(restart: str) -> None:
        fresh = stack.token("bo")  # signed with whatever the gateway signs with now
        for who, token in (("ana", old_token), ("bo", fresh)):
            frames = await cycle_with(stack, token, f"t-{who}", f"remember {who} {restart}")
            [end] = [f for f in frames if f["type"] == "cycle_end"]
            ended.append((f"{who} after {restart}", end["actions"]))

    await chat_after("start")
    for number, settings in enumerate(STEPS[:2], 1):
        for service in SERVICES:
            stack.stop(service)
            stack.service_env.setdefault(service, {}).update(settings)
            stack.start(service)
            stack.wait_ready()
            await chat_after(f"step {number}, {service}")
    assert all(actions == ["MemorySave", "Finalize"] for _, actions in ended), ended

    for service in SERVICES:  # step 3
        stack.stop(service)
        stack.service_env[service].update(STEPS[2])
        stack.start(service)
        stack.wait_ready()
    frames = await cycle_with(stack, stack.token("bo"), "t-bo", "remember bo at the end")
    assert [f["actions"] for f in frames if f["type"] == "cycle_end"] == [
        ["MemorySave", "Finalize"]
    ]
    async with websockets.connect(f"{stack.ws_base}?token={old_token}") as connection:
        refusal = json.loads(await connection.recv())  # the old secret's token, now
    assert refusal["code"] == "unauthorized"

    client = sync_redis.Redis.from_url(stack.redis_url)
    try:
        assert client.xlen(Stream.DEAD_LETTER.value) == 0
        assert client.get(KEY_ID_KEY) == Signer(NEW_BUS).fingerprint.encode()
    finally:
        client.close()

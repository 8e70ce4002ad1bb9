"""The cluster client overrides one private method of redis-py's (how a command's slot is
found, to spare a round trip on every stream read): an upgrade that renames it or changes
its shape must fail here, not silently send every read through ``COMMAND GETKEYS``."""

from __future__ import annotations

import inspect

import pytest
from redis.asyncio.cluster import RedisCluster

from memoria_runtime.redis_clients import FailoverAwareCluster


def test_redis_py_still_finds_a_slot_the_way_we_override() -> None:
    theirs = RedisCluster._determine_slot
    assert inspect.iscoroutinefunction(theirs)
    parameters = list(inspect.signature(theirs).parameters.values())
    assert [p.name for p in parameters[:2]] == ["self", "command"]
    assert parameters[2].kind is inspect.Parameter.VAR_POSITIONAL
    assert FailoverAwareCluster._determine_slot is not theirs


def test_a_read_of_streams_in_one_slot_is_placed_without_asking_a_node() -> None:
    client = FailoverAwareCluster(host="127.0.0.1", port=1)  # never connected
    keys = ("memoria:{p0}:chat.in", "memoria:{p0}:actions")
    args = ("GROUP", "g", "c", "BLOCK", "100", "STREAMS", *keys, ">", ">")
    coroutine = client._determine_slot("XREADGROUP", *args)
    # Run to its end without an event loop: one that awaited a node's answer would stop early.
    with pytest.raises(StopIteration) as done:
        coroutine.send(None)
    assert done.value.value == client.keyslot(keys[0])

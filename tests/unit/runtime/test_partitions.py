"""Partitions: which partition a user's work goes to, and the hash tags that keep a
partition's keys on one cluster slot."""

from __future__ import annotations

from collections import Counter

import pytest
from redis.crc import REDIS_CLUSTER_HASH_SLOTS, key_slot

from memoria_contracts.streams import Stream
from memoria_runtime import keys
from memoria_runtime.partitions import MAX_PARTITIONS, Partitions, logical_name

EVEN_SLOT_RANGES = {  # what CLUSTER ADDSLOTSRANGE / valkey-cli --cluster create give
    3: [(0, 5460), (5461, 10922), (10923, 16383)],
    6: [(0, 2730), (2731, 5460), (5461, 8191), (8192, 10922), (10923, 13652), (13653, 16383)],
}


def primary_of(slot: int, ranges: list[tuple[int, int]]) -> int:
    return next(n for n, (low, high) in enumerate(ranges) if low <= slot <= high)


def test_one_partition_on_one_server_keeps_every_name_as_it_was() -> None:
    one = Partitions().of("ana")
    assert one.scoped(Stream.CHAT_IN.value) == "memoria:chat.in"
    assert keys.thread_lock(one, "ana", "t1") == "memoria:thread:ana:t1:lock"
    assert keys.cycle_state(one, "cyc_1") == "memoria:cycle:cyc_1"
    assert keys.step_deadlines(one) == "memoria:deadlines"
    assert one.slot is None


def test_a_cluster_tags_keys_even_with_one_partition() -> None:
    one = Partitions(1, tagged=True).of("ana")
    assert one.tag.startswith("{") and one.tag.endswith("}")
    assert one.scoped(Stream.CHAT_IN.value) == f"memoria:{one.tag}:chat.in"


def test_every_key_of_a_thread_shares_its_partitions_slot() -> None:
    partitions = Partitions(12)
    part = partitions.of("ana")
    names = [
        part.scoped(Stream.CHAT_IN.value),
        part.scoped(Stream.CHAT_OUT.value),
        keys.thread_lock(part, "ana", "t1"),
        keys.thread_queue(part, "ana", "t1"),
        keys.pending_action(part, "ana", "t1"),
        keys.message_seen(part, "ana", "client-1"),
        keys.cycle_state(part, "cyc_1"),
        keys.cycle_ended(part, "cyc_1"),
        keys.step_done(part, "cyc_1", 2),
        keys.step_plan(part, "cyc_1", 2),
        keys.step_lease(part, "cyc_1", 2),
        keys.step_deadlines(part),
        keys.user_route(part, "ana"),
        keys.gateway_inbox(part, "gw-1"),
    ]
    assert {key_slot(name.encode()) for name in names} == {part.slot}


def test_a_user_given_brace_cannot_take_over_the_tag() -> None:
    # user ids have no braces (contracts), and the tag comes before any id anyway
    part = Partitions(4).of("ana")
    name = keys.message_seen(part, "ana", "{evil}")
    assert key_slot(name.encode()) == part.slot


@pytest.mark.parametrize("count", [1, 2, 3, 5, 12, 64, MAX_PARTITIONS])
def test_each_tag_lies_in_the_middle_of_its_share_of_the_slots(count: int) -> None:
    share = REDIS_CLUSTER_HASH_SLOTS / count
    for part in Partitions(count, tagged=True).all:
        assert part.slot is not None
        assert part.index * share + share / 4 <= part.slot < (part.index + 1) * share - share / 4


@pytest.mark.parametrize(("count", "primaries"), [(3, 3), (12, 3), (6, 6), (12, 6), (48, 6)])
def test_a_multiple_of_the_primaries_spreads_partitions_evenly(count: int, primaries: int) -> None:
    ranges = EVEN_SLOT_RANGES[primaries]
    held = Counter(primary_of(p.slot or 0, ranges) for p in Partitions(count).all)
    assert sorted(held.values()) == [count // primaries] * primaries


def test_users_spread_over_the_partitions_and_always_land_in_the_same_one() -> None:
    partitions = Partitions(3)
    users = [f"user-{n}" for n in range(3000)]
    counts = Counter(partitions.of(user).index for user in users)
    assert all(900 <= n <= 1100 for n in counts.values()), counts
    assert [Partitions(3).of(user) for user in users[:50]] == [
        partitions.of(user) for user in users[:50]
    ]


def test_the_partition_count_is_bounded() -> None:
    with pytest.raises(ValueError, match="1 to"):
        Partitions(0)
    with pytest.raises(ValueError, match="1 to"):
        Partitions(MAX_PARTITIONS + 1)


def test_logical_names_drop_the_tag() -> None:
    part = Partitions(5).all[3]
    assert logical_name(part.scoped(Stream.ACTIONS.value)) == Stream.ACTIONS.value
    assert logical_name(Stream.ACTIONS.value) == Stream.ACTIONS.value
    assert logical_name("memoria:{unclosed:chat.in") == "memoria:{unclosed:chat.in"


def test_only_memoria_keys_are_scoped() -> None:
    with pytest.raises(ValueError, match="not a Memoria key"):
        Partitions(2).all[0].scoped("other:key")


def test_the_layout_names_count_and_tagging() -> None:
    assert Partitions().layout == "partitions=1;tagged=0"
    assert Partitions(1, tagged=True).layout == "partitions=1;tagged=1"
    assert Partitions(4).layout == "partitions=4;tagged=1"


@pytest.mark.parametrize("partitions", [Partitions(), Partitions(1, tagged=True), Partitions(6)])
def test_a_layout_reads_back_as_the_same_partitions(partitions: Partitions) -> None:
    again = Partitions.from_layout(partitions.layout)
    assert (again.count, again.tagged, again.all) == (
        partitions.count,
        partitions.tagged,
        partitions.all,
    )


def test_a_malformed_layout_is_refused() -> None:
    with pytest.raises(ValueError, match="not a partition layout"):
        Partitions.from_layout("partitions=many")


def test_a_users_partition_never_changes_across_versions() -> None:
    """Every service of a deployment, of any version, must find a user in the same
    partition: the mapping is part of the data's layout, pinned here."""
    users = ["ana", "bob", "carol", "dave", "erin", "frank"]
    assert [Partitions(2).of(u).index for u in users] == [0, 0, 1, 1, 0, 0]
    assert [Partitions(3).of(u).index for u in users] == [1, 1, 1, 0, 2, 1]
    assert [Partitions(12).of(u).index for u in users] == [4, 10, 1, 3, 8, 10]


def test_two_partitions_take_users_apart() -> None:
    counts = Counter(Partitions(2).of(f"user-{n}").index for n in range(1000))
    assert all(400 <= n <= 600 for n in counts.values()), counts


def test_every_partitions_key_of_a_name() -> None:
    partitions = Partitions(3)
    assert partitions.keys(Stream.ACTIONS.value) == [
        f"memoria:{part.tag}:actions" for part in partitions.all
    ]
    assert Partitions().keys(Stream.ACTIONS.value) == [Stream.ACTIONS.value]


def test_only_the_tag_is_taken_out_of_a_name() -> None:
    part = Partitions(4).all[1]
    name = part.scoped("memoria:route:odd}:name")
    assert logical_name(name) == "memoria:route:odd}:name"

"""One contract for every document-store adapter (ADR 0004).

Each test runs against SQLite, against the Mongo adapter on tinymongo's in-process
emulation, and against a real MongoDB (``MONGODB_URL`` or testcontainers; skipped without a
Docker engine). Assertions state real MongoDB semantics; where the emulation falls short,
only that case is marked as an expected failure of the emulated adapter (strict, so it is
noticed once the emulator catches up).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pymongo
import pymongo.errors
import pytest

from memoria_memory.docstore import (
    Collection,
    Document,
    DocumentStore,
    DocumentStoreError,
    DuplicateKeyError,
    Filter,
    UnsupportedFilter,
    open_document_store,
)
from memoria_memory.docstore.mongo import MongoDocumentStore, database_from_url
from memoria_memory.docstore.sqlite import SqliteDocumentStore
from memoria_memory.memories import clock
from memoria_memory.memories.documents import MemoryDocument
from memoria_memory.memories.repository import MemoryRepository
from memoria_memory.memories.window import NO_WINDOW, TimeWindow

sys.path.insert(0, str(Path(__file__).parent.parent / "support"))
from document_stores import ALL, EMULATED, opened_store

CONCURRENT_WRITES = 100
CONCURRENT_UPDATES = 50
REAL_ASYNC_CLIENT = pymongo.AsyncMongoClient


@dataclass
class Adapter:
    kind: str
    store: DocumentStore

    def emulator_gap(self, request: pytest.FixtureRequest, reason: str) -> None:
        """Expect this case to fail on the emulated adapter only, for ``reason``."""
        if self.kind == EMULATED:
            request.applymarker(pytest.mark.xfail(reason=f"tinymongo: {reason}", strict=True))


@pytest.fixture(params=ALL)
async def adapter(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Adapter]:
    kind = request.param
    async with opened_store(kind, tmp_path, "memoria_contract", request) as store:
        yield Adapter(kind, store)
    assert pymongo.AsyncMongoClient is REAL_ASYNC_CLIENT, "tinymongo.patch leaked"


@pytest.fixture
def things(adapter: Adapter) -> Collection:
    return adapter.store.collection("things")


async def ids(collection: Collection, filter: Filter) -> list[str]:
    return sorted(doc["_id"] for doc in await collection.find(filter))


# -- insert / find ----------------------------------------------------------------------------

RICH_DOCUMENT: Document = {
    "_id": "rich",
    "text": "héllo wörld — 你好 🌍",
    "int": 42,
    "negative": -7,
    "big": 2**53 + 1,
    "float": 3.25,
    "flag": True,
    "off": False,
    "nothing": None,
    "empty_list": [],
    "empty_object": {},
    "nested": {"list": [1, "two", {"three": [3.0, None, True]}], "deeper": {"key": "värde"}},
    "clé unicode": "ok",
}


async def test_documents_round_trip_unchanged(things: Collection) -> None:
    await things.insert_one(RICH_DOCUMENT)

    assert await things.find_one({"_id": "rich"}) == RICH_DOCUMENT
    assert await things.find({}) == [RICH_DOCUMENT]
    assert await things.find_one({"text": "héllo wörld — 你好 🌍"}) == RICH_DOCUMENT
    assert await things.find_one({"nested.deeper.key": "värde"}) == RICH_DOCUMENT


async def test_insert_copies_the_document(things: Collection) -> None:
    document: Document = {"_id": "a", "tags": ["x"]}
    await things.insert_one(document)
    document["tags"].append("y")

    assert await things.find_one({"_id": "a"}) == {"_id": "a", "tags": ["x"]}


async def test_duplicate_id_is_refused(things: Collection) -> None:
    await things.insert_one({"_id": "a", "n": 1})

    with pytest.raises(DuplicateKeyError):
        await things.insert_one({"_id": "a", "n": 2})
    assert await things.find({}) == [{"_id": "a", "n": 1}]


@pytest.mark.parametrize(
    ("document", "error"),
    [
        pytest.param({"n": 1}, ValueError, id="no-id"),
        pytest.param({"_id": 5}, TypeError, id="non-string-id"),
        pytest.param({"_id": "a", "when": object()}, TypeError, id="non-json-value"),
        pytest.param({"_id": "a", "n": float("nan")}, TypeError, id="nan"),
        pytest.param({"_id": "a", "n": 2**64}, TypeError, id="int-beyond-64-bits"),
        pytest.param({"_id": "a", "d": {1: "x"}}, TypeError, id="non-string-key"),
        pytest.param({"_id": "a", "$set": 1}, ValueError, id="dollar-key"),
    ],
)
async def test_invalid_documents_are_refused(
    things: Collection, document: Document, error: type[Exception]
) -> None:
    with pytest.raises(error):
        await things.insert_one(document)
    assert await things.count({}) == 0


async def test_find_one_without_match_is_none(things: Collection) -> None:
    await things.insert_one({"_id": "a"})

    assert await things.find_one({"_id": "b"}) is None
    assert await things.find({"_id": "b"}) == []


# -- filters ----------------------------------------------------------------------------------

PEOPLE: list[Document] = [
    {
        "_id": "a",
        "name": "Ada",
        "age": 36,
        "score": 1.5,
        "active": True,
        "tag": "x",
        "meta": {"city": "London", "level": 3},
        "nick": None,
    },
    {
        "_id": "b",
        "name": "Bob",
        "age": 25,
        "score": 2,
        "active": False,
        "tag": "y",
        "meta": {"city": "Paris", "level": 1},
    },
    {
        "_id": "c",
        "name": "Cyd",
        "age": 41,
        "active": True,
        "tag": 1,
        "meta": {"city": "London"},
        "nick": "cy",
    },
    {"_id": "d", "name": "Dee", "age": "41", "active": 1, "tag": True, "meta": {}, "nick": None},
    {"_id": "e", "name": "Eve", "active": 0, "tag": None, "meta": {"city": None}},
]

FILTER_CASES: list[Any] = [
    pytest.param({}, "abcde", id="empty"),
    pytest.param({"name": "Ada"}, "a", id="eq-implicit"),
    pytest.param({"age": {"$eq": 36}}, "a", id="eq-explicit"),
    pytest.param({"_id": "b"}, "b", id="eq-id"),
    pytest.param({"_id": {"$in": ["a", "c", "zz"]}}, "ac", id="in-id"),
    pytest.param({"_id": {"$gt": "c"}}, "de", id="range-id"),
    pytest.param({"age": 41}, "c", id="eq-int-not-string"),
    pytest.param({"age": "41"}, "d", id="eq-string-not-int"),
    pytest.param({"age": 41.0}, "c", id="eq-float-matches-int"),
    pytest.param({"score": 2.0}, "b", id="eq-int-matches-float"),
    pytest.param({"active": True}, "ac", id="eq-true-not-one"),
    pytest.param({"active": 1}, "d", id="eq-one-not-true"),
    pytest.param({"active": False}, "b", id="eq-false-not-zero"),
    pytest.param({"active": 0}, "e", id="eq-zero-not-false"),
    pytest.param({"nick": None}, "abde", id="eq-none-null-or-missing"),
    pytest.param({"nick": {"$eq": None}}, "abde", id="eq-explicit-none"),
    pytest.param({"nick": {"$ne": None}}, "c", id="ne-none"),
    pytest.param({"nick": {"$exists": True}}, "acd", id="exists-includes-null"),
    pytest.param({"nick": {"$exists": False}}, "be", id="exists-false"),
    pytest.param({"_id": {"$exists": True}}, "abcde", id="exists-id"),
    pytest.param({"meta.city": "London"}, "ac", id="dotted-eq"),
    pytest.param({"meta.city": None}, "de", id="dotted-none"),
    pytest.param({"meta.city": {"$exists": True}}, "abce", id="dotted-exists"),
    pytest.param({"meta.city.zip": None}, "abcde", id="dotted-through-scalar"),
    pytest.param({"meta.level": {"$gte": 1}}, "ab", id="dotted-gte"),
    pytest.param({"meta.level": {"$gt": 1, "$lte": 3}}, "a", id="dotted-range"),
    pytest.param({"age": {"$gt": 30}}, "ac", id="gt-numbers-only"),
    pytest.param({"age": {"$lt": 30}}, "b", id="lt"),
    pytest.param({"age": {"$gte": "4"}}, "d", id="gte-strings-only"),
    pytest.param({"age": {"$lte": 36}}, "ab", id="lte"),
    pytest.param({"age": {"$ne": 41}}, "abde", id="ne-includes-other-types-and-missing"),
    pytest.param({"name": {"$gt": "B", "$lt": "D"}}, "bc", id="string-range"),
    pytest.param({"score": {"$lte": 1.5}}, "a", id="float-range"),
    pytest.param({"active": {"$gt": False}}, "ac", id="boolean-range"),
    pytest.param({"tag": {"$in": ["x", 1, None]}}, "ace", id="in-mixed"),
    pytest.param({"tag": {"$in": [True, "y"]}}, "bd", id="in-bool-and-string"),
    pytest.param({"tag": {"$nin": ["x", 1, None]}}, "bd", id="nin-mixed"),
    pytest.param({"nick": {"$in": [None]}}, "abde", id="in-none"),
    pytest.param({"nick": {"$nin": [None]}}, "c", id="nin-none"),
    pytest.param({"tag": {"$in": []}}, "", id="in-empty"),
    pytest.param({"tag": {"$nin": []}}, "abcde", id="nin-empty"),
    pytest.param({"missing": {"$ne": 1}}, "abcde", id="ne-missing-field"),
    pytest.param({"missing": {"$nin": [1]}}, "abcde", id="nin-missing-field"),
    pytest.param({"active": True, "age": {"$lt": 40}}, "a", id="implicit-and"),
    pytest.param({"$and": [{"active": True}, {"meta.city": "London"}]}, "ac", id="and"),
    pytest.param({"$or": [{"name": "Ada"}, {"age": {"$lt": 30}}]}, "ab", id="or"),
    pytest.param(
        {"$or": [{"$and": [{"active": True}, {"age": {"$gt": 40}}]}, {"name": "Eve"}]},
        "ce",
        id="nested-and-or",
    ),
    pytest.param({"$or": [{"nick": {"$ne": None}}, {"tag": "x"}]}, "ac", id="or-of-negation"),
    pytest.param({"name": "x'); DROP TABLE things; --"}, "", id="sql-in-value-is-data"),
]


@pytest.mark.parametrize(("filter", "expected"), FILTER_CASES)
async def test_filter(things: Collection, filter: Filter, expected: str) -> None:
    for person in PEOPLE:
        await things.insert_one(person)

    assert await ids(things, filter) == list(expected)
    assert await things.count(filter) == len(expected)


UNSUPPORTED_FILTERS: list[Any] = [
    pytest.param({"name": {"$regex": "^A"}}, id="regex"),
    pytest.param({"name": {"$not": {"$eq": "Ada"}}}, id="not"),
    pytest.param({"$nor": [{"name": "Ada"}]}, id="nor"),
    pytest.param({"$where": "true"}, id="where"),
    pytest.param({"$expr": {"$eq": ["$a", 1]}}, id="expr"),
    pytest.param({"tags": {"$elemMatch": {"$eq": 1}}}, id="elem-match"),
    pytest.param({"tags": {"$size": 1}}, id="size"),
    pytest.param({"tags": {"$all": [1]}}, id="all"),
    pytest.param({"meta": {"city": "London"}}, id="whole-object"),
    pytest.param({"meta": {}}, id="empty-object"),
    pytest.param({"tags": [1, 2]}, id="whole-list"),
    pytest.param({"age": {"$in": "abc"}}, id="in-not-a-list"),
    pytest.param({"age": {"$in": [[1]]}}, id="in-list-of-lists"),
    pytest.param({"age": {"$exists": 1}}, id="exists-not-bool"),
    pytest.param({"age": {"$gt": None}}, id="range-on-null"),
    pytest.param({"age": {"$gt": 36, "$foo": 1}}, id="unknown-operator"),
    pytest.param({"$and": []}, id="empty-and"),
    pytest.param({"$or": {"a": 1}}, id="or-not-a-list"),
    pytest.param({"$and": ["a"]}, id="and-of-non-filter"),
    pytest.param({"tags.0": "x"}, id="array-position"),
    pytest.param({"a..b": 1}, id="empty-segment"),
    pytest.param({"bad key": 1}, id="space-in-key"),
    pytest.param({"a') OR 1=1 --": 1}, id="sql-in-key"),
    pytest.param({"age": 2**64}, id="int-beyond-64-bits"),
    pytest.param({"age": float("inf")}, id="infinity"),
]


@pytest.mark.parametrize("filter", UNSUPPORTED_FILTERS)
async def test_unsupported_filters_are_refused_everywhere(
    things: Collection, filter: Filter
) -> None:
    await things.insert_one({"_id": "a", "name": "Ada", "age": 36, "tags": [1]})

    with pytest.raises(UnsupportedFilter):
        await things.find(filter)
    with pytest.raises(UnsupportedFilter):
        await things.find_one(filter)
    with pytest.raises(UnsupportedFilter):
        await things.count(filter)
    with pytest.raises(UnsupportedFilter):
        await things.update_one(filter, set={"x": 1})
    with pytest.raises(UnsupportedFilter):
        await things.update_many(filter, set={"x": 1})
    with pytest.raises(UnsupportedFilter):
        await things.replace_one(filter, {"_id": "z"}, upsert=True)
    with pytest.raises(UnsupportedFilter):
        await things.delete_one(filter)
    with pytest.raises(UnsupportedFilter):
        await things.delete_many(filter)
    assert await things.find({}) == [{"_id": "a", "name": "Ada", "age": 36, "tags": [1]}]


@pytest.mark.parametrize(
    "field", ["a') DESC; DROP TABLE things; --", "tags.0", "", "$name"], ids=repr
)
async def test_unsupported_paths_in_sort_and_index_are_refused(
    things: Collection, field: str
) -> None:
    with pytest.raises(UnsupportedFilter):
        await things.find({}, sort=[(field, 1)])
    with pytest.raises(UnsupportedFilter):
        await things.ensure_index([(field, 1)])


# -- sort, limit, skip, count -----------------------------------------------------------------


async def _insert_all(collection: Collection, documents: list[Document]) -> None:
    for document in documents:
        await collection.insert_one(document)


async def test_sort_strings(things: Collection) -> None:
    await _insert_all(
        things, [{"_id": str(i), "s": s} for i, s in enumerate(["pear", "Apple", "apple", "b"])]
    )

    ascending = [doc["s"] for doc in await things.find({}, sort=[("s", 1)])]
    descending = [doc["s"] for doc in await things.find({}, sort=[("s", -1)])]

    assert ascending == ["Apple", "apple", "b", "pear"]  # binary order: upper case first
    assert descending == list(reversed(ascending))


async def test_sort_numbers_numerically(things: Collection) -> None:
    await _insert_all(things, [{"_id": str(n), "n": n} for n in [10, 2, 33, 1, 2.5, -4]])

    ascending = [doc["n"] for doc in await things.find({}, sort=[("n", 1)])]
    descending = [doc["n"] for doc in await things.find({}, sort=[("n", -1)])]

    assert ascending == [-4, 1, 2, 2.5, 10, 33]
    assert descending == [33, 10, 2.5, 2, 1, -4]


async def test_sort_iso_timestamps(things: Collection) -> None:
    stamps = [
        "2024-03-01T00:00:00.000000+00:00",
        "2023-12-31T23:59:59.999999+00:00",
        "2024-03-01T00:00:00.000001+00:00",
        "2024-02-29T12:00:00.000000+00:00",
    ]
    await _insert_all(things, [{"_id": f"t{i}", "at": at} for i, at in enumerate(stamps)])

    ascending = [doc["at"] for doc in await things.find({}, sort=[("at", 1)])]
    newest = await things.find({"at": {"$gte": "2024-01-01"}}, sort=[("at", -1)], limit=2)

    assert ascending == sorted(stamps)
    assert [doc["_id"] for doc in newest] == ["t2", "t0"]


async def test_sort_by_several_keys(things: Collection) -> None:
    rows = [("a", 2, "x"), ("b", 1, "y"), ("c", 2, "w"), ("d", 1, "z")]
    await _insert_all(things, [{"_id": i, "g": g, "s": s} for i, g, s in rows])

    found = await things.find({}, sort=[("g", -1), ("s", 1)])

    assert [doc["_id"] for doc in found] == ["c", "a", "b", "d"]


async def test_sort_by_dotted_path_puts_missing_first(things: Collection) -> None:
    await _insert_all(
        things,
        [
            {"_id": "two", "m": {"rank": 2}},
            {"_id": "none", "m": {}},
            {"_id": "one", "m": {"rank": 1}},
        ],
    )

    ascending = [doc["_id"] for doc in await things.find({}, sort=[("m.rank", 1)])]
    descending = [doc["_id"] for doc in await things.find({}, sort=[("m.rank", -1)])]

    assert ascending == ["none", "one", "two"]
    assert descending == ["two", "one", "none"]


async def test_limit_and_skip(things: Collection) -> None:
    await _insert_all(things, [{"_id": f"{n:02}", "n": n} for n in range(10)])

    def numbers(found: list[Document]) -> list[int]:
        return [doc["n"] for doc in found]

    assert numbers(await things.find({}, sort=[("n", 1)], limit=3)) == [0, 1, 2]
    assert numbers(await things.find({}, sort=[("n", 1)], skip=8)) == [8, 9]
    assert numbers(await things.find({}, sort=[("n", -1)], skip=2, limit=3)) == [7, 6, 5]
    assert numbers(await things.find({"n": {"$gte": 5}}, sort=[("n", 1)], limit=0)) == [
        5,
        6,
        7,
        8,
        9,
    ]
    assert await things.find({}, sort=[("n", 1)], skip=20) == []


@pytest.mark.parametrize(("limit", "skip"), [(-1, 0), (0, -1), (True, 0)])
async def test_negative_page_is_refused(things: Collection, limit: int, skip: int) -> None:
    with pytest.raises(ValueError, match="non-negative"):
        await things.find({}, limit=limit, skip=skip)


async def test_count(things: Collection) -> None:
    assert await things.count({}) == 0
    await _insert_all(things, [{"_id": str(n), "even": n % 2 == 0} for n in range(7)])

    assert await things.count({}) == 7
    assert await things.count({"even": True}) == 4
    assert await things.count({"even": {"$ne": True}}) == 3


# -- updates ----------------------------------------------------------------------------------


async def test_update_one_sets_and_unsets(things: Collection) -> None:
    await things.insert_one({"_id": "a", "n": 1, "old": "x", "meta": {"keep": True}})

    matched = await things.update_one(
        {"_id": "a"}, set={"n": 2, "meta.added": [1, {"b": None}], "new.deep": "y"}, unset=["old"]
    )

    assert matched is True
    assert await things.find_one({"_id": "a"}) == {
        "_id": "a",
        "n": 2,
        "meta": {"keep": True, "added": [1, {"b": None}]},
        "new": {"deep": "y"},
    }


async def test_update_one_changes_only_the_first_match(things: Collection) -> None:
    await _insert_all(things, [{"_id": str(n), "group": "g", "seen": False} for n in range(3)])

    assert await things.update_one({"group": "g"}, set={"seen": True}) is True
    assert await things.count({"seen": True}) == 1


async def test_update_one_reports_no_match(things: Collection) -> None:
    await things.insert_one({"_id": "a", "n": 1})

    assert await things.update_one({"_id": "b"}, set={"n": 2}) is False
    assert await things.update_one({"_id": "a"}, unset=["missing", "also.missing"]) is True
    assert await things.find({}) == [{"_id": "a", "n": 1}]


async def test_update_with_the_same_value_still_matches(things: Collection) -> None:
    await things.insert_one({"_id": "a", "n": 1})

    assert await things.update_one({"_id": "a"}, set={"n": 1}) is True
    assert await things.update_many({"n": 1}, set={"n": 1}) == 1


async def test_update_through_a_scalar_is_refused(
    adapter: Adapter, things: Collection, request: pytest.FixtureRequest
) -> None:
    adapter.emulator_gap(
        request, "$set through a scalar silently replaces it with an object (no PathNotViable)"
    )
    await things.insert_one({"_id": "a", "n": 5})

    with pytest.raises(DocumentStoreError):
        await things.update_one({"_id": "a"}, set={"n.deeper": 1})
    assert await things.find_one({"_id": "a"}) == {"_id": "a", "n": 5}


@pytest.mark.parametrize(
    ("set", "unset"),
    [
        pytest.param({"_id": "b"}, (), id="set-id"),
        pytest.param({}, ["_id"], id="unset-id"),
        pytest.param({"a": 1, "a.b": 2}, (), id="parent-and-child"),
        pytest.param({"a": 1}, ["a"], id="set-and-unset"),
        pytest.param({}, (), id="nothing"),
        pytest.param({"a": object()}, (), id="non-json-value"),
    ],
)
async def test_invalid_updates_are_refused(
    things: Collection, set: dict[str, Any], unset: list[str]
) -> None:
    await things.insert_one({"_id": "a", "a": {"b": 0}})

    with pytest.raises((ValueError, TypeError)):
        await things.update_one({"_id": "a"}, set=set, unset=unset)
    assert await things.find({}) == [{"_id": "a", "a": {"b": 0}}]


async def test_increment_adds_to_an_existing_number(things: Collection) -> None:
    await things.insert_one({"_id": "a", "n": 5, "x": 1.5, "meta": {"hits": 2}})

    assert await things.update_one({"_id": "a"}, inc={"n": 3, "x": 1, "meta.hits": -2}) is True
    document = await things.find_one({"_id": "a"})
    assert document == {"_id": "a", "n": 8, "x": 2.5, "meta": {"hits": 0}}
    assert document is not None and type(document["n"]) is int


async def test_increment_of_a_missing_field_starts_from_zero(things: Collection) -> None:
    await things.insert_one({"_id": "a"})

    assert await things.update_one({"_id": "a"}, inc={"n": 1, "deep.count": 2}) is True
    assert await things.find_one({"_id": "a"}) == {"_id": "a", "n": 1, "deep": {"count": 2}}


async def test_increment_with_set_and_unset_in_one_update(things: Collection) -> None:
    await things.insert_one({"_id": "a", "n": 1, "seq": 3, "old": True})

    assert await things.update_one(
        {"_id": "a", "seq": {"$lt": 4}}, set={"seq": 4, "last": "x"}, unset=["old"], inc={"n": 1}
    )
    assert await things.find_one({"_id": "a"}) == {"_id": "a", "n": 2, "seq": 4, "last": "x"}
    # The filter no longer matches: neither the increment nor the assignment is applied.
    assert not await things.update_one(
        {"_id": "a", "seq": {"$lt": 4}}, set={"seq": 5}, inc={"n": 1}
    )
    assert await things.find_one({"_id": "a"}) == {"_id": "a", "n": 2, "seq": 4, "last": "x"}


async def test_increment_without_a_match_changes_nothing(things: Collection) -> None:
    await things.insert_one({"_id": "a", "n": 1})

    assert await things.update_one({"_id": "b"}, inc={"n": 1}) is False
    assert await things.update_one({"_id": "a", "n": 2}, inc={"n": 1}) is False
    assert await things.find({}) == [{"_id": "a", "n": 1}]


async def test_increment_of_a_value_that_is_no_number_is_refused(things: Collection) -> None:
    await things.insert_one({"_id": "a", "n": "five", "flag": True, "nothing": None, "m": 1})

    for field in ("n", "flag", "nothing"):
        with pytest.raises(DocumentStoreError):
            await things.update_one({"_id": "a"}, inc={field: 1, "m": 1})
    assert await things.find_one({"_id": "a"}) == {
        "_id": "a",
        "n": "five",
        "flag": True,
        "nothing": None,
        "m": 1,
    }


@pytest.mark.parametrize(
    ("set", "inc"),
    [
        pytest.param({}, {"n": "1"}, id="string-amount"),
        pytest.param({}, {"n": True}, id="bool-amount"),
        pytest.param({}, {"n": float("nan")}, id="nan-amount"),
        pytest.param({}, {"n": None}, id="no-amount"),
        pytest.param({}, {"_id": 1}, id="increment-id"),
        pytest.param({"n": 1}, {"n": 1}, id="set-and-increment"),
        pytest.param({}, {"a": 1, "a.b": 1}, id="parent-and-child"),
    ],
)
async def test_invalid_increments_are_refused(
    things: Collection, set: dict[str, Any], inc: dict[str, Any]
) -> None:
    await things.insert_one({"_id": "a", "n": 0})

    with pytest.raises((ValueError, TypeError)):
        await things.update_one({"_id": "a"}, set=set, inc=inc)
    assert await things.find({}) == [{"_id": "a", "n": 0}]


async def test_concurrent_increments_all_count(things: Collection) -> None:
    await things.insert_one({"_id": "a", "n": 0})

    matched = await asyncio.gather(
        *(things.update_one({"_id": "a"}, inc={"n": 1}) for _ in range(CONCURRENT_UPDATES))
    )

    assert all(matched)
    assert await things.find_one({"_id": "a"}) == {"_id": "a", "n": CONCURRENT_UPDATES}


async def test_update_many(things: Collection) -> None:
    await _insert_all(
        things, [{"_id": str(n), "n": n, "state": "new", "x": {"y": 0}} for n in range(5)]
    )

    updated = await things.update_many({"n": {"$gte": 2}}, set={"state": "old", "x.z": 1})

    assert updated == 3
    assert await ids(things, {"state": "old", "x.y": 0, "x.z": 1}) == ["2", "3", "4"]
    assert await ids(things, {"state": "new", "x.z": {"$exists": False}}) == ["0", "1"]
    assert await things.update_many({"n": 99}, set={"state": "gone"}) == 0


# -- replace ----------------------------------------------------------------------------------


async def test_replace_one_replaces_the_whole_document(things: Collection) -> None:
    await things.insert_one({"_id": "a", "n": 1, "old": True})

    replaced = await things.replace_one({"n": 1}, {"n": 2, "new": {"x": [1]}})

    assert replaced is True
    assert await things.find({}) == [{"_id": "a", "n": 2, "new": {"x": [1]}}]


async def test_replace_one_keeps_the_matched_id(things: Collection) -> None:
    await things.insert_one({"_id": "a", "n": 1})

    assert await things.replace_one({"n": 1}, {"_id": "other", "n": 2}) is True
    assert await things.find({}) == [{"_id": "a", "n": 2}]


async def test_replace_one_without_match(things: Collection) -> None:
    await things.insert_one({"_id": "a", "n": 1})

    assert await things.replace_one({"n": 9}, {"_id": "b", "n": 2}) is False
    assert await things.find({}) == [{"_id": "a", "n": 1}]


async def test_replace_one_upserts(things: Collection) -> None:
    assert await things.replace_one({"_id": "a"}, {"_id": "a", "n": 1}, upsert=True) is True
    assert await things.replace_one({"_id": "a"}, {"_id": "a", "n": 2}, upsert=True) is True
    assert await things.replace_one({"n": 7}, {"_id": "b", "n": 3}, upsert=True) is True
    assert await things.replace_one({"n": 3}, {"_id": "c", "n": 4}, upsert=True) is True

    assert sorted(await things.find({}), key=lambda doc: doc["_id"]) == [
        {"_id": "a", "n": 2},
        {"_id": "b", "n": 4},
    ]


async def test_upsert_needs_an_id(things: Collection) -> None:
    with pytest.raises(ValueError, match="_id"):
        await things.replace_one({"_id": "a"}, {"n": 1}, upsert=True)
    assert await things.count({}) == 0


async def test_upsert_onto_an_id_that_does_not_match_is_a_duplicate(
    adapter: Adapter, things: Collection, request: pytest.FixtureRequest
) -> None:
    adapter.emulator_gap(
        request,
        "an upsert whose filter pins an existing _id but does not match overwrites "
        "that document instead of raising E11000 duplicate key",
    )
    await things.insert_one({"_id": "a", "owner": "u1"})

    with pytest.raises(DuplicateKeyError):
        await things.replace_one(
            {"_id": "a", "owner": "u2"}, {"_id": "a", "owner": "u2"}, upsert=True
        )
    assert await things.find({}) == [{"_id": "a", "owner": "u1"}]


# -- delete -----------------------------------------------------------------------------------


async def test_delete_one_returns_the_document(things: Collection) -> None:
    await _insert_all(things, [{"_id": "a", "n": 1, "d": {"x": [1]}}, {"_id": "b", "n": 2}])

    deleted = await things.delete_one({"d.x": {"$exists": True}})

    assert deleted == {"_id": "a", "n": 1, "d": {"x": [1]}}
    assert await things.delete_one({"_id": "a"}) is None
    assert await things.find({}) == [{"_id": "b", "n": 2}]


async def test_delete_many(things: Collection) -> None:
    await _insert_all(things, [{"_id": str(n), "n": n} for n in range(6)])

    assert await things.delete_many({"n": {"$lt": 4}}) == 4
    assert await things.delete_many({"n": {"$lt": 4}}) == 0
    assert await ids(things, {}) == ["4", "5"]
    assert await things.delete_many({}) == 2
    assert await things.count({}) == 0


async def test_concurrent_delete_one_hands_each_document_out_once(things: Collection) -> None:
    await _insert_all(things, [{"_id": str(n), "queue": "q"} for n in range(10)])

    taken = await asyncio.gather(*(things.delete_one({"queue": "q"}) for _ in range(15)))

    handed_out = [doc["_id"] for doc in taken if doc is not None]
    assert sorted(handed_out) == sorted(str(n) for n in range(10))
    assert await things.count({}) == 0


# -- indexes ----------------------------------------------------------------------------------


async def test_unique_index_is_enforced(things: Collection) -> None:
    await things.ensure_index([("email", 1)], unique=True)
    await things.insert_one({"_id": "a", "email": "a@x"})
    await things.insert_one({"_id": "b", "email": "b@x"})

    with pytest.raises(DuplicateKeyError):
        await things.insert_one({"_id": "c", "email": "a@x"})
    with pytest.raises(DuplicateKeyError):
        await things.update_one({"_id": "b"}, set={"email": "a@x"})
    with pytest.raises(DuplicateKeyError):
        await things.replace_one({"_id": "b"}, {"email": "a@x"})
    assert await ids(things, {}) == ["a", "b"]
    assert await things.find_one({"_id": "b"}) == {"_id": "b", "email": "b@x"}


async def test_unique_index_on_a_dotted_compound_key(things: Collection) -> None:
    await things.ensure_index([("owner.id", 1), ("slot", 1)], unique=True)
    await things.insert_one({"_id": "a", "owner": {"id": "u1"}, "slot": 1})
    await things.insert_one({"_id": "b", "owner": {"id": "u1"}, "slot": 2})
    await things.insert_one({"_id": "c", "owner": {"id": "u2"}, "slot": 1})

    with pytest.raises(DuplicateKeyError):
        await things.insert_one({"_id": "d", "owner": {"id": "u1"}, "slot": 2})
    assert await things.count({}) == 3


async def test_descending_index_keys(
    adapter: Adapter, things: Collection, request: pytest.FixtureRequest
) -> None:
    adapter.emulator_gap(request, "index keys may only be ascending (TinyMongoNotSupportedError)")
    await things.ensure_index([("thread", 1), ("seq", -1)], unique=True)
    await _insert_all(things, [{"_id": str(n), "thread": "t", "seq": n} for n in range(3)])

    newest = await things.find({"thread": "t"}, sort=[("seq", -1)], limit=2)

    assert [doc["seq"] for doc in newest] == [2, 1]
    with pytest.raises(DuplicateKeyError):
        await things.insert_one({"_id": "x", "thread": "t", "seq": 1})


async def test_unique_index_allows_one_document_without_the_key(things: Collection) -> None:
    await things.ensure_index([("email", 1)], unique=True)
    await things.insert_one({"_id": "a"})

    with pytest.raises(DuplicateKeyError):
        await things.insert_one({"_id": "b"})
    with pytest.raises(DuplicateKeyError):
        await things.insert_one({"_id": "c", "email": None})
    assert await ids(things, {}) == ["a"]


async def test_unique_index_over_existing_duplicates_is_refused(things: Collection) -> None:
    await _insert_all(things, [{"_id": "a", "k": 1}, {"_id": "b", "k": 1}])

    with pytest.raises(DuplicateKeyError):
        await things.ensure_index([("k", 1)], unique=True)
    await things.insert_one({"_id": "c", "k": 1})  # no index was left behind
    assert await things.count({"k": 1}) == 3


async def test_ensure_index_is_idempotent(things: Collection) -> None:
    for _ in range(3):
        await things.ensure_index([("user_id", 1), ("thread_id", 1), ("seq", 1)])
        await things.ensure_index([("email", 1)], unique=True)
    await things.insert_one({"_id": "a", "user_id": "u", "thread_id": "t", "seq": 1, "email": "e"})

    assert await ids(things, {"user_id": "u", "thread_id": "t"}) == ["a"]
    with pytest.raises(DuplicateKeyError):
        await things.insert_one({"_id": "b", "email": "e"})


async def test_index_cannot_change_uniqueness(things: Collection) -> None:
    await things.ensure_index([("k", 1)])

    with pytest.raises(DocumentStoreError):
        await things.ensure_index([("k", 1)], unique=True)


@pytest.mark.parametrize(
    "keys",
    [
        pytest.param([], id="no-keys"),
        pytest.param([("k", 2)], id="bad-direction"),
        pytest.param([("k", 1), ("k", -1)], id="same-field-twice"),
    ],
)
async def test_invalid_index_keys_are_refused(things: Collection, keys: Any) -> None:
    with pytest.raises(ValueError, match="index"):
        await things.ensure_index(keys)


# -- store ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["", "Things", "1st", "with-dash", "a.b", "x" * 64, "sqlite_x"])
def test_invalid_collection_names_are_refused(adapter: Adapter, name: str) -> None:
    with pytest.raises(ValueError, match="collection name"):
        adapter.store.collection(name)


async def test_collections_are_separate(adapter: Adapter) -> None:
    first = adapter.store.collection("first")
    second = adapter.store.collection("order")  # an SQL keyword is a fine name
    await first.insert_one({"_id": "a", "n": 1})
    await second.insert_one({"_id": "a", "n": 2})

    assert await first.find({}) == [{"_id": "a", "n": 1}]
    assert await second.find({}) == [{"_id": "a", "n": 2}]
    assert first.name == "first"


async def test_ping(adapter: Adapter) -> None:
    await adapter.store.ping()


async def test_concurrent_inserts_all_land(things: Collection) -> None:
    await things.ensure_index([("n", 1)], unique=True)

    await asyncio.gather(
        *(things.insert_one({"_id": f"d{n}", "n": n}) for n in range(CONCURRENT_WRITES))
    )

    assert await things.count({}) == CONCURRENT_WRITES
    assert [doc["n"] for doc in await things.find({}, sort=[("n", 1)])] == list(
        range(CONCURRENT_WRITES)
    )


async def test_concurrent_updates_of_one_document_are_not_lost(things: Collection) -> None:
    await things.insert_one({"_id": "a"})

    await asyncio.gather(
        *(things.update_one({"_id": "a"}, set={f"f{n}": n}) for n in range(CONCURRENT_UPDATES))
    )

    document = await things.find_one({"_id": "a"})
    assert document == {"_id": "a", **{f"f{n}": n for n in range(CONCURRENT_UPDATES)}}


# -- SQLite only ------------------------------------------------------------------------------


async def test_sqlite_keeps_documents_and_indexes_across_reopen(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "dir" / "docs.db"
    store = await open_document_store(f"sqlite://{path}")
    things = store.collection("things")
    await things.ensure_index([("email", 1)], unique=True)
    await things.insert_one({"_id": "a", "email": "a@x", "tags": ["é"]})
    await store.close()

    reopened = await open_document_store(f"sqlite:///{path}")
    try:
        again = reopened.collection("things")
        assert await again.find({}) == [{"_id": "a", "email": "a@x", "tags": ["é"]}]
        with pytest.raises(DuplicateKeyError):
            await again.insert_one({"_id": "b", "email": "a@x"})
    finally:
        await reopened.close()


async def test_sqlite_cancelled_callers_leave_the_connection_consistent(tmp_path: Path) -> None:
    """Queries run on the connection's thread, writes by _id on the event loop: a caller
    cancelled while its query runs must not let another operation use the connection before
    that query has ended."""
    store = await SqliteDocumentStore.open(tmp_path / "docs.db")
    try:
        things = store.collection("things")
        await asyncio.gather(*(things.insert_one({"_id": f"d{n}", "n": n}) for n in range(50)))
        queries = [asyncio.create_task(things.count({"n": {"$gte": 0}})) for _ in range(20)]
        updates = [
            asyncio.create_task(things.update_one({"_id": f"d{n}"}, set={"seen": True}))
            for n in range(50)
        ]
        await asyncio.sleep(0)
        for task in queries[::2]:
            task.cancel()
        await asyncio.gather(*queries, *updates, return_exceptions=True)

        assert all(task.result() == 50 for task in queries[1::2])
        assert all(task.result() for task in updates)
        assert await things.count({"seen": True}) == 50
        await things.insert_one({"_id": "after"})
        assert await things.find_one({"_id": "after"}) == {"_id": "after"}
    finally:
        await store.close()


def size(path: Path) -> int:
    return path.stat().st_size


async def test_sqlite_checkpoints_on_its_own_thread_never_inside_a_write(tmp_path: Path) -> None:
    """Writes by _id run on the event loop: one that crossed SQLite's automatic checkpoint
    threshold would copy the write-ahead log into the file right there, stalling the loop.
    The store checkpoints on its own thread instead, so the log still reaches the file."""
    documents = [{"_id": f"d{n:05d}", "text": "x" * 400} for n in range(2_000)]  # ~1 MB

    path = tmp_path / "quiet.db"
    store = await SqliteDocumentStore.open(path, checkpoint_interval_s=3600.0)
    try:
        for document in documents:
            await store.collection("things").insert_one(document)
        # Everything is in the log; nothing was copied into the file by a commit.
        assert size(path) < 64 * 1024
        assert size(Path(f"{path}-wal")) > 800 * 1024
    finally:
        await store.close()

    path = tmp_path / "busy.db"
    store = await SqliteDocumentStore.open(path, checkpoint_interval_s=0.05)
    try:
        for document in documents:
            await store.collection("things").insert_one(document)
        async with asyncio.timeout(10):
            while size(path) < 800 * 1024:  # the store's own checkpoint
                await asyncio.sleep(0.05)
        assert await store.collection("things").count({}) == len(documents)
    finally:
        await store.close()


async def test_sqlite_queries_use_the_expression_indexes(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "docs.db"
    store = await SqliteDocumentStore.open(path)
    try:
        things = store.collection("things")
        await things.ensure_index([("user_id", 1), ("seq", 1)])
        await things.insert_one({"_id": "a", "user_id": "u", "seq": 1})
    finally:
        await store.close()

    from memoria_memory.docstore.filters import parse_filter
    from memoria_memory.docstore.sqlite_query import WhereClause, order_by

    where = WhereClause()
    sql = (
        f'SELECT id, doc FROM "things" WHERE {where.compile(parse_filter({"user_id": "u"}))} '
        f"ORDER BY {order_by([('seq', -1)])}"
    )
    db = sqlite3.connect(path)
    try:
        rows = db.execute("EXPLAIN QUERY PLAN " + sql, where.params).fetchall()
    finally:
        db.close()
    plan = " ".join(str(row[-1]) for row in rows)
    assert "USING INDEX things:user_id_1,seq_1" in plan
    assert "TEMP B-TREE" not in plan  # the index also provides the order


# -- a time window on memories (what search and listing filter by) -------------------------

DAY = datetime(2026, 11, 20, tzinfo=UTC)


def _told(user_id: str, memory_id: str, at: datetime) -> MemoryDocument:
    stamp = clock.stamp(at)
    return MemoryDocument.model_validate(
        {
            "_id": memory_id,
            "user_id": user_id,
            "memory_type": "preference",
            "content_kind": "text",
            "content": memory_id,
            "bindings": [memory_id],
            "state": "ready",
            "creation_datetime": stamp,
            "last_accessed": stamp,
            "updated_at": stamp,
        }
    )


@pytest.fixture
async def told(adapter: Adapter) -> MemoryRepository:
    """Memories of "ana" told the day before, at the start of, during and the day after
    ``DAY``, and one of "bo" told during it."""
    memories = MemoryRepository(adapter.store)  # no setup: the emulator has no -1 indexes
    for memory_id, at in [
        ("before", DAY - timedelta(microseconds=1)),
        ("start", DAY),
        ("noon", DAY + timedelta(hours=12)),
        ("after", DAY + timedelta(days=1)),
    ]:
        assert await memories.insert(_told("ana", memory_id, at))
    assert await memories.insert(_told("bo", "bos", DAY + timedelta(hours=12)))
    return memories


@pytest.mark.parametrize(
    ("window", "inside"),
    [
        (TimeWindow(DAY, DAY + timedelta(days=1)), ["noon", "start"]),
        (TimeWindow(since=DAY), ["after", "noon", "start"]),
        (TimeWindow(until=DAY), ["before"]),
        (TimeWindow(DAY + timedelta(hours=1), DAY + timedelta(hours=2)), []),
        (NO_WINDOW, ["after", "noon", "before", "start"]),
    ],
    ids=["day", "since", "until", "empty", "open"],
)
async def test_a_time_window_keeps_the_memories_told_inside_it(
    told: MemoryRepository, window: TimeWindow, inside: list[str]
) -> None:
    newest = await told.newest("ana", memory_type=None, limit=10, window=window)
    assert [m.id for m in newest] == sorted(inside, key=_order)
    everyone = ["before", "start", "noon", "after", "bos"]
    ready = await told.ready("ana", everyone, None, window)
    assert sorted(m.id for m in ready) == sorted(inside)


def _order(memory_id: str) -> int:
    """Newest first."""
    return ["after", "noon", "start", "before"].index(memory_id)


async def test_a_time_window_never_reaches_another_users_memories(
    told: MemoryRepository,
) -> None:
    window = TimeWindow(DAY, DAY + timedelta(days=1))
    assert [m.id for m in await told.newest("bo", memory_type=None, limit=10, window=window)] == [
        "bos"
    ]
    assert await told.ready("ana", ["bos"], None, window) == []


# -- factory ----------------------------------------------------------------------------------


async def test_factory_refuses_unknown_urls_without_echoing_them() -> None:
    with pytest.raises(ValueError, match="'postgres'") as raised:
        await open_document_store("postgres://user:secret@db/x")
    assert "secret" not in str(raised.value)
    with pytest.raises(ValueError, match="sqlite:///"):
        await open_document_store("sqlite://relative.db")


async def test_factory_opens_mongodb_lazily() -> None:
    store = await open_document_store("mongodb://127.0.0.1:1/somewhere")
    try:
        assert isinstance(store, MongoDocumentStore)
    finally:
        await store.close()


@pytest.mark.parametrize(
    ("url", "database"),
    [
        ("mongodb://h:27017", "memoria"),
        ("mongodb://h:27017/", "memoria"),
        ("mongodb://u:p@h1:1,h2:2/chat?replicaSet=rs", "chat"),
        ("mongodb+srv://cluster.example.net/prod?retryWrites=true", "prod"),
    ],
)
def test_database_name_comes_from_the_url_path(url: str, database: str) -> None:
    assert database_from_url(url) == database

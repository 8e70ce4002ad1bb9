"""A user's vectors held in process (``vectors.cached.HeldRows``): after any sequence of
upserts and deletes it holds exactly the rows a store would, and its search is the exact
nearest-first search over them."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memoria_memory.vectors.cached import HeldRows
from memoria_memory.vectors.port import VectorRow

DIM = 4
ROW_IDS = [f"r{index}" for index in range(12)]  # few ids, so writes often hit held ones

components = st.floats(min_value=-1.0, max_value=1.0, allow_nan=False, width=32)
vectors = st.lists(components, min_size=DIM, max_size=DIM)
rows = st.builds(
    VectorRow,
    id=st.sampled_from(ROW_IDS),
    memory_id=st.sampled_from(["mem_a", "mem_b", "mem_c"]),
    vector=vectors,
)
operations = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.lists(rows, max_size=5)),
        st.tuples(st.just("remove"), st.lists(st.sampled_from([*ROW_IDS, "unknown"]), max_size=4)),
    ),
    max_size=25,
)


@settings(max_examples=200, deadline=None)
@given(operations=operations, query=vectors, limit=st.integers(min_value=1, max_value=15))
def test_held_rows_match_a_plain_model_after_any_writes(
    operations: list[tuple[str, list[VectorRow] | list[str]]], query: list[float], limit: int
) -> None:
    held = HeldRows("v1", DIM)
    model: dict[str, VectorRow] = {}
    for kind, items in operations:
        if kind == "put":
            put = [item for item in items if isinstance(item, VectorRow)]
            held.put(put)
            model.update({row.id: row for row in put})  # the last of repeated ids wins
        else:
            removed = [item for item in items if isinstance(item, str)]
            held.remove(removed)
            for row_id in removed:
                model.pop(row_id, None)

    assert held.count == len(model)
    assert sorted(held.ids) == sorted(model)
    assert held.positions == {row_id: index for index, row_id in enumerate(held.ids)}
    for index, row_id in enumerate(held.ids):
        assert held.memory_ids[index] == model[row_id].memory_id
        assert held.matrix[index].tolist() == pytest.approx(list(model[row_id].vector))

    [hits] = held.search(np.asarray([query], dtype=np.float32), limit)
    expected = sorted(
        (
            float(np.dot(np.asarray(query, np.float32), np.asarray(row.vector, np.float32)))
            for row in model.values()
        ),
        reverse=True,
    )[:limit]
    assert [hit.score for hit in hits] == pytest.approx(expected, abs=1e-5)
    for hit in hits:
        assert hit.memory_id == model[hit.id].memory_id
        assert hit.score == pytest.approx(float(np.dot(query, model[hit.id].vector)), abs=1e-5)
    assert len({hit.id for hit in hits}) == len(hits)


def test_several_queries_give_one_nearest_first_list_each() -> None:
    held = HeldRows.of(
        "v1",
        2,
        [
            VectorRow("east", "mem_e", [1.0, 0.0]),
            VectorRow("north", "mem_n", [0.0, 1.0]),
            VectorRow("north-east", "mem_ne", [0.6, 0.8]),
        ],
    )

    by_north, by_east = held.search(np.asarray([[0.0, 1.0], [1.0, 0.0]], dtype=np.float32), 2)

    assert [hit.id for hit in by_north] == ["north", "north-east"]
    assert [hit.id for hit in by_east] == ["east", "north-east"]
    assert held.search(np.asarray([[0.0, 1.0]], dtype=np.float32), 10)[0][-1].id == "east"
    assert HeldRows("v1", 2).search(np.asarray([[1.0, 0.0]], dtype=np.float32), 3) == [[]]


def test_a_copy_made_in_one_go_has_no_slack_and_appends_after_it_are_amortised() -> None:
    """A copy from Milvus is sized exactly (the budget counts real rows); a held copy that
    grows doubles, and keeps its capacity when rows go."""
    made = HeldRows.of("v1", DIM, [VectorRow(f"r{i}", "mem", [0.5] * DIM) for i in range(100)])
    assert len(made.matrix) == 100

    made.put([VectorRow("r100", "mem", [0.1] * DIM)])
    assert len(made.matrix) == 200
    made.put([VectorRow(f"s{i}", "mem", [0.1] * DIM) for i in range(99)])
    assert len(made.matrix) == 200 and made.count == 200
    made.remove([f"s{i}" for i in range(99)])
    assert len(made.matrix) == 200 and made.count == 101
    assert made.matrix[100].tolist() == pytest.approx([0.1] * DIM)  # r100 kept its place

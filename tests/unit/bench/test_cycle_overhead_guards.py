"""The cycle-overhead bench's regression guards: multiples of the floor of the same run, the
search cycle's query embedding taken out as model time, and an absolute Finalize p95."""

from __future__ import annotations

from bench.cycle_overhead import guards
from bench.live_stack import Stats


def stat(name: str, p50: float, p95: float) -> Stats:
    return Stats(name, 10, p50, p95, p95, p50)


def run(*, finalize_p50: float, finalize_p95: float, search_p50: float) -> dict[str, Stats]:
    return {
        "cycle_finalize": stat("cycle_finalize", finalize_p50, finalize_p95),
        "cycle_search": stat("cycle_search", search_p50, search_p50 * 1.2),
        "floor_finalize": stat("floor_finalize", 2.0, 3.0),
        "floor_search": stat("floor_search", 3.0, 4.0),
        "rpc_embed": stat("rpc_embed", 9.0, 12.0),  # 8 ms of it the model
        "rpc_history": stat("rpc_history", 1.0, 2.0),
    }


def test_guards_hold_and_say_so_plainly() -> None:
    found = guards(run(finalize_p50=13.2, finalize_p95=16.0, search_p50=41.0))
    assert [guard.holds for guard in found] == [True, True, True]
    assert found[0].line() == "guard: Finalize p50 6.6× floor ≤ 10× — holds"
    # (41 - 8) / 3 = 11×: the query embedding is model time, not orchestration
    assert found[1].line() == (
        "guard: MemorySearch → Finalize p50 without the query embedding (8.0 ms) "
        "11.0× floor ≤ 15× — holds"
    )
    assert found[2].line() == "guard: Finalize p95 16.0 ms (bound set for 2 cores) ≤ 25 ms — holds"


def test_a_cycle_grown_costlier_than_the_guard_is_reported_broken() -> None:
    found = guards(run(finalize_p50=22.0, finalize_p95=30.0, search_p50=60.0))
    assert [guard.holds for guard in found] == [False, False, False]
    assert found[0].line() == "guard: Finalize p50 11.0× floor > 10× — BROKEN"
    assert found[1].line().endswith("17.3× floor > 15× — BROKEN")

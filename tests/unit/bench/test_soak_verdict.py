"""The soak's verdict (bench/soak.py): after the warm-up, RSS within 10 % per process,
pending entries bounded, no stream entry much older than the retention, p95 not drifting, no
error; and its report lines."""

from __future__ import annotations

from bench.soak import Report, verdict

USERS = 12
RETENTION_S = 300.0


def report(
    elapsed_s: float,
    *,
    valkey_mb: float = 100.0,
    p95_ms: float = 500.0,
    oldest_s: float = 300.0,
    pending: int = 0,
    errors: int = 0,
) -> Report:
    return Report(
        elapsed_s=elapsed_s,
        cycles=600,
        errors=errors,
        p50_ms=200.0,
        p95_ms=p95_ms,
        rss_mb={"valkey": valkey_mb, "memory": 240.0},
        valkey_used_mb=valkey_mb - 20,
        streams={
            "memoria:chat.out": (30_000, 20.0, oldest_s),
            "memoria:dead-letter": (3, 0.1, 86_400.0),  # kept for days: not judged by age
        },
        pending={"chat.out/memory-history": pending} if pending else {},
        keys={"step": (8000, 12.0)},
        loadavg="1.0 1.0 1.0",
        actions={"Finalize": 600},
    )


def held(checks: list[tuple[bool, str]], word: str) -> bool:
    [(ok, _)] = [(ok, line) for ok, line in checks if word in line]
    return ok


def test_a_flat_run_passes_every_check() -> None:
    reports = [report(300, valkey_mb=150), report(600), report(900), report(1200, valkey_mb=109)]
    checks = verdict(reports, warmup_s=600, users=USERS, retention_s=RETENTION_S)
    assert all(ok for ok, _ in checks), checks


def test_the_warm_up_is_left_out_and_growth_after_it_fails() -> None:
    reports = [report(300, valkey_mb=50), report(600), report(1200, valkey_mb=111)]
    checks = verdict(reports, warmup_s=600, users=USERS, retention_s=RETENTION_S)
    assert not held(checks, "RSS of valkey")
    assert held(checks, "RSS of memory")


def test_streams_pending_drift_and_errors_each_fail_alone() -> None:
    base = report(600)
    assert not held(verdict([base, report(900, oldest_s=361)], 600, USERS, RETENTION_S), "chat.out")
    assert held(verdict([base, report(900, oldest_s=360)], 600, USERS, RETENTION_S), "chat.out")
    assert not held(verdict([base, report(900, pending=49)], 600, USERS, RETENTION_S), "pending")
    assert held(verdict([base, report(900, pending=48)], 600, USERS, RETENTION_S), "pending")
    assert not held(verdict([base, report(900, p95_ms=751)], 600, USERS, RETENTION_S), "p95")
    assert held(verdict([base, report(900, p95_ms=750)], 600, USERS, RETENTION_S), "p95")
    assert not held(verdict([base, report(900, errors=1)], 600, USERS, RETENTION_S), "errors")


def test_a_run_too_short_to_judge_says_so() -> None:
    [(ok, line)] = verdict([report(300), report(600)], 600, USERS, RETENTION_S)
    assert not ok and "too short" in line


def test_a_report_prints_every_measure() -> None:
    text = "\n".join(report(600).lines())
    needles = ("cycles 600", "p95 500 ms", "valkey=100", "chat.out=30000/20.0MB/300s", "step=8000")
    for needle in needles:
        assert needle in text

"""The soak's short run, as CI runs it (`make soak` runs an hour): bench/soak.py against the
four services, many users saving, searching and chatting on the offline planner for a
minute, with a short stream retention so that the streams reach their steady length within
it. Every cycle ends without an error, each report measures every process, and the streams
and pending entries stay bounded. RSS growth is judged only by the long run: a minute is
warm-up."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).parents[2]
PROCESSES = {"valkey", "milvus", "gateway", "decision", "action-worker", "memory"}


@pytest.mark.timeout(420)
def test_a_minute_of_steady_load_keeps_streams_and_pending_entries_bounded(
    tmp_path: Path,
) -> None:
    reports_file = tmp_path / "soak.json"
    run = subprocess.run(
        [
            sys.executable,
            str(REPO / "bench" / "soak.py"),
            *("--minutes", "1", "--users", "6", "--rate", "3"),
            *("--report-seconds", "15", "--warmup-seconds", "15", "--retention-seconds", "10"),
            *("--json", str(reports_file)),
        ],
        capture_output=True,
        text=True,
        timeout=400,
        check=False,
    )
    output = run.stdout + run.stderr
    checks = [line for line in run.stdout.splitlines() if line.startswith(("PASS", "FAIL"))]
    assert checks, output
    judged = [c for c in checks if "RSS" not in c and "p95" not in c]
    assert all(c.startswith("PASS") for c in judged), "\n".join(checks) + "\n" + output[-3000:]
    reports = json.loads(reports_file.read_text())
    assert len(reports) >= 3
    for made in reports:
        assert set(made["rss_mb"]) == PROCESSES
        assert all(mb > 0 for mb in made["rss_mb"].values()), made["rss_mb"]
        assert made["cycles"] > 0 and made["errors"] == 0
    streams = reports[-1]["streams"]
    assert {"memoria:chat.in", "memoria:chat.out", "memoria:actions"} <= set(streams)

"""`memoria reembed` shows its progress like import and export: the migration's running
totals become steps of a progress display."""

from __future__ import annotations

import io

from memoria_memory.admin import ProgressFeed
from memoria_memory.reembed import ReembedProgress
from memoria_runtime.progress import PlainTracker


def test_running_totals_advance_the_display_by_what_was_done_since() -> None:
    now = [0.0]
    out = io.StringIO()
    tracker = PlainTracker(out, "re-embedding", "memories", 10, interval_s=1, clock=lambda: now[0])
    feed = ProgressFeed(tracker)
    now[0] = 1.0
    feed(ReembedProgress(total=10, migrated=3, failed=1, skipped=0))
    now[0] = 2.0
    feed(ReembedProgress(total=10, migrated=6, failed=1, skipped=1))
    assert tracker.done == 8
    assert out.getvalue().splitlines() == [
        "re-embedding: 4/10 memories, 4.0/s, about 2 s left",
        "re-embedding: 8/10 memories, 4.0/s, about 0 s left",
    ]

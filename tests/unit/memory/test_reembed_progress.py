"""`memoria reembed` shows its progress like import and export: the admin command reports the
migration's running totals, as steps, on the socket the CLI hands over."""

from __future__ import annotations

import json
import socket
import threading

from memoria_memory.progress_feed import ProgressSocket, RunningTotals


def test_running_totals_advance_the_display_by_what_was_done_since() -> None:
    steps: list[int] = []
    totals = RunningTotals(steps.append)
    totals(4)
    totals(8)
    totals(8)
    assert steps == [4, 4, 0]


def test_the_feed_sends_start_steps_and_end_then_waits_for_the_display_to_close() -> None:
    command, cli = socket.socketpair()
    feed = ProgressSocket(command)
    received: list[dict[str, object]] = []

    def display() -> None:
        with cli.makefile("rb") as lines:
            for line in lines:
                received.append(json.loads(line))
                if "end" in received[-1]:
                    cli.sendall(b"\n")
                    return

    reader = threading.Thread(target=display)
    reader.start()
    feed.start(10)
    feed.advance(4)
    feed.advance(0)  # nothing to show: not sent
    feed.advance(6)
    feed.end()
    reader.join(timeout=10)
    cli.close()
    assert received == [{"total": 10}, {"advance": 4}, {"advance": 6}, {"end": True}]


def test_a_display_gone_away_does_not_stop_the_command() -> None:
    command, cli = socket.socketpair()
    cli.close()
    feed = ProgressSocket(command)
    feed.start(3)
    feed.advance(3)
    feed.end()  # returns: nothing to wait for

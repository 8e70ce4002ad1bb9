"""`memoria reembed` draws the progress its admin command reports on a socket, and answers the
end only once its display is closed."""

from __future__ import annotations

import io
import socket
import threading

from memoria_cli.progress import relay


def test_the_reported_steps_are_shown_and_the_end_is_answered() -> None:
    ours, theirs = socket.socketpair()
    out = io.StringIO()
    shown = threading.Thread(target=relay, args=(ours, out, "re-embedding", "memories"))
    shown.start()
    theirs.sendall(b'{"total": 5}\n{"advance": 2}\nnot json\n{"advance": 3}\n{"end": true}\n')
    theirs.settimeout(10)
    assert theirs.recv(1) == b"\n"  # the display is closed: the command may print
    shown.join(timeout=10)
    assert not shown.is_alive()
    theirs.close()
    ours.close()


def test_a_command_that_exits_without_an_end_closes_the_display() -> None:
    ours, theirs = socket.socketpair()
    shown = threading.Thread(target=relay, args=(ours, io.StringIO(), "re-embedding", "memories"))
    shown.start()
    theirs.sendall(b'{"total": null}\n{"advance": 1}\n')
    theirs.close()
    shown.join(timeout=10)
    assert not shown.is_alive()
    ours.close()


def test_nothing_is_shown_for_a_command_that_never_starts() -> None:
    ours, theirs = socket.socketpair()
    out = io.StringIO()
    theirs.close()
    relay(ours, out, "re-embedding", "memories")
    assert out.getvalue() == ""
    ours.close()

"""Lines typed at the prompt, or read from a pipe or a file, without stopping the event
loop: the socket must keep answering the gateway's pings while someone types.

Each line is read in a daemon thread. A daemon thread never keeps the process alive, so
Ctrl-C (which cancels the event loop's task) exits at once even while a prompt waits; the
terminal settings that line editing changed are put back on the way out.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from typing import TextIO


def is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # closed, or not a real file
        return False


class LineReader:
    """``read`` returns the next line without its line break, or None at the end (EOF,
    Ctrl-D). On a terminal it prompts with ``input`` (line editing and history when the
    ``readline`` module is there); otherwise it reads ``stream`` and prints no prompt."""

    def __init__(self, stream: TextIO, *, prompt: bool) -> None:
        self._stream = stream
        self._prompt = prompt
        if prompt:
            with contextlib.suppress(ImportError):
                import readline  # noqa: F401  (importing it gives input() line editing)

    async def read(self, prompt: str) -> str | None:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[str | None] = loop.create_future()

        def deliver(line: str | None, error: BaseException | None) -> None:
            if done.done():  # nobody waits any more (the chat ended meanwhile)
                return
            if error is not None:
                done.set_exception(error)
            else:
                done.set_result(line)

        def work() -> None:
            line: str | None = None
            error: BaseException | None = None
            try:
                line = self._next(prompt)
            except Exception as exc:  # handed to the awaiting task, not lost in a thread
                error = exc
            with contextlib.suppress(RuntimeError):  # the loop is gone: we are exiting
                loop.call_soon_threadsafe(deliver, line, error)

        threading.Thread(target=work, name="memoria-chat-input", daemon=True).start()
        return await done

    def _next(self, prompt: str) -> str | None:
        if self._prompt:
            try:
                return input(prompt)
            except EOFError:  # Ctrl-D: end the prompt's line, as a shell does
                print()
                return None
        line = self._stream.readline()
        return line.rstrip("\r\n") if line else None


@contextlib.contextmanager
def terminal_kept(stream: TextIO) -> Iterator[None]:
    """Put the terminal's settings back afterwards: a prompt still waiting when the chat
    ends (Ctrl-C, a refused token) leaves it without echo otherwise."""
    if not is_terminal(stream):
        yield
        return
    import termios

    fd = stream.fileno()
    try:
        saved = termios.tcgetattr(fd)
    except termios.error:
        yield
        return
    try:
        yield
    finally:
        with contextlib.suppress(termios.error):
            termios.tcsetattr(fd, termios.TCSADRAIN, saved)

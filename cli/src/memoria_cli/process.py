"""One supervised child process: spawn it, relay its output, restart it, stop it."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import functools
import logging
import os
import signal
import sys
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from memoria_cli.console import Console
from memoria_cli.log_lines import LineReader, plain, python_line

ReadinessCheck = Callable[[], Awaitable[bool]]

BACKOFF_BASE_S = 0.5
BACKOFF_MAX_S = 30.0
# A child that stayed up this long was healthy: its next crash starts the backoff afresh.
STABLE_AFTER_S = 30.0
GRACE_PERIOD_S = 10.0
TAIL_LINES = 20
READ_CHUNK_BYTES = 64 * 1024
# A "line" that never ends (binary noise, a huge JSON blob) is cut into pieces of this size
# instead of growing the buffer without bound.
MAX_LINE_BYTES = 64 * 1024
# After a child exits, its pipe may stay open in a grandchild; do not wait for EOF forever.
DRAIN_TIMEOUT_S = 2.0
_MAX_EXPONENT = 60  # 2**60 * any sane base is far above any cap; avoids float overflow
_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


@dataclass(frozen=True)
class ProcessSpec:
    """What to run. ``env=None`` inherits the supervisor's environment.

    ``ready`` is polled after the start until it returns True; later specs wait for it.
    ``critical``: when True, a process that never gets ready aborts the whole start; when
    False the supervisor reports it and goes on. ``executable``, when given, is the program
    run and ``argv[0]`` only the name ``ps`` shows. ``read_line`` turns each line of its
    output into the text and level printed (by default: a Python process's logging).
    """

    name: str
    argv: Sequence[str]
    env: Mapping[str, str] | None = None
    cwd: Path | None = None
    ready: ReadinessCheck | None = None
    critical: bool = True
    color: str | None = None
    executable: str | None = None
    read_line: LineReader = python_line


def backoff_delay(restart: int, base: float = BACKOFF_BASE_S, cap: float = BACKOFF_MAX_S) -> float:
    """Delay before the ``restart``-th consecutive restart: base, 2×base, 4×base… up to cap."""
    if restart < 1:
        raise ValueError(f"restart numbers start at 1, got {restart}")
    return min(cap, base * 2.0 ** min(restart - 1, _MAX_EXPONENT))


@dataclass(frozen=True)
class RestartPolicy:
    base_delay: float = BACKOFF_BASE_S
    max_delay: float = BACKOFF_MAX_S
    stable_after: float = STABLE_AFTER_S

    def delay(self, restart: int) -> float:
        return backoff_delay(restart, self.base_delay, self.max_delay)


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _die_with_parent() -> Callable[[], None] | None:
    """Linux: have the kernel SIGTERM the child if the supervisor dies without stopping it
    (SIGKILL, OOM killer). Children live in their own session, so nothing else would."""
    if not sys.platform.startswith("linux"):
        return None
    prctl = _libc().prctl
    supervisor_pid = os.getpid()

    def preexec() -> None:  # runs in the forked child, before exec
        prctl(_PR_SET_PDEATHSIG, ctypes.c_ulong(signal.SIGTERM))
        if os.getppid() != supervisor_pid:  # the supervisor died before prctl took effect
            os._exit(1)

    return preexec


def _signal_group(process: asyncio.subprocess.Process, sig: signal.Signals) -> None:
    """Signal the child's whole process group, so its own children go too."""
    try:
        os.killpg(process.pid, sig)
    except ProcessLookupError:
        # The child left its group (or the group is gone): signal it alone.
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(sig)
    except PermissionError:
        pass


def describe_exit(code: int) -> str:
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"exited with code {code} ({signal.Signals(-code).name})"
    return f"exited with code {code}"


class SupervisedProcess:
    """Runs one spec until :meth:`stop`, restarting it with backoff whenever it exits."""

    def __init__(
        self, spec: ProcessSpec, console: Console, policy: RestartPolicy, grace_period: float
    ) -> None:
        self.spec = spec
        self.pid: int | None = None
        self.exits = 0
        self.last_exit: str | None = None
        self.tail: deque[str] = deque(maxlen=TAIL_LINES)
        self._level = logging.INFO  # of the last line that had one
        self._console = console
        self._policy = policy
        self._grace = grace_period
        self._stop = asyncio.Event()
        self._force = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    def start(self) -> None:
        self._task = asyncio.create_task(self._supervise(), name=f"supervise-{self.name}")

    async def stop(self) -> None:
        """SIGTERM, wait up to the grace period, SIGKILL; no restart afterwards."""
        self._stop.set()
        if self._task is not None:
            await self._task

    def force(self) -> None:
        """Skip the rest of the grace period: SIGKILL now (a second Ctrl-C)."""
        self._force.set()

    async def _supervise(self) -> None:
        loop = asyncio.get_running_loop()
        restarts = 0
        while not self._stop.is_set():
            started = loop.time()
            outcome = await self._run_once()
            if outcome is None or self._stop.is_set():
                return
            self.exits += 1
            self.last_exit = outcome
            if loop.time() - started >= self._policy.stable_after:
                restarts = 0
            restarts += 1
            delay = self._policy.delay(restarts)
            self._console.alert(f"{self.name} {outcome}; restart #{restarts} in {delay:.1f}s")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), delay)

    async def _run_once(self) -> str | None:
        """Run the child once. Returns why it ended, or None when it was stopped."""
        try:
            process = await asyncio.create_subprocess_exec(
                *self.spec.argv,
                env=None if self.spec.env is None else dict(self.spec.env),
                cwd=self.spec.cwd,
                executable=self.spec.executable,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,  # one pipe keeps stdout/stderr in order
                # Own session: a terminal's Ctrl-C (SIGINT to the foreground group) reaches
                # only the supervisor, which then stops the children in order.
                start_new_session=True,
                preexec_fn=_die_with_parent(),
            )
        except OSError as exc:
            return f"failed to start ({exc})"
        self.pid = process.pid
        self._console.report(f"{self.name} started (pid {process.pid})")
        assert process.stdout is not None  # stdout=PIPE
        pump = asyncio.create_task(self._pump(process.stdout))
        exited = asyncio.create_task(process.wait())
        stop = asyncio.create_task(self._stop.wait())
        try:
            await asyncio.wait({exited, stop}, return_when=asyncio.FIRST_COMPLETED)
            if not exited.done():
                await self._terminate(process, exited)
            code = await exited
        finally:
            stop.cancel()
            if process.returncode is None:  # cancelled from outside: never leave it running
                _signal_group(process, signal.SIGKILL)
        # Grandchildren the child left behind in its group.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        await self._drain(pump)
        self.pid = None
        if self._stop.is_set():
            if code == 0:
                self._console.report(f"{self.name} stopped")
            else:
                why = describe_exit(code)
                self._console.report(f"{self.name} stopped ({why})", logging.WARNING)
            return None
        return describe_exit(code)

    async def _terminate(
        self, process: asyncio.subprocess.Process, exited: asyncio.Task[int]
    ) -> None:
        self._console.report(f"stopping {self.name} (pid {process.pid})")
        _signal_group(process, signal.SIGTERM)
        force = asyncio.create_task(self._force.wait())
        await asyncio.wait(
            {exited, force}, timeout=self._grace, return_when=asyncio.FIRST_COMPLETED
        )
        force.cancel()
        if exited.done():
            return
        why = "forced to stop" if self._force.is_set() else f"still running after {self._grace:g}s"
        self._console.alert(f"{self.name} {why}; sending SIGKILL")
        _signal_group(process, signal.SIGKILL)
        await exited

    async def _pump(self, stream: asyncio.StreamReader) -> None:
        pending = b""
        while chunk := await stream.read(READ_CHUNK_BYTES):
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for raw in lines:
                self._emit(raw)
            while len(pending) > MAX_LINE_BYTES:
                self._emit(pending[:MAX_LINE_BYTES])
                pending = pending[MAX_LINE_BYTES:]
        if pending:
            self._emit(pending)

    def _emit(self, raw: bytes) -> None:
        text = plain(raw.decode("utf-8", errors="replace"))
        line = self.spec.read_line(text)
        if line is None:
            return
        self.tail.append(line.text)
        if line.level is not None:
            self._level = line.level
        self._console.line(self.name, self._level, line.text, self.spec.color)

    async def _drain(self, pump: asyncio.Task[None]) -> None:
        # On timeout wait_for cancels the pump: whatever a grandchild still writes is lost.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(pump, DRAIN_TIMEOUT_S)

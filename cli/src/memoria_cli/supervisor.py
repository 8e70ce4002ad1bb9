"""A small asyncio process supervisor: ordered start with readiness checks, prefixed output,
restart with backoff, ordered stop on SIGINT/SIGTERM/SIGHUP.

It knows nothing about Memoria; :mod:`memoria_cli.run` describes what to run.
See docs/adr/0003-process-supervisor.md for why this is not a library.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TextIO

from memoria_cli.console import PALETTE, Console
from memoria_cli.process import (
    BACKOFF_BASE_S,
    BACKOFF_MAX_S,
    GRACE_PERIOD_S,
    STABLE_AFTER_S,
    ProcessSpec,
    ReadinessCheck,
    RestartPolicy,
    SupervisedProcess,
    backoff_delay,
)

__all__ = [
    "BACKOFF_BASE_S",
    "BACKOFF_MAX_S",
    "EXIT_OK",
    "EXIT_STARTUP_FAILED",
    "GRACE_PERIOD_S",
    "READY_TIMEOUT_S",
    "STABLE_AFTER_S",
    "NotReadyError",
    "ProcessSpec",
    "ReadinessCheck",
    "RestartPolicy",
    "StartupError",
    "Supervisor",
    "backoff_delay",
]

READY_TIMEOUT_S = 60.0
READY_POLL_S = 0.2
PROBE_TIMEOUT_S = 5.0
EXIT_OK = 0
EXIT_STARTUP_FAILED = 1
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class StartupError(Exception):
    """Something the user must fix before the processes can start; the message says what."""


class NotReadyError(StartupError):
    """A critical process did not pass its readiness check in time."""


class Supervisor:
    """Starts ``specs`` in order and keeps them running until a stop signal.

    ``run()`` returns :data:`EXIT_OK` after a requested stop and :data:`EXIT_STARTUP_FAILED`
    when a critical process never got ready. A second stop request SIGKILLs what is left.
    """

    def __init__(
        self,
        specs: Sequence[ProcessSpec],
        *,
        label: str = "supervisor",
        output: TextIO | None = None,
        color: bool | None = None,
        ready_timeout: float = READY_TIMEOUT_S,
        grace_period: float = GRACE_PERIOD_S,
        restart_policy: RestartPolicy | None = None,
        on_started: Callable[[], None] | None = None,
        handle_signals: bool = True,
    ) -> None:
        names = [spec.name for spec in specs]
        if len(set(names)) != len(names):
            raise ValueError(f"process names must be unique: {names}")
        self._specs = [
            spec if spec.color is not None else replace(spec, color=PALETTE[index % len(PALETTE)])
            for index, spec in enumerate(specs)
        ]
        self.console = Console(output or sys.stdout, names, label=label, color=color)
        self._ready_timeout = ready_timeout
        self._grace = grace_period
        self._policy = restart_policy or RestartPolicy()
        self._on_started = on_started
        self._handle_signals = handle_signals
        self._children: list[SupervisedProcess] = []
        self._stop_requested = asyncio.Event()

    @property
    def pids(self) -> dict[str, int | None]:
        """Name -> pid of the running child (None between a crash and its restart)."""
        return {child.name: child.pid for child in self._children}

    def request_stop(self) -> None:
        """Begin the ordered stop; when already stopping, SIGKILL what is left."""
        if self._stop_requested.is_set():
            self.console.alert("second stop request: killing every process now")
            for child in self._children:
                child.force()
            return
        self._stop_requested.set()

    async def run(self) -> int:
        installed = self._install_signal_handlers()
        try:
            return await self._run_until_stopped()
        finally:
            await self._stop_all()
            loop = asyncio.get_running_loop()
            for sig in installed:
                loop.remove_signal_handler(sig)

    async def _run_until_stopped(self) -> int:
        startup = asyncio.create_task(self._start_all(), name="supervisor-start")
        stop = asyncio.create_task(self._stop_requested.wait(), name="supervisor-stop")
        try:
            await asyncio.wait({startup, stop}, return_when=asyncio.FIRST_COMPLETED)
            if not startup.done():  # stopped while still starting
                startup.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await startup
                return EXIT_OK
            try:
                startup.result()
            except NotReadyError as exc:
                for line in str(exc).splitlines():
                    self.console.alert(line)
                return EXIT_STARTUP_FAILED
            if self._on_started is not None:
                self._on_started()
            await stop
            return EXIT_OK
        finally:
            stop.cancel()
            if not startup.done():
                startup.cancel()

    async def _start_all(self) -> None:
        for spec in self._specs:
            child = SupervisedProcess(spec, self.console, self._policy, self._grace)
            self._children.append(child)
            child.start()
            if spec.ready is not None:
                await self._await_ready(child, spec.ready)
        self.console.report(f"all processes started ({len(self._children)})")

    async def _await_ready(self, child: SupervisedProcess, check: ReadinessCheck) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._ready_timeout
        problem = "it was never running long enough to be checked"
        while True:
            if child.pid is not None:  # never ask a stranger on our port whether we are up
                try:
                    if await asyncio.wait_for(check(), PROBE_TIMEOUT_S):
                        self.console.report(f"{child.name} is ready")
                        return
                    problem = "the readiness check said not ready"
                except Exception as exc:  # any failure of a probe just means "not yet"
                    problem = f"last check: {type(exc).__name__}: {exc}".rstrip(": ")
            if loop.time() >= deadline:
                break
            await asyncio.sleep(READY_POLL_S)
        message = self._not_ready_message(child, problem)
        if child.spec.critical:
            raise NotReadyError(message)
        self.console.alert(message.splitlines()[0] + "; going on without it")

    def _not_ready_message(self, child: SupervisedProcess, problem: str) -> str:
        lines = [f"{child.name} did not become ready within {self._ready_timeout:g}s ({problem})"]
        if child.exits:
            lines.append(f"{child.name} ended {child.exits} time(s), last: {child.last_exit}")
        lines.append(f"last output of {child.name}:")
        lines.extend(f"    {text}" for text in child.tail)
        if not child.tail:
            lines.append("    (no output)")
        return "\n".join(lines)

    async def _stop_all(self) -> None:
        if not self._children:
            return
        self._stop_requested.set()
        self.console.report("stopping all processes (press Ctrl-C again to kill them)")
        # Reverse start order: what depends on others stops before what it depends on.
        for child in reversed(self._children):
            await child.stop()
        self.console.report("all processes stopped")

    def _install_signal_handlers(self) -> list[signal.Signals]:
        if not self._handle_signals:
            return []
        loop = asyncio.get_running_loop()
        for sig in STOP_SIGNALS:
            loop.add_signal_handler(sig, self._on_signal, sig)
        return list(STOP_SIGNALS)

    def _on_signal(self, sig: signal.Signals) -> None:
        if not self._stop_requested.is_set():
            self.console.report(f"received {sig.name}")
        self.request_stop()

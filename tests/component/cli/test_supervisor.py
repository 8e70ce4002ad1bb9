"""The process supervisor behind `memoria run`, driven with small throwaway child programs.

No timing assertions: every wait is on a condition, with a generous timeout.
"""

from __future__ import annotations

import asyncio
import io
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from memoria_cli.supervisor import (
    EXIT_OK,
    EXIT_STARTUP_FAILED,
    ProcessSpec,
    RestartPolicy,
    Supervisor,
    backoff_delay,
)

WAIT_S = 30.0
DEMO = Path(__file__).with_name("supervisor_demo.py")
SLEEPER = "import time\nwhile True: time.sleep(0.05)"


def python(code: str, *args: str) -> list[str]:
    return [sys.executable, "-c", code, *args]


def is_running(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie waiting for a reaper."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:  # no /proc (macOS): fall back to a null signal
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return stat.rpartition(")")[2].split()[0] != "Z"


def wait_until(condition: Callable[[], bool], what: str, timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


async def async_wait_until(
    condition: Callable[[], bool], what: str, timeout: float = WAIT_S
) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


class Run:
    """A supervisor running in this event loop, writing to a string buffer."""

    def __init__(self, supervisor: Supervisor, output: io.StringIO) -> None:
        self.supervisor = supervisor
        self.output = output
        self.task = asyncio.create_task(supervisor.run())

    @property
    def text(self) -> str:
        return self.output.getvalue()

    async def wait_for(self, pattern: str, timeout: float = WAIT_S) -> re.Match[str]:
        compiled = re.compile(pattern, re.M)
        await async_wait_until(
            lambda: compiled.search(self.text) is not None or self.task.done(),
            repr(pattern),
            timeout,
        )
        found = compiled.search(self.text)
        assert found is not None, f"{pattern!r} not in output:\n{self.text}"
        return found

    async def stop(self) -> int:
        self.supervisor.request_stop()
        return await asyncio.wait_for(self.task, WAIT_S)


@asynccontextmanager
async def supervising(specs: list[ProcessSpec], **options: Any) -> AsyncIterator[Run]:
    output = io.StringIO()
    supervisor = Supervisor(specs, output=output, color=False, handle_signals=False, **options)
    run = Run(supervisor, output)
    try:
        yield run
    finally:
        if not run.task.done():
            await run.stop()


# -- output ---------------------------------------------------------------------------------


async def test_every_line_from_stdout_and_stderr_is_prefixed_with_the_name() -> None:
    talker = python(
        "import sys, time\n"
        "print('first out', flush=True)\n"
        "print('first err', file=sys.stderr, flush=True)\n"
        "print('second out\\nthird out', flush=True)\n"
        "while True: time.sleep(0.05)"
    )
    specs = [ProcessSpec("talker", talker), ProcessSpec("a-longer-name", python(SLEEPER))]
    async with supervising(specs) as run:
        await run.wait_for("third out")
        assert await run.stop() == EXIT_OK
    width = len("a-longer-name")
    for text in ("first out", "first err", "second out", "third out"):
        assert f" INFO    {'talker'.ljust(width)} | {text}\n" in run.text


async def test_a_line_longer_than_any_buffer_does_not_break_the_reader() -> None:
    huge = 1_000_000
    code = (
        f"import sys, time\nsys.stdout.write('x' * {huge} + '\\n')\n"
        "print('after the long line', flush=True)\nwhile True: time.sleep(0.05)"
    )
    async with supervising([ProcessSpec("noisy", python(code))]) as run:
        await run.wait_for(r"^\S+ INFO +noisy +\| after the long line$")
    relayed = sum(
        line.count("x") for line in run.text.splitlines() if re.match(r"\S+ INFO +noisy +\|", line)
    )
    assert relayed == huge


# -- readiness -------------------------------------------------------------------------------


async def test_the_next_process_starts_only_once_the_previous_one_is_ready(
    tmp_path: Path,
) -> None:
    flag = tmp_path / "ready"
    slow = python(
        "import pathlib, sys, time\n"
        "time.sleep(0.5)\n"
        "pathlib.Path(sys.argv[1]).touch()\n"
        "while True: time.sleep(0.05)",
        str(flag),
    )

    async def flag_exists() -> bool:
        return flag.exists()

    specs = [
        ProcessSpec("slow", slow, ready=flag_exists),
        ProcessSpec("next", python(SLEEPER)),
    ]
    async with supervising(specs) as run:
        await run.wait_for(r"all processes started \(2\)")
    assert run.text.index("slow is ready") < run.text.index("next started")


async def test_a_process_that_never_gets_ready_fails_the_start_with_its_last_output() -> None:
    broken = python(
        "import time\nprint('loading config', flush=True)\n"
        "print('config file /etc/x.toml is missing', flush=True)\n"
        "while True: time.sleep(0.05)"
    )

    async def refuses() -> bool:
        raise ConnectionRefusedError("nobody listens")

    specs = [
        ProcessSpec("broken", broken, ready=refuses),
        ProcessSpec("never", python(SLEEPER)),
    ]
    async with supervising(specs, ready_timeout=1.0) as run:
        pids: list[int] = []
        await run.wait_for(r"broken started")
        pids.append(int(re.findall(r"broken started \(pid (\d+)\)", run.text)[0]))
        assert await asyncio.wait_for(run.task, WAIT_S) == EXIT_STARTUP_FAILED
    assert "broken did not become ready within 1s" in run.text
    assert "ConnectionRefusedError: nobody listens" in run.text
    assert "config file /etc/x.toml is missing" in run.text.split("last output of broken:")[1]
    assert "never started" not in run.text
    assert not any(is_running(pid) for pid in pids)


async def test_a_process_that_is_not_critical_does_not_stop_the_start() -> None:
    async def never() -> bool:
        return False

    specs = [
        ProcessSpec("optional", python(SLEEPER), ready=never, critical=False),
        ProcessSpec("main", python(SLEEPER)),
    ]
    async with supervising(specs, ready_timeout=0.5) as run:
        await run.wait_for(r"all processes started \(2\)")
    assert "optional did not become ready within 0.5s" in run.text


async def test_a_stop_during_the_start_stops_what_was_started() -> None:
    async def never() -> bool:
        return False

    async with supervising([ProcessSpec("waiting", python(SLEEPER), ready=never)]) as run:
        found = await run.wait_for(r"waiting started \(pid (\d+)\)")
        assert await run.stop() == EXIT_OK
    assert not is_running(int(found.group(1)))


# -- restarts --------------------------------------------------------------------------------


def test_backoff_doubles_from_the_base_and_is_capped() -> None:
    delays = [backoff_delay(n, base=0.5, cap=30.0) for n in range(1, 11)]
    assert delays == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0, 30.0]
    assert backoff_delay(10_000, base=0.5, cap=30.0) == 30.0
    assert RestartPolicy(base_delay=1.0, max_delay=5.0).delay(4) == 5.0
    with pytest.raises(ValueError, match="start at 1"):
        backoff_delay(0)


async def test_a_crashing_process_is_restarted_with_growing_delays_and_reported() -> None:
    crasher = python("import sys\nprint('crasher running', flush=True)\nsys.exit(3)")
    policy = RestartPolicy(base_delay=0.1, max_delay=0.4)
    async with supervising([ProcessSpec("crasher", crasher)], restart_policy=policy) as run:
        await run.wait_for(r"restart #4 ")
    assert "crasher exited with code 3; restart #1 in 0.1s" in run.text
    assert "crasher exited with code 3; restart #2 in 0.2s" in run.text
    assert "crasher exited with code 3; restart #3 in 0.4s" in run.text
    assert "crasher exited with code 3; restart #4 in 0.4s" in run.text
    assert len(re.findall(r"^\S+ INFO +crasher +\| crasher running$", run.text, re.M)) >= 4


async def test_the_backoff_starts_afresh_after_a_process_stayed_up() -> None:
    crasher = python("import sys\nsys.exit(1)")
    policy = RestartPolicy(base_delay=0.1, max_delay=10.0, stable_after=0.0)
    async with supervising([ProcessSpec("flaky", crasher)], restart_policy=policy) as run:
        await async_wait_until(lambda: run.text.count("flaky exited") >= 3, "3 exits")
    assert "restart #2" not in run.text
    assert run.text.count("flaky exited with code 1; restart #1 in 0.1s") >= 3


async def test_a_killed_process_is_reported_with_its_signal() -> None:
    async with supervising([ProcessSpec("victim", python(SLEEPER))]) as run:
        found = await run.wait_for(r"victim started \(pid (\d+)\)")
        os.kill(int(found.group(1)), signal.SIGKILL)
        await run.wait_for(r"victim exited with code -9 \(SIGKILL\); restart #1 in 0.5s")
        await async_wait_until(lambda: run.text.count("victim started") >= 2, "a restart")


async def test_a_missing_program_is_reported_and_retried() -> None:
    policy = RestartPolicy(base_delay=0.1, max_delay=0.1)
    missing = [str(Path("/nonexistent/program"))]
    async with supervising([ProcessSpec("ghost", missing)], restart_policy=policy) as run:
        await run.wait_for(r"restart #2 ")
    assert "ghost failed to start (" in run.text


# -- stopping: the supervisor as its own process ---------------------------------------------


class Demo:
    """tests/component/cli/supervisor_demo.py running as a process, its output collected."""

    def __init__(self, grace: float, *children: str, new_session: bool = False) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(DEMO), str(grace), *children],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "NO_COLOR": "1"},
            # Like a job in a terminal: its own process group, where Ctrl-C is delivered.
            start_new_session=new_session,
        )
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    def wait_for(self, text: str) -> None:
        wait_until(lambda: text in self.text or self.process.poll() is not None, repr(text))
        assert text in self.text, self.text

    def pids(self) -> dict[str, int]:
        return {m[0]: int(m[1]) for m in re.findall(r"(\S+) started \(pid (\d+)\)", self.text)}

    def finish(self) -> int:
        try:
            return self.process.wait(WAIT_S)
        finally:
            if self.process.poll() is None:
                self.process.kill()

    def order(self, *texts: str) -> list[int]:
        return [self.text.index(text) for text in texts]


@pytest.fixture
def demos() -> Iterator[list[Demo]]:
    started: list[Demo] = []
    yield started
    for demo in started:
        if demo.process.poll() is None:
            demo.process.kill()
            demo.process.wait()
        for pid in demo.pids().values():
            if is_running(pid):
                os.kill(pid, signal.SIGKILL)


def test_sigterm_stops_the_children_in_reverse_order_and_leaves_none(
    demos: list[Demo],
) -> None:
    demo = Demo(5.0, "first:polite", "second:polite", "third:polite")
    demos.append(demo)
    demo.wait_for("all processes started (3)")
    for name in ("first", "second", "third"):
        demo.wait_for(f"{name} up")  # its signal handler is in place
    pids = demo.pids()
    assert set(pids) == {"first", "second", "third"}

    demo.process.send_signal(signal.SIGTERM)
    assert demo.finish() == EXIT_OK, demo.text
    stops = demo.order("stopping third", "stopping second", "stopping first")
    assert stops == sorted(stops), demo.text
    received = demo.order("third got SIGTERM", "second got SIGTERM", "first got SIGTERM")
    assert received == sorted(received), demo.text
    assert "all processes stopped" in demo.text
    assert not [name for name, pid in pids.items() if is_running(pid)]


def test_ctrl_c_reaches_only_the_supervisor_which_stops_everything_in_order(
    demos: list[Demo],
) -> None:
    demo = Demo(5.0, "first:polite", "second:polite", new_session=True)
    demos.append(demo)
    demo.wait_for("all processes started (2)")
    for name in ("first", "second"):
        demo.wait_for(f"{name} up")
    pids = demo.pids()

    os.killpg(demo.process.pid, signal.SIGINT)  # what a terminal does on Ctrl-C
    assert demo.finish() == EXIT_OK, demo.text
    assert "got SIGINT" not in demo.text, "a child received the terminal's SIGINT"
    assert "received SIGINT" in demo.text
    stops = demo.order("second got SIGTERM", "first got SIGTERM")
    assert stops == sorted(stops), demo.text
    assert not [name for name, pid in pids.items() if is_running(pid)]


def test_a_child_that_ignores_sigterm_is_killed_after_the_grace_period(
    demos: list[Demo],
) -> None:
    demo = Demo(0.5, "polite:polite", "stubborn:stubborn")
    demos.append(demo)
    demo.wait_for("all processes started (2)")
    for name in ("polite", "stubborn"):
        demo.wait_for(f"{name} up")
    pids = demo.pids()

    demo.process.send_signal(signal.SIGTERM)
    assert demo.finish() == EXIT_OK, demo.text
    assert "stubborn got SIGTERM" in demo.text
    assert "stubborn still running after 0.5s; sending SIGKILL" in demo.text
    assert "stubborn stopped (exited with code -9 (SIGKILL))" in demo.text
    assert "polite stopped\n" in demo.text
    assert not [name for name, pid in pids.items() if is_running(pid)]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux")
def test_children_do_not_outlive_a_supervisor_killed_with_sigkill(demos: list[Demo]) -> None:
    demo = Demo(5.0, "orphan:polite")
    demos.append(demo)
    demo.wait_for("orphan up")
    pid = demo.pids()["orphan"]

    demo.process.kill()
    demo.process.wait(WAIT_S)
    wait_until(lambda: not is_running(pid), "the orphan to die")

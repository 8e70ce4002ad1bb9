"""What the abuse suites share: a stack whose four services each answer probes on an ops
port (so "the services stay up" can be checked service by service), the documented error
codes, and hypothesis settings fit for a 2-core CI machine.

Every module starts one stack of its own (module scope) on a Valkey database no other suite
uses; user names carry a per-run prefix so that vectors left in the session's shared
milvus-lite by another module never meet these tests' users."""

from __future__ import annotations

import asyncio
import uuid
from asyncio import FIRST_COMPLETED
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

import httpx
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from stack import SERVICES, Stack, free_port, running_stack
from ws_client import ChatClient, Frame

DOCUMENTED_ERROR_CODES: Final = frozenset(
    {
        "invalid_frame",
        "too_large",
        "unauthorized",
        "broker_unavailable",
        "rate_limited",
        "too_many_connections",
        "not_found",
        "unavailable",
    }
)
"""The error frame codes of docs/protocol.md ("Codes: ...")."""

# Characters that break naive text handling: bidi controls (RTL override, isolates, marks),
# zero-width ones, BOM, NUL and other C0/C1 controls, line/paragraph separators, combining
# marks (one alone, many stacked), variation selectors, emoji with ZWJ and skin tones,
# astral-plane characters, non-characters, Hangul fillers, an ideographic space.
ODD_CHARACTERS: Final = (
    "\u202e\u202d\u202a\u202b\u202c\u2066\u2067\u2068\u2069\u200e\u200f\u061c"
    "\u200b\u200c\u200d\u2060\ufeff\u00ad"
    "\x00\x01\x07\x08\x0b\x0c\x1b\x7f\x80\x85\x9f"
    "\u2028\u2029\r\n\t"
    "\u0301\u0308\u20dd\u0489\u0f39\u1ab0\u035c"
    "\ufe0f\ufe0e\U000e0100"
    "\U0001f469\u200d\U0001f4bb\U0001f3fd\U0001f1e7\U0001f1f7\U0001f600\U0001faf6"
    "\U0001d54f\U00020000\U0010fffd\ufffd\uffff\ufdd0\U0001fffe"
    "\u3164\u115f\u3000"
    "\u05d0\u05d1\u0627\u0644\u0639\u0631\u0628\u064a\u0629"
    "a Z 9 . -"
)

json_scalars: st.SearchStrategy[Any] = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=16)
)
json_values: st.SearchStrategy[Any] = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
odd_text: st.SearchStrategy[str] = st.text(
    alphabet=st.sampled_from(ODD_CHARACTERS) | st.characters(), max_size=120
)


PROBE_PATHS: Final = ("/livez", "/readyz")
REPLY_TIMEOUT_S: Final = 15.0

# Fixed seeds and no example database: a CI run repeats exactly, and nothing is written
# into the working tree. The examples a test needs are counted per test (max_examples).
FUZZ: Final = settings(
    deadline=None,  # one example is a network round trip through four processes
    derandomize=True,
    database=None,
    print_blob=True,
    # The tests' function-scoped fixtures (a user and its token, an HTTP client) are meant
    # to be shared by every example: nothing in them is reset between examples on purpose.
    # Large generated values (huge frames) are part of what is tested, not a mistake.
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
    ],
)


def a_user(role: str = "u") -> str:
    """A user id nobody else in the session has (matches ``^[A-Za-z0-9._@-]{1,64}$``)."""
    return f"abuse-{role}-{uuid.uuid4().hex[:10]}"


@contextmanager
def abuse_stack(
    valkey_server: Any,
    milvus_server: Any,
    tmp_path_factory: pytest.TempPathFactory,
    *,
    name: str,
    db: int,
    script: Mapping[str, Any],
    **settings_: str,
) -> Iterator[Stack]:
    """The four services against the session's Valkey (database ``db``) and milvus-lite, each
    with its own ops port (``/livez``, ``/readyz``)."""
    redis_url = f"redis://127.0.0.1:{valkey_server.port}/{db}"
    settings_.setdefault("shutdown_grace_seconds", "2")  # a quick teardown
    data_dir: Path = tmp_path_factory.mktemp(name)
    with running_stack(
        redis_url,
        milvus_server.uri,
        data_dir,
        script,
        service_settings={service: {"metrics_port": str(free_port())} for service in SERVICES},
        **settings_,
    ) as stack:
        stack.wait_ready(actions=6)
        yield stack


def ops_url(stack: Stack, service: str) -> str:
    return f"http://127.0.0.1:{stack.service_env[service]['MEMORIA_METRICS_PORT']}"


def assert_services_up(stack: Stack) -> None:
    """Every process still runs (none crashed and was left dead) and every service answers
    its probes; the gateway on its own port too."""
    for name, process in stack.processes.items():
        assert process.poll() is None, (
            f"{name} exited with {process.returncode}:\n" + (stack.logs(name)[-4000:])
        )
    bases = [stack.base_url] + [ops_url(stack, s) for s in SERVICES if s in stack.service_env]
    for base in bases:
        for path in PROBE_PATHS:
            response = httpx.get(base + path, timeout=10.0)
            assert response.status_code == 200, (base, path, response.text)
            assert response.json()["status"] == "ok"


def no_tracebacks(stack: Stack, *names: str) -> None:
    """No unhandled exception was logged by these services (a 500 or a socket torn down by an
    exception leaves a traceback in the log even when the answer looks fine)."""
    for name in names or tuple(SERVICES):
        log = stack.logs(name)
        assert "Traceback (most recent call last)" not in log, f"{name}:\n{log[-6000:]}"


async def reply_to(client: ChatClient, raw: str | bytes, timeout: float = REPLY_TIMEOUT_S) -> Frame:
    """Send a raw frame and return the reply (``accepted`` or ``error``); fail at once, with
    the close code, when the gateway closes the socket instead of answering."""
    await client.connection.send(raw)
    replies = client._replies
    reader = client._reader
    waiting = asyncio.ensure_future(replies.get())
    done, _ = await asyncio.wait({waiting, reader}, timeout=timeout, return_when=FIRST_COMPLETED)
    if waiting in done:
        return waiting.result()
    waiting.cancel()
    if reader in done:
        close = client.connection.close_code, client.connection.close_reason
        raise AssertionError(f"the socket was closed instead of answering: {close}")
    raise TimeoutError(f"no reply within {timeout} s")


async def config_reply(client: ChatClient, raw: str, timeout: float = REPLY_TIMEOUT_S) -> Frame:
    """The answer to a ``session_config`` frame: a ``session_config`` frame, or an error
    (taken off the reply queue too, so that the next send is not answered by it)."""
    seen = len(client.frames)
    await client.connection.send(raw)
    async with client._arrived:
        while not any(f["type"] in {"session_config", "error"} for f in client.frames[seen:]):
            await asyncio.wait_for(client._arrived.wait(), timeout)
    reply = next(f for f in client.frames[seen:] if f["type"] in {"session_config", "error"})
    if reply["type"] == "error":
        assert client._replies.get_nowait() == reply
    return reply

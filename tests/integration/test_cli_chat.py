"""`memoria chat` as a user runs it: the real command in a subprocess, its standard input a
script, against the broker and the four services (offline planner, no model)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from stack import Stack, running_stack

pytestmark = pytest.mark.integration

MEMORIA = Path(sys.executable).parent / "memoria"
OFFLINE_BADGE = "[offline · no model]"
WAIT_S = 120.0  # a deadline against hanging, not a measurement


@pytest.fixture(scope="module")
def stack(
    valkey_server: Any, milvus_server: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    redis_url = f"redis://127.0.0.1:{valkey_server.port}/8"
    data_dir: Path = tmp_path_factory.mktemp("cli-chat-stack")
    with running_stack(
        redis_url, milvus_server.uri, data_dir, {"rules": []}, llm_provider="offline"
    ) as running:
        running.wait_ready(actions=6)
        yield running


def cli_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORIA_")}
    env["COLUMNS"] = "200"  # wide enough that no table cell wraps an id
    return env


def memories_of(stack: Stack, user: str) -> list[dict[str, Any]]:
    response = httpx.get(
        f"{stack.base_url}/api/memories",
        headers={"Authorization": f"Bearer {stack.token(user)}"},
    )
    response.raise_for_status()
    found: list[dict[str, Any]] = response.json()["memories"]
    return found


def first_memory(stack: Stack, user: str) -> dict[str, Any]:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        found = memories_of(stack, user)
        if found:
            return found[0]
        time.sleep(0.2)
    raise AssertionError(f"no memory was saved for {user}")


def test_a_scripted_chat_saves_recalls_lists_and_forgets(stack: Stack, tmp_path: Path) -> None:
    out_path, err_path = tmp_path / "out.txt", tmp_path / "err.txt"
    argv = [str(MEMORIA), "chat", "--url", stack.base_url, "--user", "ana"]
    with out_path.open("w") as out, err_path.open("w") as err:
        chat = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=out, stderr=err, env=cli_env(), text=True
        )
    assert chat.stdin is not None
    try:
        chat.stdin.write("remember that my favourite colour is green\n")
        chat.stdin.flush()
        # The id /forget needs exists once the save step has run; the chat reads the next
        # lines only after that cycle ends, so they can be written now.
        memory = first_memory(stack, "ana")
        chat.stdin.write(
            f"what is my favourite colour?\n/memories\n/forget {memory['memory_id']}\n/memories\n"
        )
        chat.stdin.close()
        code = chat.wait(WAIT_S)
    finally:
        if chat.poll() is None:
            chat.kill()
            chat.wait()
    output, errors = out_path.read_text(), err_path.read_text()
    assert code == 0, f"stdout:\n{output}\nstderr:\n{errors}"

    assert "favourite colour is green" in memory["content"]
    saved, _, rest = output.partition("what is my favourite colour?")
    recalled, _, listed = rest.partition("/memories")
    assert "Noted: " in saved
    assert OFFLINE_BADGE in saved
    assert "MemorySave → Finalize" in saved
    # The search found the memory and showed it as a memory card, id included.
    assert "memory · " in recalled
    assert memory["memory_id"] in recalled
    assert memory["content"] in recalled
    assert "MemorySearch" in recalled
    before, _, after = listed.partition(f"forgot {memory['memory_id']}")
    assert after, output  # the forget was confirmed
    assert "1 memory" in before
    assert memory["memory_id"] in before
    assert "no memories" in after
    assert memories_of(stack, "ana") == []
    # Not a terminal: plain text, nothing a terminal would interpret.
    assert "\x1b" not in output


def test_a_script_longer_than_the_burst_keeps_every_line(stack: Stack) -> None:
    """The gateway's defaults take 10 messages at once from one socket, then one every 2 s: the
    lines past the burst are refused with ``rate_limited`` at first, and the chat sends each
    again when the gateway says, so every line is answered."""
    lines = [f"remember that box {n} holds item {n}" for n in range(1, 14)]
    argv = [str(MEMORIA), "chat", "--url", stack.base_url, "--user", "bea"]
    done = subprocess.run(
        argv,
        input="".join(f"{line}\n" for line in lines),
        capture_output=True,
        env=cli_env(),
        text=True,
        timeout=WAIT_S,
        check=False,
    )
    assert done.returncode == 0, f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    assert "too many messages for the gateway's rate limit: sending it again in" in done.stdout
    assert "not sent" not in done.stdout
    saved = sorted(memory["content"] for memory in memories_of(stack, "bea"))
    assert saved == sorted(f"Box {n} holds item {n}" for n in range(1, 14))


def wait_for_output(path: Path, text: str) -> str:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        output = path.read_text()
        if text in output:
            return output
        time.sleep(0.2)
    raise AssertionError(f"{text!r} never appeared in:\n{path.read_text()}")


def test_the_chat_reconnects_when_the_gateway_restarts(stack: Stack, tmp_path: Path) -> None:
    out_path, err_path = tmp_path / "out.txt", tmp_path / "err.txt"
    argv = [str(MEMORIA), "chat", "--url", stack.base_url, "--user", "rui", "--thread", "r"]
    with out_path.open("w") as out, err_path.open("w") as err:
        chat = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=out, stderr=err, env=cli_env(), text=True
        )
    assert chat.stdin is not None
    try:
        chat.stdin.write("remember that my bike is blue\n")
        chat.stdin.flush()
        wait_for_output(out_path, "MemorySave → Finalize")
        stack.stop("gateway")
        stack.start("gateway")
        # Resumed from its last event: the restarted gateway replays what came after it.
        wait_for_output(out_path, "reconnected; nothing was missed")
        chat.stdin.write("what colour is my bike?\n")
        chat.stdin.close()
        code = chat.wait(WAIT_S)
    finally:
        if chat.poll() is None:
            chat.kill()
            chat.wait()
    output = out_path.read_text()
    assert code == 0, f"stdout:\n{output}\nstderr:\n{err_path.read_text()}"
    assert "connection to the gateway lost" in output
    _, _, after = output.partition("reconnected")
    assert "My bike is blue" in after  # the answer to the line sent after the restart
    assert "MemorySearch" in after


def test_a_refused_token_ends_the_chat_with_an_error(stack: Stack) -> None:
    argv = [str(MEMORIA), "chat", "--url", stack.base_url, "--token", "not-a-valid-token"]
    done = subprocess.run(
        argv,
        input="hello\n",
        capture_output=True,
        text=True,
        env=cli_env(),
        timeout=WAIT_S,
        check=False,
    )
    assert done.returncode != 0
    assert "refused the token" in done.stderr

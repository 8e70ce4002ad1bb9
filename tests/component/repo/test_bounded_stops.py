"""Background tasks are stopped with the bounded stop (memoria_runtime.health.stop_task):
a cancelled task that never ends (a client library swallowing its cancellation) then
leaves a log line naming where it waits instead of hanging the whole shutdown. A bare
``task.cancel()`` followed by an unbounded wait is what this keeps out."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
# Workspace code outside libs/llm (whose own engineer changes it).
SOURCES = [ROOT / "libs" / "runtime", ROOT / "libs" / "contracts", ROOT / "services"]

# (file, function): the cancels that are themselves bounded or cancel no task.
ALLOWED = {
    # The bounded stop itself.
    ("libs/runtime/src/memoria_runtime/health.py", "stop_task"),
    # Handlers still running after the grace period, waited for with a timeout.
    ("libs/runtime/src/memoria_runtime/bus/consumer.py", "stop"),
    # Futures of requests waiting for their reply: nothing runs in them.
    ("libs/runtime/src/memoria_runtime/bus/replies.py", "forget"),
    ("libs/runtime/src/memoria_runtime/bus/replies.py", "close"),
}


def _cancel_calls() -> set[tuple[str, str]]:
    found: set[tuple[str, str]] = set()
    for source in SOURCES:
        for path in source.rglob("*.py"):
            tree = ast.parse(path.read_text(), filename=str(path))
            for function in ast.walk(tree):
                if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                    continue
                for node in ast.walk(function):
                    if (
                        isinstance(node, ast.Call)
                        and isinstance(node.func, ast.Attribute)
                        and node.func.attr == "cancel"
                        and not node.args
                    ):
                        found.add((path.relative_to(ROOT).as_posix(), function.name))
    return found


def test_tasks_are_cancelled_only_by_the_bounded_stop() -> None:
    unbounded = _cancel_calls() - ALLOWED
    assert not unbounded, f"stop these with memoria_runtime.health.stop_task: {sorted(unbounded)}"

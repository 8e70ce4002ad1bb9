"""Decision's core is pure, checked by the machine rather than promised in a comment: imported
in a fresh interpreter it brings no I/O along (no Redis client, bus, HTTP, WebSocket or event
loop, no runtime module but the text catalogue), and its source reads no clock, no random
source and no new id. (A subprocess: component tier.)"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

CORE = Path(__file__).resolve().parents[3] / "services/decision/src/memoria_decision/core"

FORBIDDEN = frozenset(
    {
        *("redis", "faststream", "httpx", "aiohttp", "websockets", "anyio", "asyncio"),
        *("opentelemetry", "pymongo", "pymilvus", "google", "openai", "starlette", "fastapi"),
    }
)
# memoria packages the core may load, by module; any other module of theirs is refused.
ALLOWED_LIBRARY_MODULES = frozenset(
    {
        "memoria_runtime",
        "memoria_text",
        "memoria_text.i18n",  # the text catalogue and the language guess: pure
        "memoria_text.commands",  # the commands recognized before any model call: pure
        "memoria_text.folding",
        "memoria_llm",
        "memoria_llm.conversation",  # bounding a history summary: pure
        "memoria_llm.port",  # its types
    }
)
# What the core's own source may import.
ALLOWED_IMPORTS = frozenset(
    {
        *("__future__", "collections.abc", "dataclasses", "datetime", "functools", "hashlib"),
        *("json", "re", "typing", "unicodedata", "enum", "pydantic"),
        *("memoria_contracts", "memoria_runtime", "memoria_text", "memoria_text.commands"),
        "memoria_llm.conversation",
    }
)
IMPURE_CALLS = frozenset({"now", "utcnow", "today", "time", "new_id", "uuid4", "random"})


def loaded_by(module: str) -> list[str]:
    probe = f"import json, sys; import {module}; print(json.dumps(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    return list(json.loads(done.stdout))


def refused(modules: list[str]) -> list[str]:
    def bad(name: str) -> bool:
        root = name.split(".", maxsplit=1)[0]
        if root in FORBIDDEN:
            return True
        if root in ("memoria_runtime", "memoria_llm", "memoria_text"):
            return name not in ALLOWED_LIBRARY_MODULES
        if root == "memoria_decision":
            return name != "memoria_decision" and not name.startswith("memoria_decision.core")
        return root.startswith("memoria_") and root != "memoria_contracts"

    return [name for name in modules if bad(name)]


def test_importing_the_core_brings_no_io_along() -> None:
    modules = loaded_by("memoria_decision.core.machine")
    assert "memoria_decision.core.machine" in modules
    assert refused(modules) == []


def test_the_check_catches_what_the_shell_loads() -> None:
    """No tautology: the executor, importing the same core, is refused for what it brings."""
    caught = refused(loaded_by("memoria_decision.executor"))
    assert {"redis", "faststream", "memoria_runtime.bus"} <= set(caught)


def test_the_cores_source_imports_nothing_else_and_reads_no_clock() -> None:
    for path in sorted(CORE.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                name = node.module
                ok = name in ALLOWED_IMPORTS or name.startswith(
                    ("memoria_contracts.", "memoria_decision.core")
                )
                assert ok, f"{path.name}:{node.lineno} imports {name}"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    assert alias.name in ALLOWED_IMPORTS, f"{path.name} imports {alias.name}"
            elif isinstance(node, ast.Call):
                func = node.func
                called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                assert called not in IMPURE_CALLS, f"{path.name}:{node.lineno} calls {called}"

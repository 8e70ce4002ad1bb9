"""The Dockerfile and .dockerignore, read as text (no Docker engine here): a multi-stage
build from the lock, a non-root runtime that checks its own health, and a small context."""

from __future__ import annotations

import re
import shlex
import tomllib
from dataclasses import dataclass
from pathlib import Path

from memoria_runtime.settings import env_names

ROOT = Path(__file__).resolve().parents[3]
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
MAKEFILE = ROOT / "Makefile"

SERVICE_USER_ID = 10001
DATA_DIR = "/var/lib/memoria"
VENV = "/app/.venv"


@dataclass(frozen=True)
class Instruction:
    keyword: str
    arguments: str
    line: int


@dataclass(frozen=True)
class Stage:
    base: str
    name: str | None
    instructions: list[Instruction]

    def all(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]


def _instructions(text: str) -> list[Instruction]:
    """Instructions with continuation lines joined and comments dropped."""
    result: list[Instruction] = []
    buffer: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if not buffer and (not stripped or stripped.startswith("#")):
            continue
        if buffer and stripped.startswith("#"):  # a comment inside a continued instruction
            continue
        if not buffer:
            start = number
        if stripped.endswith("\\"):
            buffer.append(stripped[:-1].strip())
            continue
        buffer.append(stripped)
        joined = " ".join(part for part in buffer if part)
        keyword, _, arguments = joined.partition(" ")
        result.append(Instruction(keyword.upper(), arguments.strip(), start))
        buffer = []
    assert not buffer, "the Dockerfile ends inside a continued instruction"
    return result


def _stages() -> tuple[list[Instruction], list[Stage]]:
    """Global instructions (ARGs before the first FROM) and the stages."""
    preamble: list[Instruction] = []
    stages: list[Stage] = []
    for instruction in _instructions(DOCKERFILE.read_text()):
        if instruction.keyword == "FROM":
            words = [w for w in instruction.arguments.split() if not w.startswith("--")]
            name = words[2] if len(words) >= 3 and words[1].upper() == "AS" else None
            stages.append(Stage(words[0], name, []))
        elif stages:
            stages[-1].instructions.append(instruction)
        else:
            preamble.append(instruction)
    return preamble, stages


def _runtime() -> Stage:
    return _stages()[1][-1]


def _builder() -> Stage:
    stages = _stages()[1]
    return next(stage for stage in stages if stage.name == "builder")


def _key_values(arguments: str) -> dict[str, str]:
    """ENV/ARG/LABEL arguments in the key=value form."""
    pairs = (word.partition("=") for word in shlex.split(arguments))
    return {key: value for key, sep, value in pairs if sep}


def _arg_defaults(instructions: list[Instruction]) -> dict[str, str]:
    defaults: dict[str, str] = {}
    for instruction in instructions:
        if instruction.keyword == "ARG":
            defaults.update(_key_values(instruction.arguments))
    return defaults


def _json_or_words(arguments: str) -> list[str]:
    if arguments.startswith("["):
        return re.findall(r'"((?:[^"\\]|\\.)*)"', arguments)
    return shlex.split(arguments)


def _flag_removed(arguments: str) -> str:
    return re.sub(r"^(--[a-z-]+=\S+\s+)+", "", arguments)


# -- stages --------------------------------------------------------------------------------------


def test_multi_stage_build_on_a_pinned_slim_python() -> None:
    preamble, stages = _stages()
    assert len(stages) >= 2, "a builder stage and a runtime stage"
    base = _arg_defaults(preamble).get("PYTHON_IMAGE", "")
    assert re.fullmatch(r"python:3\.1[1-9](\.\d+)?-slim-bookworm", base), base
    for stage in stages:
        assert stage.base in ("${PYTHON_IMAGE}", base), f"stage {stage.name}: {stage.base}"


def test_builder_installs_the_makefiles_uv() -> None:
    makefile = re.search(r"^UV_VERSION\s*\?=\s*(\S+)", MAKEFILE.read_text(), re.M)
    assert makefile, "the Makefile pins UV_VERSION"
    builder = _builder()
    assert _arg_defaults(builder.instructions).get("UV_VERSION") == makefile[1]
    installs = [run.arguments for run in builder.all("RUN") if "pip install" in run.arguments]
    assert any('"uv==${UV_VERSION}"' in run or "uv==${UV_VERSION}" in run for run in installs)


def test_uv_sync_is_frozen_and_without_dev_tools() -> None:
    syncs = [
        run.arguments
        for stage in _stages()[1]
        for run in stage.all("RUN")
        if "uv sync" in run.arguments
    ]
    assert len(syncs) >= 2, "dependencies first (cached layer), then the workspace"
    for sync in syncs:
        assert "--frozen" in sync and "--no-dev" in sync and "--all-packages" in sync, sync
        assert "--mount=type=cache,target=/root/.cache/uv" in sync, sync
    assert "--no-install-workspace" in syncs[0], "the first sync installs dependencies only"
    assert "--no-editable" in syncs[-1], "the venv must work without the source tree"


def test_builder_environment_for_uv() -> None:
    env: dict[str, str] = {}
    for instruction in _builder().all("ENV"):
        env.update(_key_values(instruction.arguments))
    assert env.get("UV_COMPILE_BYTECODE") == "1"
    assert env.get("UV_LINK_MODE") == "copy"
    assert env.get("UV_PYTHON_DOWNLOADS") == "never"
    assert env.get("UV_PROJECT_ENVIRONMENT") == VENV


def test_dependencies_are_installed_before_the_sources_are_copied() -> None:
    builder = _builder()
    first_sync = next(i.line for i in builder.all("RUN") if "uv sync" in i.arguments)
    copies = {_flag_removed(i.arguments).split()[0]: i.line for i in builder.all("COPY")}
    for source in ("libs", "services", "cli", "clients"):
        assert copies[source] > first_sync, f"{source} is copied before dependencies install"
    assert copies["pyproject.toml"] < first_sync


def test_runtime_copies_only_the_virtual_environment() -> None:
    runtime = _runtime()
    copies = runtime.all("COPY")
    assert copies, "the runtime stage copies the venv"
    for copy in copies:
        assert "--from=builder" in copy.arguments, copy.arguments
        assert _flag_removed(copy.arguments).split() == [VENV, VENV], copy.arguments


# -- runtime -------------------------------------------------------------------------------------


def test_runtime_runs_as_a_numeric_non_root_user() -> None:
    users = _runtime().all("USER")
    assert users, "the runtime stage sets USER"
    user, _, group = users[-1].arguments.partition(":")
    assert user.isdigit() and int(user) == SERVICE_USER_ID, users[-1].arguments
    assert not group or (group.isdigit() and int(group) != 0)
    last = users[-1].line
    for instruction in _runtime().instructions:
        if instruction.line > last:
            assert instruction.keyword != "USER", "no USER after the service user"
    runs = " ".join(run.arguments for run in _runtime().all("RUN"))
    assert f"--uid {SERVICE_USER_ID}" in runs and f"--gid {SERVICE_USER_ID}" in runs


def test_runtime_environment() -> None:
    env: dict[str, str] = {}
    for instruction in _runtime().all("ENV"):
        env.update(_key_values(instruction.arguments))
    assert env["PATH"].startswith(f"{VENV}/bin:")
    assert env["PYTHONUNBUFFERED"] == "1"
    assert env["MEMORIA_DATA_DIR"] == DATA_DIR
    assert env["MEMORIA_GATEWAY_HOST"] == "0.0.0.0"
    # Listening on every address: the password-free dev login is off (the gateway would
    # refuse to start with it on and no MEMORIA_DEV_LOGIN_HOSTS).
    assert env["MEMORIA_DEV_LOGIN"] == "false"
    assert env["MEMORIA_METRICS_PORT"] == "9464"
    fields = set(env_names())
    unknown = {name for name in env if name.startswith("MEMORIA_")} - fields
    assert not unknown, f"not settings: {sorted(unknown)}"


def test_data_directory_is_a_volume_owned_by_the_service_user() -> None:
    runtime = _runtime()
    volumes = [_json_or_words(v.arguments) for v in runtime.all("VOLUME")]
    assert [DATA_DIR] in volumes
    runs = " ".join(run.arguments for run in runtime.all("RUN"))
    assert f"-o {SERVICE_USER_ID} -g {SERVICE_USER_ID}" in runs and DATA_DIR in runs


def test_ports_healthcheck_and_default_command() -> None:
    runtime = _runtime()
    exposed = {port for e in runtime.all("EXPOSE") for port in e.arguments.split()}
    assert {"8000", "9464"} <= exposed
    healthchecks = runtime.all("HEALTHCHECK")
    assert len(healthchecks) == 1 and "NONE" not in healthchecks[0].arguments.upper()
    command = healthchecks[0].arguments.partition("CMD")[2].strip()
    assert _json_or_words(command)[:3] == ["python", "-m", "memoria_runtime.probe"]
    commands = runtime.all("CMD")
    assert commands and _json_or_words(commands[-1].arguments) == [
        "python",
        "-m",
        "memoria_gateway",
    ]
    assert not runtime.all("ENTRYPOINT"), "a plain CMD lets compose run any service or the CLI"


def test_oci_labels() -> None:
    labels: dict[str, str] = {}
    for instruction in _runtime().all("LABEL"):
        labels.update(_key_values(instruction.arguments))
    for key in ("title", "description", "version", "revision", "created"):
        assert f"org.opencontainers.image.{key}" in labels, key


# -- .dockerignore -------------------------------------------------------------------------------


def _pattern_regex(pattern: str) -> re.Pattern[str]:
    """A .dockerignore pattern (Go filepath.Match plus ``**``) as a regular expression."""
    out = ""
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        elif pattern[i] == "[":
            close = pattern.index("]", i)
            out, i = out + pattern[i : close + 1].replace("[!", "[^"), close + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(out)


def _ignored(path: str) -> bool:
    """Docker's rule: the last pattern matching the path or one of its parents decides
    (``!`` re-includes); a pattern without ``**/`` matches from the context root only."""
    parts = path.split("/")
    candidates = ["/".join(parts[:n]) for n in range(1, len(parts) + 1)]
    verdict = False
    for raw in DOCKERIGNORE.read_text().splitlines():
        pattern = raw.strip()
        if not pattern or pattern.startswith("#"):
            continue
        negate = pattern.startswith("!")
        regex = _pattern_regex(pattern.lstrip("!").strip().strip("/"))
        if any(regex.fullmatch(candidate) for candidate in candidates):
            verdict = not negate
    return verdict


def test_dockerignore_keeps_the_context_small_and_secret_free() -> None:
    for path in (
        ".git",
        ".venv",
        ".tools",
        "tests",
        "tests/unit/deploy/test_dockerfile.py",
        "test-artifacts",
        "bench",
        "docs",
        ".env",
        ".mypy_cache",
        "libs/runtime/src/memoria_runtime/__pycache__",
    ):
        assert _ignored(path), f".dockerignore lets {path} into the build context"


def test_dockerignore_keeps_what_the_build_copies() -> None:
    sources: list[str] = []
    for stage in _stages()[1]:
        for copy in stage.all("COPY"):
            if "--from=" in copy.arguments:
                continue
            words = _flag_removed(copy.arguments).split()
            sources += words[:-1]
    assert {"pyproject.toml", "uv.lock", "README.md", "libs", "services", "cli", "clients"} <= set(
        sources
    )
    for source in sources:
        assert (ROOT / source).exists(), f"COPY {source}: no such file"
        assert not _ignored(source), f".dockerignore drops {source}, which the build copies"
    for member in ("libs/runtime/src/memoria_runtime/probe.py", "cli/pyproject.toml"):
        assert not _ignored(member), member


def test_every_workspace_member_rebuilds_its_wheel_when_its_sources_change() -> None:
    """The image (and tests/integration/test_image_environment.py) installs each member as a
    wheel; uv's cache would otherwise hand back a wheel built before a module was added."""
    members = sorted(ROOT.glob("libs/*/pyproject.toml")) + sorted(
        ROOT.glob("services/*/pyproject.toml")
    )
    members += [ROOT / "cli" / "pyproject.toml", *sorted(ROOT.glob("clients/*/pyproject.toml"))]
    assert len(members) == 11
    for path in members:
        keys = tomllib.loads(path.read_text())["tool"]["uv"]["cache-keys"]
        assert {"file": "src/**/*"} in keys, path
        assert {"file": "pyproject.toml"} in keys, path

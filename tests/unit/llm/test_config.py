"""The providers' own config, built from the service settings by field name."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from memoria_contracts.chat import ChatRecord
from memoria_contracts.events import CycleContext
from memoria_contracts.llm_settings import LlmSettings
from memoria_llm.config import GeminiConfig, LLMConfig, OpenAIConfig
from memoria_llm.factory import create_language_model
from memoria_llm.port import LLMOutputError, LLMRequest, Prompt
from memoria_offline import OfflineModel
from memoria_offline.selection import language_model

LLM_SOURCE = Path(__file__).parents[3] / "libs" / "llm" / "src" / "memoria_llm"


def settings(**values: object) -> LlmSettings:
    return LlmSettings(_env_file=None, **values)  # type: ignore[arg-type]


def test_without_a_key_or_a_base_url_no_provider_is_configured() -> None:
    config = LLMConfig.of(settings(gemini_api_key=None, openai_base_url=None))
    assert config.gemini is None
    assert config.openai is None
    assert create_language_model(config) is None
    assert isinstance(language_model(settings(gemini_api_key=None)), OfflineModel)


def test_the_provider_configs_carry_the_settings_values() -> None:
    config = LLMConfig.of(
        settings(
            gemini_api_key="secret-key",
            gemini_base_url="http://127.0.0.1:9",
            model_chat="chat-model",
            llm_retries=5,
            llm_timeout_seconds=7.5,
            openai_base_url="http://127.0.0.1:8/v1",
            openai_model="local",
            openai_tool_messages=False,
        )
    )
    assert isinstance(config.gemini, GeminiConfig)
    assert config.gemini.gemini_base_url == "http://127.0.0.1:9"
    assert config.gemini.model_chat == "chat-model"
    assert (config.gemini.llm_retries, config.gemini.llm_timeout_seconds) == (5, 7.5)
    assert isinstance(config.openai, OpenAIConfig)
    assert config.openai.openai_model == "local"
    assert config.openai.openai_tool_messages is False


def test_a_config_never_shows_its_key() -> None:
    config = LLMConfig.of(settings(gemini_api_key="secret-key", openai_base_url="http://x/v1"))
    assert "secret-key" not in repr(config)
    assert "secret-key" not in str(config.model_dump())


def imported(module: Path) -> set[str]:
    """The top-level packages ``module`` imports (absolute imports)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(module.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name.partition(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.partition(".")[0])
    return names


def test_the_llm_package_depends_on_no_runtime_nor_planner() -> None:
    """The model port is no infrastructure: no settings, Redis keys or metrics of the runtime
    (cost accounting lives there, beside the metrics), and the planner depends on it, not
    the other way."""
    modules = sorted(LLM_SOURCE.rglob("*.py"))
    assert modules
    for module in modules:
        assert not imported(module) & {"memoria_runtime", "memoria_offline"}, module
    declared = (LLM_SOURCE.parents[1] / "pyproject.toml").read_text()
    assert "memoria-chat-runtime" not in declared
    assert "memoria-chat-offline" not in declared


def test_the_import_check_sees_an_import_of_the_runtime(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("import json\nfrom memoria_runtime.metrics import count_llm_usage\n")
    assert imported(probe) == {"json", "memoria_runtime"}


def test_the_port_knows_no_cycle() -> None:
    assert "memoria_contracts" not in (LLM_SOURCE / "port.py").read_text()


async def test_the_offline_planner_reads_the_cycle_from_the_input_json() -> None:
    original = ChatRecord(id="m-1", chat_history=True, modal="text", role="user", content="hi")
    cycle = CycleContext(original_message=original)
    request = LLMRequest(
        task="decide", prompt=Prompt(system="", messages=[]), input_json=cycle.model_dump_json()
    )
    assert await OfflineModel().reasoning_heavy(request, ["MemorySearch", "Finalize"]) in {
        "MemorySearch",
        "Finalize",
    }


async def test_input_that_is_no_cycle_is_a_clear_error() -> None:
    request = LLMRequest(task="decide", prompt=Prompt(system="", messages=[]), input_json="{}")
    with pytest.raises(LLMOutputError, match="reads a cycle"):
        await OfflineModel().reasoning_heavy(request, ["Finalize"])

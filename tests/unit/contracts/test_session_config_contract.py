"""Session config: defaults from the settings, overrides on top, a change's meaning
(left out = unchanged, null = back to the default) and the bounds of every field."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from memoria_contracts.memory import DEFAULT_MEMORY_TYPE_DESCRIPTIONS, MEMORY_TYPES
from memoria_contracts.session import (
    DEFAULT_SYSTEM_PROMPT,
    MAX_SYSTEM_PROMPT_CHARS,
    MAX_TYPE_DESCRIPTION_CHARS,
    SessionConfigOverrides,
    SessionConfigPatch,
    SessionConfigUpdate,
    effective,
)
from memoria_runtime.session_defaults import session_defaults
from memoria_runtime.settings import Settings


def settings(**values: Any) -> Settings:
    return Settings.load(_env_file=None, **values)


def test_defaults_come_from_the_settings() -> None:
    config = session_defaults(
        settings(
            system_prompt="Be brief.",
            memory_limit=7,
            memory_min_relevance=0.4,
            proactive_retrieval=True,
            memory_type_descriptions={"goal": "Plans."},
        ),
        "t1",
    )
    assert config.thread_id == "t1"
    assert config.system_prompt == "Be brief."
    assert config.chat_model is None  # the provider's own chat model
    assert (config.memory_limit, config.memory_min_relevance) == (7, 0.4)
    assert config.proactive_retrieval is True
    assert config.memory_type_descriptions["goal"] == "Plans."
    assert (
        config.memory_type_descriptions["preference"]
        == (DEFAULT_MEMORY_TYPE_DESCRIPTIONS["preference"])
    )


def test_the_settings_defaults_match_seed_001() -> None:
    config = session_defaults(settings(), "t1")
    assert config.system_prompt == DEFAULT_SYSTEM_PROMPT
    assert (config.memory_limit, config.memory_min_relevance) == (20, 0.04)
    assert config.proactive_retrieval is False
    assert list(config.memory_type_descriptions) == list(MEMORY_TYPES)


def test_overrides_replace_only_what_they_set() -> None:
    defaults = session_defaults(settings(), "t1")
    overrides = SessionConfigOverrides(
        memory_limit=3,
        proactive_retrieval=True,
        chat_model="gemini-2.5-pro",
        memory_type_descriptions={"goal": "What the user is working towards.", "constraint": None},
    )
    config = effective(defaults, overrides)
    assert (config.memory_limit, config.proactive_retrieval) == (3, True)
    assert config.chat_model == "gemini-2.5-pro"
    assert config.system_prompt == defaults.system_prompt
    assert config.memory_min_relevance == defaults.memory_min_relevance
    assert config.memory_type_descriptions["goal"] == "What the user is working towards."
    assert (
        config.memory_type_descriptions["constraint"]
        == (defaults.memory_type_descriptions["constraint"])
    )
    assert effective(defaults, SessionConfigOverrides()) == defaults
    assert effective(defaults, None) == defaults


def test_a_patch_leaves_out_unchanged_and_resets_nulls() -> None:
    patch = SessionConfigPatch.model_validate(
        {
            "memory_limit": 5,
            "system_prompt": None,
            "memory_type_descriptions": {"goal": "  Plans.  ", "preference": None},
        }
    )
    update = patch.as_update("t1")
    assert update.thread_id == "t1"
    assert update.reset == ["system_prompt"]
    assert update.set.memory_limit == 5
    assert update.set.memory_type_descriptions == {"goal": "Plans.", "preference": None}
    # It crosses the bus as JSON and means the same on the other side.
    assert SessionConfigUpdate.model_validate_json(update.model_dump_json()) == update


def test_a_patch_refuses_a_user_id_and_unknown_fields() -> None:
    for body in ({"user_id": "bob"}, {"memory_limitt": 3}):
        with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
            SessionConfigPatch.model_validate(body)


@pytest.mark.parametrize(
    "body",
    [
        {"memory_limit": 0},
        {"memory_limit": 101},
        {"memory_limit": "many"},
        {"memory_min_relevance": -0.1},
        {"memory_min_relevance": 1.5},
        {"system_prompt": "   "},
        {"system_prompt": "x" * (MAX_SYSTEM_PROMPT_CHARS + 1)},
        {"chat_model": ""},
        {"chat_model": "gemini 2.5"},
        {"chat_model": "m" * 129},
        {"chat_model": "-starts-with-a-dash"},
        {"memory_type_descriptions": {"hobby": "Things the user does for fun."}},
        {"memory_type_descriptions": {"goal": ""}},
        {"memory_type_descriptions": {"goal": "x" * (MAX_TYPE_DESCRIPTION_CHARS + 1)}},
        {"proactive_retrieval": "maybe"},
    ],
)
def test_out_of_bounds_values_are_refused(body: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        SessionConfigPatch.model_validate(body)


@pytest.mark.parametrize(
    "name", ["gemini-2.5-flash", "qwen2.5:7b-instruct", "models/gemini-2.5-pro", "llama3.1:8b"]
)
def test_provider_model_names_are_accepted(name: str) -> None:
    assert SessionConfigPatch(chat_model=name).chat_model == name


def test_the_settings_refuse_a_blank_or_huge_system_prompt() -> None:
    for blank in ("", "  \n "):
        with pytest.raises(ValidationError):
            settings(system_prompt=blank)
    with pytest.raises(ValidationError):
        settings(system_prompt="x" * (MAX_SYSTEM_PROMPT_CHARS + 1))

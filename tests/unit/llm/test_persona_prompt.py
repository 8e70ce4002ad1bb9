"""Persona identity in prompts: the strategy chosen for a model id from the three
packaged JSON files, and the block each family renders, with and without a switch."""

from __future__ import annotations

import json

import pytest

from memoria_contracts.personas import ActivePersona, Persona, PersonaReset
from memoria_llm.persona_prompt import (
    FAMILIES,
    STRATEGY_DIR,
    StrategyFile,
    identity_blocks,
    select_strategy,
    strategy_files,
    with_persona,
)
from memoria_llm.port import Prompt, PromptMessage

ADA = Persona(
    id="tutor",
    name="Ada the Tutor",
    description="A tutor.",
    identity="You are Ada, a patient tutor.",
    style="Warm and short.",
)
PROMPT = Prompt(
    system="Be kind.\n\nWrite the reply now.",
    messages=[
        PromptMessage(role="user", content="hello"),
        PromptMessage(role="assistant", content="Hi, I am Memoria."),
        PromptMessage(role="user", content="who are you?"),
    ],
)


def switched(turn: int = 0) -> ActivePersona:
    reset = PersonaReset(seq=3, previous_id="memoria", previous_name="Memoria", turn=turn)
    return ActivePersona(persona=ADA, reset=reset)


STEADY = ActivePersona(persona=ADA)


@pytest.mark.parametrize(
    ("model", "provider", "family", "strategy"),
    [
        ("gemini-2.5-pro", "gemini", "google", "google-advanced"),
        ("models/gemini-2.5-flash", "gemini", "google", "google-standard"),
        ("gemini-2.0-flash-lite", "gemini", "google", "google-lite"),
        ("gemini-1.5-flash-8b", "gemini", "google", "google-lite"),
        ("gemini-1.0-pro", "gemini", "google", "google-legacy"),
        ("gpt-4o-2024-11-20", "openai", "openai", "gpt-advanced"),
        ("gpt-4o-mini", "openai", "openai", "gpt-standard"),
        ("gpt-4.1-nano", "openai", "openai", "gpt-lite"),
        ("o3-mini", "openai", "openai", "reasoning-model"),
        ("o1-pro", "openai", "openai", "gpt-advanced"),
        ("claude-sonnet-4-5", "", "anthropic", "claude-advanced"),
        ("claude-3-5-haiku-latest", "", "anthropic", "claude-standard"),
        ("anthropic/claude-opus-4", "openai", "anthropic", "claude-advanced"),  # a router
        ("CLAUDE-3-7-SONNET", "", "anthropic", "claude-advanced"),
        # Not named by any file: the provider's family, else the documented default.
        ("qwen2.5:7b-instruct", "openai", "openai", "gpt-standard"),
        ("learnlm-9", "gemini", "google", "google-standard"),
        ("my-custom-tuned", "gemini", "google", "google-standard"),
        ("scripted", "scripted", "openai", "gpt-standard"),
        ("offline planner (no LLM)", "offline", "openai", "gpt-standard"),
    ],
)
def test_strategy_selection_by_model_id(
    model: str, provider: str, family: str, strategy: str
) -> None:
    selected = select_strategy(model, provider)
    assert (selected.family, selected.name) == (family, strategy)


def test_unknown_model_and_provider_take_the_documented_default() -> None:
    selected = select_strategy("mystery-model", "mystery-provider")
    assert selected.matched == "default"
    assert selected.family == "openai"


def test_the_three_files_are_valid_and_name_their_family() -> None:
    files = strategy_files()
    assert set(files) == set(FAMILIES) == {"google", "openai", "anthropic"}
    for family in FAMILIES:
        raw = json.loads((STRATEGY_DIR / f"{family}.json").read_text())
        assert StrategyFile.model_validate(raw).family == family


def test_a_template_with_an_unknown_placeholder_is_refused() -> None:
    raw = json.loads((STRATEGY_DIR / "openai.json").read_text())
    raw["strategies"]["gpt-standard"]["reset_system"] = "You are {persona} now."
    with pytest.raises(ValueError, match="unknown placeholders"):
        StrategyFile.model_validate(raw)


def test_anthropic_reset_is_xml_tagged_in_the_system_text() -> None:
    prompt = with_persona(PROMPT, switched(), model="claude-sonnet-4-5")
    system = prompt.system
    assert system.startswith("<system_reset>")
    assert 'you were "Memoria"' in system
    assert '<new_identity name="Ada the Tutor">\nYou are Ada, a patient tutor.' in system
    assert "<style>Warm and short.</style>" in system
    assert system.endswith("Be kind.\n\nWrite the reply now.")  # the step's text follows
    assert prompt.messages == PROMPT.messages  # Claude: the system text only


def test_openai_reset_is_a_priority_block_and_a_line_in_the_user_turn() -> None:
    prompt = with_persona(PROMPT, switched(), model="gpt-4o", provider="openai")
    assert prompt.system.startswith("# PRIORITY 1 - IDENTITY")
    assert "You are now Ada the Tutor. You are Ada, a patient tutor." in prompt.system
    assert "The previous persona, Memoria, no longer applies" in prompt.system
    assert "# PRIORITY 2 - INSTRUCTIONS" in prompt.system
    assert prompt.system.endswith("Be kind.\n\nWrite the reply now.")
    *earlier, last = prompt.messages
    assert earlier == list(PROMPT.messages[:-1])
    assert last.role == "user"
    assert last.content == (
        "[Persona switch: from this message on you are Ada the Tutor, not Memoria.]\n\nwho are you?"
    )


def test_google_reset_is_a_role_assignment_repeated_for_two_turns() -> None:
    first = with_persona(PROMPT, switched(0), model="gemini-2.5-flash", provider="gemini")
    assert first.system.startswith("NEW ROLE: You are Ada the Tutor, not Memoria.")
    assert "STYLE: Warm and short." in first.system
    assert first.messages[-1].content.startswith("(Reply as Ada the Tutor, not Memoria.)")
    second = with_persona(PROMPT, switched(1), model="gemini-2.5-flash", provider="gemini")
    assert second.system == first.system  # google-standard repeats it once more
    third = with_persona(PROMPT, switched(2), model="gemini-2.5-flash", provider="gemini")
    assert third.system.startswith("ROLE: Ada the Tutor.")
    assert "not Memoria" not in third.system
    assert third.messages == PROMPT.messages


@pytest.mark.parametrize("model", ["claude-sonnet-4-5", "gpt-4o", "gemini-2.5-pro", "scripted"])
def test_without_a_switch_only_the_identity_is_given(model: str) -> None:
    prompt = with_persona(PROMPT, STEADY, model=model)
    assert "You are Ada, a patient tutor." in prompt.system
    assert "Memoria" not in prompt.system  # nothing about the previous persona
    assert prompt.messages == PROMPT.messages
    assert prompt.system.endswith("Be kind.\n\nWrite the reply now.")


def test_reset_stops_after_the_strategys_turns() -> None:
    selected = select_strategy("claude-sonnet-4-5")
    reset_block, _ = identity_blocks(switched(0), selected)
    later_block, _ = identity_blocks(switched(1), selected)  # repeat_turns 1
    assert "<system_reset>" in reset_block
    assert later_block == '<identity name="Ada the Tutor">\nYou are Ada, a patient tutor.\n' + (
        "<style>Warm and short.</style>\n</identity>"
    )


def test_no_persona_leaves_the_prompt_alone() -> None:
    assert with_persona(PROMPT, None, model="gpt-4o") is PROMPT


def test_a_user_line_is_its_own_turn_when_the_prompt_ends_with_the_assistant() -> None:
    prompt = Prompt(system="", messages=[PromptMessage(role="assistant", content="hi")])
    spoken = with_persona(prompt, switched(), model="gpt-4o")
    assert spoken.messages[-1].role == "user"
    assert spoken.messages[-1].content.startswith("[Persona switch")
    assert spoken.system.startswith("# PRIORITY 1")

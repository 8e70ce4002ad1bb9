"""Persona identity in prompts: the normal identity block, and the "hard
reset" block of the cycles right after a persona switch, worded for the model that reads it.

The wording lives in one JSON file per provider family beside this module
(``persona_strategies/google.json``, ``openai.json``, ``anthropic.json``). Each file names
the model ids it covers (``models``: glob → strategy, first match wins) and its strategies:

* ``identity_system`` — the identity block put first in the system text when no reset is due;
* ``reset_system`` — the reset block put first in the system text instead, in the cycles
  after a switch;
* ``reset_user`` — optional: a line put before the latest user turn too, for models that
  weigh the last turn over the system text (null: none);
* ``repeat_turns`` — how many cycles after the switch get the reset (1: only the next);
* ``style_template`` — how the persona's optional style is shown (``{style_block}``).

Templates may use ``{persona_id}``, ``{persona_name}``, ``{identity}``, ``{style_block}`` and
``{previous_name}``; the files are checked when first loaded.

A model id is matched lower-cased, without a ``models/`` prefix or a router's vendor prefix
(``anthropic/claude-…``). One that no file names takes the family of its provider
(``providers``: ``gemini`` → google, an OpenAI-compatible server → openai); anything else
(the offline planner, the scripted test model, an unknown provider) takes
:data:`DEFAULT_FAMILY`'s ``default_strategy``: OpenAI's plain wording is the one models of
unknown origin (most trained on OpenAI-style chat data) are most likely to follow.
"""

from __future__ import annotations

import functools
import string
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Final

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from memoria_contracts.personas import MAX_RESET_TURNS, ActivePersona
from memoria_llm.port import Prompt, PromptMessage

STRATEGY_DIR: Final = Path(__file__).parent / "persona_strategies"
FAMILIES: Final = ("google", "openai", "anthropic")
DEFAULT_FAMILY: Final = "openai"
PLACEHOLDERS: Final = frozenset(
    {"persona_id", "persona_name", "identity", "style_block", "previous_name"}
)


def _check_template(template: str | None) -> str | None:
    if template is None:
        return None
    names = {field for _, field, _, _ in string.Formatter().parse(template) if field is not None}
    unknown = names - PLACEHOLDERS
    if unknown:
        raise ValueError(f"unknown placeholders {sorted(unknown)}; use {sorted(PLACEHOLDERS)}")
    return template


class PersonaStrategy(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    description: str
    repeat_turns: int = Field(ge=1, le=MAX_RESET_TURNS)
    style_template: str
    identity_system: str
    reset_system: str
    reset_user: str | None = None

    @field_validator("identity_system", "reset_system", "reset_user")
    @classmethod
    def _placeholders(cls, template: str | None) -> str | None:
        return _check_template(template)

    @field_validator("style_template")
    @classmethod
    def _style(cls, template: str) -> str:
        fields = {f for _, f, _, _ in string.Formatter().parse(template) if f is not None}
        if fields != {"style"}:
            raise ValueError("style_template must use {style} and nothing else")
        return template


class ModelRule(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    match: str = Field(min_length=1, description="A glob on the normalized model id.")
    strategy: str


class StrategyFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    family: str
    description: str
    providers: list[str] = Field(default_factory=list)
    default_strategy: str
    models: list[ModelRule]
    strategies: dict[str, PersonaStrategy] = Field(min_length=1)

    @model_validator(mode="after")
    def _known_strategies(self) -> StrategyFile:
        named = {self.default_strategy, *(rule.strategy for rule in self.models)}
        missing = named - self.strategies.keys()
        if missing:
            raise ValueError(f"strategies named but not defined: {sorted(missing)}")
        return self


@dataclass(frozen=True)
class SelectedStrategy:
    """The strategy for one model id, and why (for logs and tests)."""

    family: str
    name: str
    strategy: PersonaStrategy
    matched: str
    """The glob that matched, ``provider:<name>`` or ``default``."""


@functools.cache
def strategy_files() -> dict[str, StrategyFile]:
    """The three packaged files, validated (a broken file fails at the first prompt, and in
    the unit tests)."""
    files: dict[str, StrategyFile] = {}
    for family in FAMILIES:
        path = STRATEGY_DIR / f"{family}.json"
        loaded = StrategyFile.model_validate_json(path.read_text(encoding="utf-8"))
        if loaded.family != family:
            raise ValueError(f"{path}: family {loaded.family!r} in a file named {family}")
        files[family] = loaded
    return files


def normalize_model_id(model: str) -> str:
    """``models/gemini-2.5-flash`` → ``gemini-2.5-flash``; ``anthropic/claude-3.5-sonnet``
    → ``claude-3.5-sonnet``; lower-cased."""
    return model.strip().lower().rsplit("/", 1)[-1]


@functools.cache
def select_strategy(model: str, provider: str = "") -> SelectedStrategy:
    """The strategy for ``model`` (as the provider names it); ``provider`` is the
    LanguageModel's name, used when no file names the model."""
    files = strategy_files()
    wanted = normalize_model_id(model)
    for family, file in files.items():
        for rule in file.models:
            if fnmatchcase(wanted, rule.match.lower()):
                return SelectedStrategy(
                    family, rule.strategy, file.strategies[rule.strategy], rule.match
                )
    for family, file in files.items():
        if provider and provider in file.providers:
            name = file.default_strategy
            return SelectedStrategy(family, name, file.strategies[name], f"provider:{provider}")
    default = files[DEFAULT_FAMILY]
    name = default.default_strategy
    return SelectedStrategy(DEFAULT_FAMILY, name, default.strategies[name], "default")


def reset_due(active: ActivePersona, strategy: PersonaStrategy) -> bool:
    """Whether the cycle still gets the hard reset under this strategy."""
    return active.reset is not None and active.reset.turn < strategy.repeat_turns


def identity_blocks(active: ActivePersona, selected: SelectedStrategy) -> tuple[str, str | None]:
    """The system block and the user-turn line (None: none) for ``active`` under
    ``selected``: the reset while one is due, else the normal identity."""
    strategy = selected.strategy
    persona = active.persona
    values = {
        "persona_id": persona.id,
        "persona_name": persona.name,
        "identity": persona.identity,
        "style_block": strategy.style_template.format(style=persona.style) if persona.style else "",
        "previous_name": active.reset.previous_name if active.reset else "",
    }
    if not reset_due(active, strategy):
        return strategy.identity_system.format_map(values), None
    user = strategy.reset_user.format_map(values) if strategy.reset_user else None
    return strategy.reset_system.format_map(values), user


def with_persona(
    prompt: Prompt,
    active: ActivePersona | None,
    *,
    model: str,
    provider: str = "",
    user_turn: bool = True,
) -> Prompt:
    """``prompt`` speaking as ``active`` (unchanged without one): the identity or reset block
    first in the system text, and (``user_turn``) the strategy's line before the latest user
    turn while a reset is due. Prompts whose answer is not text for the user (the decision's
    action name) leave the user turn alone: "reply as X" there invites a reply instead of a
    name."""
    if active is None:
        return prompt
    system_block, user_line = identity_blocks(active, select_strategy(model, provider))
    if not user_turn:
        user_line = None
    system = f"{system_block}\n\n{prompt.system}" if prompt.system else system_block
    messages = list(prompt.messages)
    if user_line is not None:
        if messages and messages[-1].role == "user":
            last = messages.pop()
            messages.append(PromptMessage(role="user", content=f"{user_line}\n\n{last.content}"))
        else:
            messages.append(PromptMessage(role="user", content=user_line))
    return Prompt(system=system, messages=messages)

"""Session configuration per thread (``SessionConfig``): the system
prompt, chat model, memory search limits, memory type descriptions and the proactive
retrieval flag a thread's cycles run with.

Only overrides are stored, per (user, thread), by the memory service; the effective
configuration is the settings' defaults with the overrides on top. Like every request to the
memory service, none of these names a user: the user is the envelope's, which comes from the
authenticated session only.
"""

from __future__ import annotations

from typing import Annotated, Final, Literal, get_args

from pydantic import ConfigDict, Field, StringConstraints

from memoria_contracts.base import ContractModel, SuccessReply
from memoria_contracts.memory import MAX_SEARCH_LIMIT, MEMORY_TYPES, MemoryType
from memoria_contracts.personas import (
    DEFAULT_PERSONA_ID,
    AgentHistoryEntry,
    PersonaApplied,
    PersonaId,
)
from memoria_contracts.text import TrimmedText
from memoria_contracts.threads import ThreadId

MAX_SYSTEM_PROMPT_CHARS: Final = 4000
MAX_TYPE_DESCRIPTION_CHARS: Final = 500
MAX_CHAT_MODEL_CHARS: Final = 128
DEFAULT_SYSTEM_PROMPT: Final = "You are a helpful assistant with long-term memory."


SystemPrompt = Annotated[str, TrimmedText(MAX_SYSTEM_PROMPT_CHARS)]
TypeDescription = Annotated[str, TrimmedText(MAX_TYPE_DESCRIPTION_CHARS)]
ChatModelName = Annotated[
    str,
    StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,127}$"),
]
"""A model name as providers spell them (``gemini-2.5-flash``, ``qwen2.5:7b-instruct``,
``models/gemini-2.5-pro``). Not checked against the provider, which cannot be asked offline:
a name it does not serve makes the answering step fail with the provider's error."""

SessionField = Literal[
    "system_prompt",
    "chat_model",
    "memory_limit",
    "memory_min_relevance",
    "memory_type_descriptions",
    "proactive_retrieval",
    "persona",
]
SESSION_FIELDS: Final[tuple[SessionField, ...]] = get_args(SessionField)


class SessionConfig(ContractModel):
    """The effective configuration of a thread: defaults from the settings, overrides on top."""

    thread_id: ThreadId
    system_prompt: str = Field(description="Instructions every answer of the thread follows.")
    chat_model: str | None = Field(
        description="Model that writes the answers (chat mode); null: the provider's "
        "configured chat model. The offline planner ignores it."
    )
    memory_limit: int = Field(
        ge=1, le=MAX_SEARCH_LIMIT, description="Most memories a search returns."
    )
    memory_min_relevance: float = Field(
        ge=0.0, le=1.0, description="Least calibrated relevance (0–1) a semantic result needs."
    )
    memory_type_descriptions: dict[MemoryType, str] = Field(
        description="Each memory type's description, injected into prompts."
    )
    proactive_retrieval: bool = Field(
        description="Search memories with the user's message before the first decision, show "
        "them and give them to the model."
    )
    persona: PersonaId = Field(
        default=DEFAULT_PERSONA_ID,
        description="The persona the assistant answers as (GET /api/personas lists them); "
        "a change is logged in the thread's agentHistory.",
    )


class SessionConfigOverrides(ContractModel):
    """What a thread sets differently from the defaults; unset (null) fields follow them.

    As a change (HTTP PATCH, the ``session_config`` frame): a field left out is unchanged, a
    field set to null goes back to its default; ``memory_type_descriptions`` changes only
    the types it names (a type set to null goes back to its default)."""

    system_prompt: SystemPrompt | None = Field(
        default=None, description=f"1–{MAX_SYSTEM_PROMPT_CHARS} characters, not only blanks."
    )
    chat_model: ChatModelName | None = Field(
        default=None,
        description=f"A model name of the configured provider, at most {MAX_CHAT_MODEL_CHARS} "
        "characters (letters, digits, . _ : / @ + -). Not checked with the provider.",
    )
    memory_limit: int | None = Field(default=None, ge=1, le=MAX_SEARCH_LIMIT)
    memory_min_relevance: float | None = Field(default=None, ge=0.0, le=1.0)
    memory_type_descriptions: dict[MemoryType, TypeDescription | None] | None = Field(
        default=None,
        description=f"Memory type → description (1–{MAX_TYPE_DESCRIPTION_CHARS} characters).",
    )
    proactive_retrieval: bool | None = None
    persona: PersonaId | None = Field(
        default=None,
        description="A configured persona's id (GET /api/personas); an unknown one is refused.",
    )

    def as_update(self, thread_id: str) -> SessionConfigUpdate:
        """This object read as a change of ``thread_id``: fields given as null are reset.
        Only meaningful on an object made from a client's JSON, whose set fields are known;
        the update it returns says the same thing explicitly, so it can cross the bus."""
        given = self.model_fields_set
        reset = [name for name in SESSION_FIELDS if name in given and getattr(self, name) is None]
        changes = SessionConfigOverrides.model_validate(self.model_dump())
        return SessionConfigUpdate(thread_id=thread_id, set=changes, reset=reset)


class SessionConfigPatch(SessionConfigOverrides):
    """A client's change (HTTP body, WebSocket frame): unknown fields — ``user_id`` among
    them, which only the session sets — are refused rather than dropped."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", validate_by_name=True, validate_by_alias=True
    )


def effective(defaults: SessionConfig, overrides: SessionConfigOverrides | None) -> SessionConfig:
    """The defaults with ``overrides`` on top (null fields and types follow the defaults)."""
    if overrides is None:
        return defaults
    changed: dict[str, object] = {
        name: getattr(overrides, name)
        for name in SESSION_FIELDS
        if name != "memory_type_descriptions" and getattr(overrides, name) is not None
    }
    descriptions = dict(defaults.memory_type_descriptions)
    for name, text in (overrides.memory_type_descriptions or {}).items():
        if text is not None:
            descriptions[name] = text
    changed["memory_type_descriptions"] = {name: descriptions[name] for name in MEMORY_TYPES}
    return defaults.model_copy(update=changed)


# -- requests -------------------------------------------------------------------------------


class SessionConfigGet(ContractModel):
    """A thread's configuration. ``not_found`` (a ThreadFailure) for a thread the user does
    not have, unless ``defaults_if_missing``: a cycle's thread may not be stored yet."""

    type: Literal["session.get"] = "session.get"
    thread_id: ThreadId
    defaults_if_missing: bool = False


class SessionConfigUpdate(ContractModel):
    """Change a thread's overrides: fields of ``set`` that are not null are set, fields in
    ``reset`` go back to their defaults (reset wins over set)."""

    type: Literal["session.update"] = "session.update"
    thread_id: ThreadId
    set: SessionConfigOverrides = Field(default_factory=SessionConfigOverrides)
    reset: list[SessionField] = Field(default_factory=list, max_length=len(SESSION_FIELDS))


class SessionPersonaApplied(ContractModel):
    """A cycle ran after a persona switch: remember which agentHistory entry it applied
    and which turn after the switch it was, so the next cycle can tell a new switch from an
    old one. Answered with the thread's config, or ``not_found``."""

    type: Literal["session.persona_applied"] = "session.persona_applied"
    thread_id: ThreadId
    applied: PersonaApplied


# -- replies --------------------------------------------------------------------------------


class SessionConfigState(SuccessReply):
    type: Literal["session.config"] = "session.config"
    config: SessionConfig
    overrides: SessionConfigOverrides = Field(
        description="What the thread sets itself; null fields follow the defaults."
    )
    agent_history: list[AgentHistoryEntry] = Field(
        default_factory=list,
        alias="agentHistory",
        description="The thread's persona switches, oldest first (the latest ones kept).",
    )
    persona_applied: PersonaApplied | None = Field(
        default=None,
        description="What the thread's latest cycle after a switch applied (null: none yet).",
    )

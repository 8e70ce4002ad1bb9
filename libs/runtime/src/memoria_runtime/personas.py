"""The configured personas: the built-in default, plus the shipped examples or the
personas of ``MEMORIA_PERSONAS_FILE``.

Every service that needs them (gateway: list and check; memory: check; decision: resolve)
loads them at start, so a bad file stops the service with a message naming the file and the
field, rather than failing the first switch.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from memoria_contracts.personas import DEFAULT_PERSONA_ID, Persona
from memoria_runtime.settings import CycleSettings

EXAMPLES: Final = Path(__file__).parent / "data" / "personas.json"
MAX_PERSONAS: Final = 100

BUILT_IN: Final = Persona(
    id=DEFAULT_PERSONA_ID,
    name="Memoria",
    description="The default assistant: helpful, remembers what matters to you.",
    identity="You are Memoria, an assistant with long-term memory.",
)


class PersonaConfigError(ValueError):
    """The personas file cannot be used; the message says which file and why."""


class PersonaEntry(Persona):
    """A persona as the file spells it: a misspelt key (``stlye``) is an error, not dropped."""

    model_config = ConfigDict(**{**Persona.model_config, "extra": "forbid"})


class PersonaFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    personas: list[PersonaEntry] = Field(min_length=1, max_length=MAX_PERSONAS)

    @field_validator("personas")
    @classmethod
    def _unique(cls, personas: list[PersonaEntry]) -> list[PersonaEntry]:
        ids = [persona.id for persona in personas]
        repeated = sorted({i for i in ids if ids.count(i) > 1})
        if repeated:
            raise ValueError(f"persona ids must be unique; repeated: {', '.join(repeated)}")
        return personas


class PersonaCatalog:
    """The personas by id, in the file's order (the default first)."""

    def __init__(self, personas: list[Persona], default_id: str) -> None:
        self._by_id = {persona.id: persona for persona in personas}
        if default_id not in self._by_id:
            raise PersonaConfigError(
                f"MEMORIA_DEFAULT_PERSONA={default_id!r} is not a configured persona "
                f"(configured: {', '.join(self._by_id)})"
            )
        self.default_id = default_id

    def __iter__(self) -> Iterator[Persona]:
        default = self._by_id[self.default_id]
        yield default
        yield from (p for p in self._by_id.values() if p.id != self.default_id)

    def __contains__(self, persona_id: object) -> bool:
        return persona_id in self._by_id

    def get(self, persona_id: str) -> Persona | None:
        return self._by_id.get(persona_id)

    @property
    def default(self) -> Persona:
        return self._by_id[self.default_id]

    def resolve(self, persona_id: str) -> Persona:
        """The persona, or the default for an id no longer configured (a thread that chose a
        persona since removed from the file)."""
        return self._by_id.get(persona_id) or self.default


def read_persona_file(path: Path) -> list[Persona]:
    try:
        raw = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PersonaConfigError(f"personas file {path}: cannot read it: {exc}") from exc
    try:
        entries = PersonaFile.model_validate(json.loads(raw)).personas
        return [Persona.model_validate(entry.model_dump()) for entry in entries]
    except json.JSONDecodeError as exc:
        raise PersonaConfigError(f"personas file {path}: not JSON: {exc}") from exc
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or '(file)'}: {e['msg']}" for e in exc.errors()
        )
        raise PersonaConfigError(f"personas file {path}: {problems}") from exc


@functools.cache
def _catalog(personas_file: Path | None, default_id: str) -> PersonaCatalog:
    configured = read_persona_file(personas_file or EXAMPLES)
    redefined = any(persona.id == BUILT_IN.id for persona in configured)
    return PersonaCatalog([*([] if redefined else [BUILT_IN]), *configured], default_id)


def load_personas(settings: CycleSettings) -> PersonaCatalog:
    """The catalog the settings name (read once per file); :class:`PersonaConfigError` when
    the file cannot be used."""
    return _catalog(settings.personas_file, settings.default_persona)

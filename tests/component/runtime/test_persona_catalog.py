"""The configured personas: the built-in default, the shipped examples, a file's, and the
clear error a bad file gives at start."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memoria_runtime.personas import PersonaConfigError, load_personas
from memoria_runtime.settings import Settings


def settings(**values: object) -> Settings:
    return Settings.load(_env_file=None, **values)


def test_out_of_the_box_the_default_and_the_examples() -> None:
    catalog = load_personas(settings().cycle)
    assert next(p.id for p in catalog) == "memoria"
    assert {"memoria", "tutor", "coach"} <= {p.id for p in catalog}
    assert catalog.default.name == "Memoria"
    assert catalog.resolve("no-longer-there").id == "memoria"


def test_a_file_replaces_the_examples_and_may_set_the_default(tmp_path: Path) -> None:
    path = tmp_path / "personas.json"
    persona = {"id": "chef", "name": "Chef", "description": "Cooks.", "identity": "You cook."}
    path.write_text(json.dumps({"personas": [persona]}))
    catalog = load_personas(settings(personas_file=path, default_persona="chef").cycle)
    assert [p.id for p in catalog] == ["chef", "memoria"]
    assert "tutor" not in catalog


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not JSON"),
        ('{"personas": []}', "personas"),
        (
            '{"personas": [{"id": "Bad Id", "name": "x", "description": "y", "identity": "z"}]}',
            "id",
        ),
        (
            '{"personas": [{"id": "a", "name": "A", "description": "d", "identity": "i"},'
            ' {"id": "a", "name": "B", "description": "d", "identity": "i"}]}',
            "repeated: a",
        ),
        ('{"personas": [{"id": "a", "name": "A", "description": "d"}]}', "identity"),
        (
            '{"personas": [{"id": "a", "name": "A", "description": "d", "identity": "i",'
            ' "stlye": "x"}]}',
            "stlye",
        ),
    ],
)
def test_a_bad_file_is_a_clear_error(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(PersonaConfigError, match=message) as raised:
        load_personas(settings(personas_file=path).cycle)
    assert str(path) in str(raised.value)


def test_a_missing_file_or_default_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(PersonaConfigError, match="cannot read"):
        load_personas(settings(personas_file=tmp_path / "nope.json").cycle)
    with pytest.raises(PersonaConfigError, match="MEMORIA_DEFAULT_PERSONA='pirate'"):
        load_personas(settings(default_persona="pirate").cycle)


@pytest.mark.parametrize("service", ["memoria_decision", "memoria_gateway"])
def test_a_service_with_a_bad_file_stops_at_start_saying_why(tmp_path: Path, service: str) -> None:
    bad = tmp_path / "personas.json"
    bad.write_text('{"personas": [{"id": "chef"}]}')
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("MEMORIA_") or key == "MEMORIA_DATA_DIR"
    }
    env.update(MEMORIA_PERSONAS_FILE=str(bad), MEMORIA_DATA_DIR=str(tmp_path / "data"))
    done = subprocess.run(
        [sys.executable, "-m", service],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1
    assert f"personas file {bad}: personas.0.name: Field required" in done.stderr
    assert "Traceback" not in done.stderr

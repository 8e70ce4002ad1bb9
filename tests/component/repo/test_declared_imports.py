"""Every workspace package declares what it imports: a top-level import of another workspace
package or of a third-party distribution must be in the importing package's own
``[project] dependencies``. Otherwise the package works in the workspace (where everything is
installed) and breaks wherever it is installed alone, such as a service's image."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from functools import cache
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_name(requirement: str) -> str:
    match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement.strip())
    assert match, f"unreadable requirement {requirement!r}"
    return _normalized(match.group(0))


def _members() -> list[Path]:
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["uv"]["workspace"][
        "members"
    ]
    return sorted(path for pattern in patterns for path in ROOT.glob(pattern) if path.is_dir())


@cache
def _workspace_modules() -> dict[str, str]:
    """Import name -> distribution of each workspace package (editable installs are not in
    packages_distributions())."""
    modules: dict[str, str] = {}
    for member in _members():
        name = tomllib.loads((member / "pyproject.toml").read_text())["project"]["name"]
        for module in (member / "src").iterdir():
            if (module / "__init__.py").exists():
                modules[module.name] = _normalized(name)
    return modules


def _optional_imports(tree: ast.AST) -> set[ast.AST]:
    """Imports inside ``try: ... except ImportError``: used when present, not required."""
    optional: set[ast.AST] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(
            isinstance(handler.type, ast.Name)
            and handler.type.id in {"ImportError", "ModuleNotFoundError"}
            for handler in node.handlers
        ):
            optional.update(inner for stmt in node.body for inner in ast.walk(stmt))
    return optional


def _imported_modules(source_dir: Path) -> dict[str, str]:
    """Top-level module -> a file importing it (absolute, required imports only)."""
    found: dict[str, str] = {}
    for path in sorted(source_dir.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        optional = _optional_imports(tree)
        for node in ast.walk(tree):
            if node in optional:
                continue
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                found.setdefault(
                    name.partition(".")[0], path.relative_to(source_dir.parent).as_posix()
                )
    return found


def _undeclared(member: Path) -> list[str]:
    project = tomllib.loads((member / "pyproject.toml").read_text())["project"]
    # An extra counts: what only its modules import (memoria_client's MCP server) is
    # declared there.
    requirements = [
        *project.get("dependencies", []),
        *(r for extra in project.get("optional-dependencies", {}).values() for r in extra),
    ]
    declared = {_requirement_name(r) for r in requirements}
    own = {m for m, dist in _workspace_modules().items() if dist == _normalized(project["name"])}
    third_party = packages_distributions()
    problems: list[str] = []
    for module, where in sorted(_imported_modules(member / "src").items()):
        if module in own or module in sys.stdlib_module_names or module == "__future__":
            continue
        if module in _workspace_modules():
            candidates = {_workspace_modules()[module]}
        elif module in third_party:
            # A namespace package (google, opentelemetry) is shared by several
            # distributions: declaring any one that provides it is enough.
            candidates = {_normalized(dist) for dist in third_party[module]}
        else:
            problems.append(f"{module} (imported in {where}) is no installed distribution")
            continue
        if not candidates & declared:
            problems.append(f"{module} (imported in {where}) needs one of {sorted(candidates)}")
    return problems


@pytest.mark.parametrize("member", _members(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_each_import_is_declared_by_the_importing_package(member: Path) -> None:
    problems = _undeclared(member)
    assert not problems, f"{member.relative_to(ROOT)}/pyproject.toml: " + "; ".join(problems)


def test_the_check_sees_an_undeclared_import(tmp_path: Path) -> None:
    """The check itself: a package importing what it does not declare is flagged."""
    (tmp_path / "src" / "probe_pkg").mkdir(parents=True)
    (tmp_path / "src" / "probe_pkg" / "__init__.py").write_text(
        "import os\nimport yaml\nfrom memoria_runtime import settings\n"
    )
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "probe-pkg"\ndependencies = ["pyyaml>=6"]\n'
    )
    problems = _undeclared(tmp_path)
    assert len(problems) == 1 and problems[0].startswith("memoria_runtime"), problems

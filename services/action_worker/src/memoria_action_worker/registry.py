"""The action registry: adding an action is adding one module.

Actions register with the :func:`action` decorator. :func:`load_actions` imports every module
of ``memoria_action_worker.actions`` and every ``memoria.actions`` entry point (a module, or
a callable taking the registry), so third-party packages can add actions too.
"""

from __future__ import annotations

import importlib
import logging
import pkgutil
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from importlib.metadata import entry_points
from types import ModuleType
from typing import TYPE_CHECKING

from memoria_contracts.events import ActionOutcome, ActionSpec

if TYPE_CHECKING:
    from memoria_action_worker.context import ActionContext

log = logging.getLogger("memoria.action_worker.registry")

ENTRY_POINT_GROUP = "memoria.actions"

ActionFn = Callable[["ActionContext"], Awaitable[ActionOutcome]]


@dataclass(frozen=True)
class RegisteredAction:
    spec: ActionSpec
    run: ActionFn


class ActionRegistry:
    def __init__(self) -> None:
        self._actions: dict[str, RegisteredAction] = {}

    def register(self, spec: ActionSpec, run: ActionFn) -> None:
        if spec.name in self._actions:
            raise ValueError(f"action {spec.name} is registered twice")
        self._actions[spec.name] = RegisteredAction(spec=spec, run=run)

    def action(
        self, name: str, *, when_to_use: str, ends_cycle: bool = False
    ) -> Callable[[ActionFn], ActionFn]:
        """Register the decorated coroutine function as the action ``name``."""

        def decorate(run: ActionFn) -> ActionFn:
            self.register(
                ActionSpec(name=name, description=when_to_use, ends_cycle=ends_cycle), run
            )
            return run

        return decorate

    @property
    def names(self) -> list[str]:
        return list(self._actions)

    def enabled(self, disabled: Collection[str]) -> dict[str, RegisteredAction]:
        unknown = set(disabled) - set(self._actions)
        if unknown:
            log.warning("MEMORIA_ACTIONS_DISABLED names unknown actions: %s", sorted(unknown))
        return {name: a for name, a in self._actions.items() if name not in disabled}


REGISTRY = ActionRegistry()
action = REGISTRY.action


def _import_package_modules(package: ModuleType) -> None:
    for module in pkgutil.iter_modules(package.__path__, prefix=f"{package.__name__}."):
        importlib.import_module(module.name)


def load_actions(
    registry: ActionRegistry = REGISTRY, extra_modules: Collection[str] = ()
) -> ActionRegistry:
    """Import the built-in actions, the installed plugins and ``extra_modules``
    (MEMORIA_ACTION_MODULES); once per process."""
    # Imported by name: the action modules import this module to register themselves.
    _import_package_modules(importlib.import_module("memoria_action_worker.actions"))
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        loaded = entry.load()
        if callable(loaded) and not isinstance(loaded, ModuleType):
            loaded(registry)
        log.info("loaded action plugin %s", entry.name)
    for name in extra_modules:
        importlib.import_module(name)
        log.info("loaded action module %s", name)
    return registry

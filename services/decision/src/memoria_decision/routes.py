"""The route a cycle takes, decided once from the user's message before any LLM call and
kept in the cycle's state, so that a redelivered message follows the same route even after
the pending action it answered has been cleared."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from memoria_contracts.events import Language
from memoria_decision.pending import PendingAction, PendingKind

RouteKind = Literal[
    "model",
    "list_all",
    "ask_delete_all",
    "delete_all",
    "cancel",
    "update_chosen",
    "ask_choice",
    "forget_last",
    "forget_chosen",
    "expired",
]


class Route(BaseModel):
    kind: RouteKind
    """``model``: the ordinary thought cycle; anything else: a fast path, no LLM call."""
    language: Language
    resolves: str | None = None
    """The id of the pending action this message answered, replaced or dropped."""
    dropped: PendingKind | None = None
    """A pending action the message did not answer (neither yes nor no): it is dropped, the
    user is told, and the message is handled as usual."""
    expired: PendingKind | None = None
    """``expired``: the kind of question the message answered too late."""
    declined: bool = False
    """``cancel`` answered a pending action (rather than there being nothing to cancel)."""
    targets: list[str] | None = None
    """``delete_all``: the ids to delete, listed once and kept, so a redelivered cycle deletes
    the same memories and reports the same count (those already gone count as deleted)."""
    choice: PendingAction | None = None
    """``update_chosen``/``forget_chosen`` (with the chosen id as the one target) and
    ``ask_choice`` (a number with no such candidate: asked again): the ``choose_update`` or
    ``choose_forget`` pending action answered, kept here because the store's copy is
    cleared."""

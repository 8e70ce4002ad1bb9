"""The model's choice of the next action (``reasoningHeavy``: its name and nothing else), among
the actions live workers run: asked again while it names none of them, then Finalize. No
worker at all is most often a moment (services start in any order, a lone worker restarts in
seconds): waited for a while."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from opentelemetry import trace

from memoria_contracts.chat import utcnow
from memoria_contracts.events import ActionSpec
from memoria_contracts.ids import new_id
from memoria_contracts.memory import MEMORY_TYPES
from memoria_contracts.session import SessionConfig
from memoria_decision import SERVICE_NAME
from memoria_decision.core import events
from memoria_decision.core.state import CycleState
from memoria_llm.conversation import conversation, summary_text
from memoria_llm.persona_prompt import with_persona
from memoria_llm.port import LanguageModel, LLMError, LLMRequest, Mode, Prompt, PromptMessage
from memoria_runtime import accounting, keys
from memoria_runtime.catalog import live_actions
from memoria_runtime.settings import DecisionSettings

log = logging.getLogger("memoria.decision.chooser")

FALLBACK_ACTION: Final = "Finalize"
_WORKERS_POLL_S: Final = 0.25  # how often a cycle without workers looks for one
_TOKEN: Final = re.compile(r"[A-Za-z][A-Za-z0-9]*")


def match_action(answer: str, names: Sequence[str]) -> str | None:
    """The action an answer names: exact, ignoring case and punctuation, or the one named."""
    cleaned = answer.strip().strip("`'\".*: \n")
    if cleaned in names:
        return cleaned
    by_lower = {name.lower(): name for name in names}
    if cleaned.lower() in by_lower:
        return by_lower[cleaned.lower()]
    mentioned = {by_lower[t.lower()] for t in _TOKEN.findall(answer) if t.lower() in by_lower}
    return mentioned.pop() if len(mentioned) == 1 else None


@dataclass
class Chooser:
    settings: DecisionSettings
    redis: Any
    llm: LanguageModel

    async def choose(self, state: CycleState, entries: Mapping[bytes, bytes]) -> events.Event:
        """``entries``: the action catalog of the user's partition, as read. The decision's
        tokens go with what it leads to, a failed decision's too (they were spent)."""
        part = self.settings.bus.partitions.of(state.user_id)
        until = asyncio.get_running_loop().time() + self.settings.cycle.no_workers_wait_seconds
        while not (catalog := await live_actions(self.redis, entries, part)):
            if asyncio.get_running_loop().time() >= until:
                return events.Undecided(utcnow(), "no_workers")
            await asyncio.sleep(_WORKERS_POLL_S)
            entries = await self.redis.hgetall(keys.action_catalog(part))
        prices = self.settings.llm.llm_prices
        try:
            with accounting.spent(service=SERVICE_NAME, prices=prices) as spent:
                async with asyncio.timeout(self.settings.cycle.step_timeout_seconds):
                    action = await self._ask(state, catalog)
        except (LLMError, TimeoutError) as exc:
            detail = str(exc) or type(exc).__name__
            log.error("cycle %s: decision failed: %s", state.cycle_id, detail)
            return events.Undecided(utcnow(), "llm_error", detail, spent)
        spec = next((spec for spec in catalog if spec.name == action), None)
        tool_call = spec is not None and not spec.ends_cycle  # kept as tool-role history
        return events.Chosen(utcnow(), action, tool_call, new_id("evt"), spent)

    async def _ask(self, state: CycleState, catalog: Sequence[ActionSpec]) -> str:
        names = [spec.name for spec in catalog]
        rejected: list[str] = []
        model = self.llm.label(Mode.REASONING_HEAVY)
        for attempt in range(self.settings.cycle.decision_retries + 1):
            request = LLMRequest(
                task="decide",
                prompt=decision_prompt(
                    state, catalog, rejected, model=model, provider=self.llm.name
                ),
                input_json=state.context().model_dump_json(),
                attempt=attempt,
            )
            answer = await self.llm.reasoning_heavy(request, names)
            name = match_action(answer, names)
            if name is not None:
                return name
            rejected.append(answer.strip()[:80])
            log.warning("LLM named no known action (%r), attempt %d", answer[:80], attempt + 1)
        fallback = FALLBACK_ACTION if FALLBACK_ACTION in names else names[0]
        log.warning(
            "falling back to %s after %d unusable answers: %s", fallback, len(rejected), rejected
        )
        trace.get_current_span().add_event(
            "decision.fallback", {"fallback": fallback, "rejected": rejected}
        )
        return fallback


# -- the prompt -------------------------------------------------------------------------------

SYSTEM = (
    "This step decides what the assistant does next; it does not write to the user. "
    "You see the conversation, the user's original message, the actions already taken in "
    "this cycle and the actions available. Choose the ONE next action that moves toward what "
    "the user asked for. Reply with the action's exact name only: no punctuation, no "
    "explanation. Other steps will work out the details."
)


def decision_prompt(
    state: CycleState,
    catalog: Sequence[ActionSpec],
    rejected: Sequence[str] = (),
    *,
    model: str = "",
    provider: str = "",
) -> Prompt:
    """``model``/``provider``: who reads it (the persona's identity is worded for it)."""
    names = ", ".join(spec.name for spec in catalog)
    steps = "\n".join(f"{s.step}. {s.action} ({s.status}): {s.summary}" for s in state.steps)
    actions = "\n".join(f"- {spec.name}: {spec.description}" for spec in catalog)
    ask = (
        f"Original message from the user:\n<<<\n{state.original.content}\n>>>\n\n"
        f"Actions already taken in this cycle:\n{steps or '(none yet)'}\n\n"
        f"Available actions (name: when to use):\n{actions}\n\n"
    )
    if (question := state.routed.question) is not None:
        # The question the assistant ended the last cycle with, and the runtime's reading.
        said = "answers it" if question.answered else "does not answer it: treat it as new"
        ask += (
            f"The assistant last asked the user:\n<<<\n{question.assistant_question}\n>>>\n"
            f"By the runtime's reading, the user's message {said}.\n\n"
        )
    if rejected:
        ask += f"Your previous answer {', '.join(map(repr, rejected))} is not an action name.\n"
    ask += f"Reply with exactly one of: {names}"
    messages = [*conversation([*state.history, *state.transcript])]
    messages.append(PromptMessage(role="user", content=ask))
    system = SYSTEM + session_instructions(state.session)
    summary = summary_text(state.history_summary)  # bounded when the cycle started
    if summary:
        system = f"{system}\n\n{summary}"
    prompt = Prompt(system=system, messages=_alternate(messages))
    # The identity (or the reset) in the system text only: the ask wants an action name.
    return with_persona(prompt, state.persona, model=model, provider=provider, user_turn=False)


def session_instructions(session: SessionConfig | None) -> str:
    """The thread's system prompt and memory types, for the system text (none: no session)."""
    if session is None:
        return ""
    types = "\n".join(
        f"- {name}: {session.memory_type_descriptions[name]}" for name in MEMORY_TYPES
    )
    recall_note = (
        "\n\nMemories marked [memory found] right after the user's message were retrieved "
        "for it before this decision; do not search for them again."
        if session.proactive_retrieval
        else ""
    )
    return (
        f"\n\nInstructions for this conversation (the assistant's system prompt):\n<<<\n"
        f"{session.system_prompt}\n>>>\n\nMemory types:\n{types}{recall_note}"
    )


def _alternate(messages: list[PromptMessage]) -> list[PromptMessage]:
    """The ask is a user turn; merge it into a trailing user turn so roles still alternate."""
    merged: list[PromptMessage] = []
    for message in messages:
        if merged and merged[-1].role == message.role and merged[-1].plain and message.plain:
            merged[-1] = PromptMessage(
                role=message.role, content=f"{merged[-1].content}\n\n{message.content}"
            )
        else:
            merged.append(message)
    return merged

"""Ask the LLM for the next action until it names one that exists."""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence

from opentelemetry import trace

from memoria_contracts.events import ActionSpec
from memoria_decision.prompt import decision_prompt
from memoria_decision.state import CycleState
from memoria_llm.port import LanguageModel, LLMRequest, Mode

log = logging.getLogger("memoria.decision.chooser")

FALLBACK_ACTION = "Finalize"
_TOKEN = re.compile(r"[A-Za-z][A-Za-z0-9]*")


def match_action(answer: str, names: Sequence[str]) -> str | None:
    """The action an answer names: exact, then ignoring case, quotes and punctuation, then the
    only known name mentioned as a word. Anything ambiguous is not an answer."""
    cleaned = answer.strip().strip("`'\".*: \n")
    if cleaned in names:
        return cleaned
    by_lower = {name.lower(): name for name in names}
    if cleaned.lower() in by_lower:
        return by_lower[cleaned.lower()]
    mentioned = {by_lower[t.lower()] for t in _TOKEN.findall(answer) if t.lower() in by_lower}
    return mentioned.pop() if len(mentioned) == 1 else None


async def choose_action(
    llm: LanguageModel, state: CycleState, catalog: Sequence[ActionSpec], retries: int
) -> str:
    names = [spec.name for spec in catalog]
    rejected: list[str] = []
    for attempt in range(retries + 1):
        request = LLMRequest(
            task="decide",
            prompt=decision_prompt(
                state,
                catalog,
                rejected,
                model=llm.label(Mode.REASONING_HEAVY),
                provider=llm.name,
            ),
            input_json=state.context().model_dump_json(),
            attempt=attempt,
        )
        answer = await llm.reasoning_heavy(request, names)
        name = match_action(answer, names)
        if name is not None:
            return name
        rejected.append(answer.strip()[:80])
        log.warning("LLM named no known action (%r), attempt %d", answer[:80], attempt + 1)
    fallback = FALLBACK_ACTION if FALLBACK_ACTION in names else names[0]
    log.warning("falling back to %s after %d unusable answers: %s", fallback, retries + 1, rejected)
    trace.get_current_span().add_event(
        "decision.fallback", {"fallback": fallback, "rejected": rejected}
    )
    return fallback

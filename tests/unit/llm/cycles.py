"""A thought cycle driven by the offline planner alone: the planner picks each action, and
the "worker" here only records what a real one would add to the cycle (a step record; for a
search, memory cards with step-numbered ids). Enough to see the whole path the rules take."""

from __future__ import annotations

from collections.abc import Sequence

from memoria_contracts.chat import ChatRecord
from memoria_contracts.events import CycleContext, PendingQuestion, StepRecord
from memoria_llm.port import LLMRequest, Prompt
from memoria_offline import OfflineModel
from memoria_text.i18n import detect_language

ACTIONS = ["Finalize", "Question", "MemorySearch", "MemorySave", "MemoryUpdate", "MemoryDelete"]
ENDING = {"Finalize", "Question"}
MAX_STEPS = 8
CYCLE = "cyc_test"


def user_message(text: str, message_id: str = "msg_test") -> ChatRecord:
    return ChatRecord(
        id=message_id, chat_history=True, modal="text", role="user", content=text, cycle_id=CYCLE
    )


def memory_card(step: int, n: int, memory_id: str, content: str) -> ChatRecord:
    return ChatRecord(
        id=f"{CYCLE}.{step}.{n}",
        cycle_id=CYCLE,
        chat_history=True,
        modal="memory",
        role="system",
        content={"memory_id": memory_id, "memory_type": "user_profile", "content": content},
    )


def context_for(
    text: str,
    *,
    history: Sequence[ChatRecord] = (),
    transcript: Sequence[ChatRecord] = (),
    steps: Sequence[StepRecord] = (),
    question: PendingQuestion | None = None,
) -> CycleContext:
    """``question``: the one the message came after, as decision hands it over."""
    original = user_message(text)
    return CycleContext(
        original_message=original,
        history=list(history),
        transcript=[original, *transcript],
        steps=list(steps),
        language=detect_language(text),
        pending_question=question,
    )


def request(task: str, context: CycleContext, metadata: dict[str, str] | None = None) -> LLMRequest:
    return LLMRequest(
        task=task,
        prompt=Prompt(system="", messages=[]),
        input_json=context.model_dump_json(),
        metadata=metadata or {},
    )


async def run_cycle(
    text: str,
    *,
    found_per_search: Sequence[int] = (1,),
    found: Sequence[tuple[str, int]] | None = None,
    history: Sequence[ChatRecord] = (),
    choices: Sequence[str] = ACTIONS,
    question: PendingQuestion | None = None,
) -> list[str]:
    """The actions the offline planner takes for ``text``; the k-th search finds
    ``found_per_search[k]`` memories (the last number repeats), each a fact matching ``text``
    (a memory about what the message names). ``found`` instead: the memories every search
    shows, as (content, search number from 1) pairs."""
    model = OfflineModel()
    steps: list[StepRecord] = []
    transcript: list[ChatRecord] = []
    searches = 0
    while len(steps) < MAX_STEPS:
        context = context_for(
            text, history=history, transcript=transcript, steps=steps, question=question
        )
        action = await model.reasoning_heavy(request("decide", context), choices)
        step = len(steps) + 1
        steps.append(StepRecord(step=step, action=action, status="ok", summary=action))
        if action == "MemorySearch":
            count = found_per_search[min(searches, len(found_per_search) - 1)]
            searches += 1
            if found is not None:
                shown = [content for content, search in found if search == searches]
            else:
                shown = [f"{text} ({step}.{n})" for n in range(1, count + 1)]
            transcript += [
                memory_card(step, n, f"mem_s{step}n{n}", content)
                for n, content in enumerate(shown, start=1)
            ]
        if action in ENDING:
            break
    return [step.action for step in steps]

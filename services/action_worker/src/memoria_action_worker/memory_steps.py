"""What the four memory actions share: status lines, prompt blocks, the plan step, the
memory calls (always for the cycle's own user) and the closing explanation.

A step that cannot go on raises :class:`StepFailed`; :func:`guarded` turns it into ONE visible
notice and a failed outcome that does not end the cycle, so the next decision can react (the
runner would only log a generic error and the user would see nothing).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from memoria_action_worker.context import ActionContext
from memoria_action_worker.prompts import LANGUAGE_NAMES, agent_request, spoken
from memoria_contracts.chat import ChatRecord
from memoria_contracts.events import ActionOutcome
from memoria_contracts.memory import (
    MAX_CONTENT_CHARS,
    MEMORY_TYPES,
    ContentKind,
    EmbedPurpose,
    Memory,
    MemoryDelete,
    MemoryDeleted,
    MemoryEmbed,
    MemoryFailure,
    MemoryFound,
    MemorySave,
    MemorySaved,
    MemorySearch,
    MemoryUpdate,
    MemoryUpdated,
    MemoryVectors,
    content_size,
)
from memoria_contracts.text import as_text, one_line
from memoria_llm.port import LLMError, LLMOutputError, LLMRequest, Prompt
from memoria_runtime.bus.request_reply import RpcError
from memoria_text import i18n

log = logging.getLogger("memoria.action_worker.memory")

P = TypeVar("P", bound=BaseModel)
R = TypeVar("R")

Content = str | dict[str, Any] | list[Any]
"""What a memory holds: text, or a JSON object or list."""

SHORT_CONTENT_CHARS: Final = 60  # enough to recognise a memory in a one-line summary
MAX_SUMMARY_ITEMS: Final = 10  # a summary stays one readable line for the next decision
MAX_REASON_CHARS: Final = 300  # validation errors can be long; the outcome keeps the start
NONE: Final = "(none)"


# -- failures -------------------------------------------------------------------------------


class StepFailed(Exception):
    """The step cannot go on. ``notice`` is an i18n key shown to the user, ``reason`` a short
    English cause for the outcome, ``progress`` what was already done (for the summary, so
    the next decision does not redo it)."""

    def __init__(self, notice: str, reason: str, *, detail: str = "") -> None:
        super().__init__(reason)
        self.notice = notice
        self.reason = reason[:MAX_REASON_CHARS]
        self.detail = detail[:MAX_REASON_CHARS]
        self.progress = ""


async def guarded(
    ctx: ActionContext, name: str, work: Callable[[ActionContext], Awaitable[ActionOutcome]]
) -> ActionOutcome:
    """Run an action's body; a :class:`StepFailed` becomes one notice and a failed outcome."""
    try:
        return await work(ctx)
    except StepFailed as failure:
        log.warning("%s failed: %s", name, failure.reason)
        await ctx.chat.post(
            modal="text",
            role="system",
            chat_history=False,
            content=i18n.text(failure.notice, ctx.language, detail=failure.detail),
            closing=True,
        )
        summary = failure.reason  # the decision shows it after "<action> (failed): "
        if failure.progress:
            summary = f"{summary}; before that: {failure.progress}"
        return ActionOutcome(
            status="failed", ends_cycle=False, summary=summary, error=failure.reason
        )


# -- chat and prompt pieces -----------------------------------------------------------------


async def status(ctx: ActionContext, key: str) -> None:
    """A status line (``textForReplace``) in the user's language."""
    await ctx.chat.status(i18n.text(key, ctx.language))


def language_name(ctx: ActionContext) -> str:
    return LANGUAGE_NAMES[ctx.language]


def memory_types_block(ctx: ActionContext) -> str:
    """The memory types with their configured descriptions (injected into prompts)."""
    descriptions = ctx.session.memory_type_descriptions
    return "\n".join(f"- {name}: {descriptions[name]}" for name in MEMORY_TYPES)


def memories_in(records: Iterable[ChatRecord]) -> list[Memory]:
    """The memories shown as memory cards in ``records``, latest version of each, in order of
    first appearance. Cards that do not parse (an older format, a hand-edited history) are
    skipped: they can still be read in the conversation, they just cannot be acted on."""
    found: dict[str, Memory] = {}
    for record in records:
        if record.modal != "memory":
            continue
        try:
            memory = Memory.model_validate(record.content)
        except ValidationError:
            log.debug("memory card %s does not parse; skipped", record.id)
            continue
        found[memory.memory_id] = memory
    return list(found.values())


def short(content: Any) -> str:
    return one_line(content, SHORT_CONTENT_CHARS)


def describe(memory_id: str, content: Any) -> str:
    return f'{memory_id} ("{short(content)}")'


def listing(items: Sequence[str]) -> str:
    """Items joined on one line, the tail counted rather than listed."""
    shown = ", ".join(items[:MAX_SUMMARY_ITEMS])
    rest = len(items) - MAX_SUMMARY_ITEMS
    return f"{shown} and {rest} more" if rest > 0 else shown


def memories_count(count: int) -> str:
    return "1 memory" if count == 1 else f"{count} memories"


def outcome_summary(
    verb: str, done: Sequence[str], *, not_found: Sequence[str] = (), refused: Sequence[str] = ()
) -> str:
    """The step's one-line summary for the next decision: ``"<verb> 2 memories: a, b; not
    found: c; not <verb>: d (reason)"``."""
    summary = f"{verb} {memories_count(len(done))}"
    if done:
        summary = f"{summary}: {listing(done)}"
    if not_found:
        summary += f"; not found: {listing(not_found)}"
    if refused:
        summary += f"; not {verb}: {listing(refused)}"
    return summary


def memories_block(memories: Sequence[Memory]) -> str:
    """One line per memory, with the id a plan must use to refer to it."""
    if not memories:
        return NONE
    return "\n".join(
        f"- {m.memory_id} [{m.memory_type}] {as_text(m.content)} "
        f"(search keys: {'; '.join(m.bindings)})"
        for m in memories
    )


def memory_result(memory: Memory) -> dict[str, Any]:
    """A memory as the explanation prompt sees it: no timestamps, nothing to misread."""
    return {
        "memory_id": memory.memory_id,
        "memory_type": memory.memory_type,
        "content": memory.content,
    }


# -- contents -------------------------------------------------------------------------------


def kind_of(content: Content) -> ContentKind:
    return "text" if isinstance(content, str) else "json"


def check_content(kind: ContentKind, content: Content) -> None:
    """Reject in the plan what the memory service would refuse, so the model is re-asked
    instead of one item failing later."""
    if kind == "text" and not (isinstance(content, str) and content.strip()):
        raise ValueError('type "text" needs a non-empty string as content')
    if kind == "json" and isinstance(content, str):
        raise ValueError('type "json" needs an object or a list as content')
    if content_size(content) > MAX_CONTENT_CHARS:
        raise ValueError(f"content is longer than {MAX_CONTENT_CHARS} characters")


def bare_list_as(data: Any, key: str, item_key: str | None = None) -> Any:
    """Accept the answer shapes models give: a bare JSON list, or (with ``item_key``) a single
    item object, for a plan whose items live under ``key``."""
    if isinstance(data, list):
        return {key: data}
    if item_key is not None and isinstance(data, dict) and key not in data and item_key in data:
        return {key: [data]}
    return data


# -- the plan ---------------------------------------------------------------------------------


async def make_plan(
    ctx: ActionContext, *, task: str, schema: type[P], prompt: Prompt, invalid_notice: str
) -> P:
    """The step's structured plan, asked of the model in ``reasoning`` mode once per step
    (:meth:`ActionContext.plan`). Output that never fit ``schema`` fails the step."""
    request = LLMRequest(task=task, prompt=prompt, input_json=ctx.cycle.model_dump_json())

    async def produce() -> P:
        try:
            return await ctx.llm.reasoning(request, schema)
        except LLMOutputError as exc:
            # The validation details go to the log; the next decision only needs the gist.
            log.warning("%s: no valid plan: %s", task, exc)
            raise StepFailed(
                invalid_notice, f"the model's plan did not fit {schema.__name__}; nothing done"
            ) from exc

    return await ctx.plan(schema, produce)


# -- memory calls -----------------------------------------------------------------------------


def _required(reply: R | MemoryFailure) -> R:
    if isinstance(reply, MemoryFailure):
        raise StepFailed(
            "memory_rejected",
            f"the memory service refused ({reply.code}): {reply.error_message}",
            detail=reply.error_message,
        )
    return reply


@dataclass(frozen=True)
class MemoryCalls:
    """The memory service as one step uses it. Every call is made for ``ctx.user_id`` (the
    session's user; never an id a model wrote) in the step's thread and cycle. An unreachable
    service fails the step; other per-item failures are returned for the action to report."""

    ctx: ActionContext

    async def _ask(self, call: Awaitable[R | MemoryFailure]) -> R | MemoryFailure:
        try:
            reply = await call
        except (TimeoutError, RpcError) as exc:
            reason = str(exc) or type(exc).__name__
            raise StepFailed("memory_unavailable", f"memory service: {reason}") from exc
        if isinstance(reply, MemoryFailure) and reply.code == "unavailable":
            raise StepFailed(
                "memory_unavailable", f"memory service unavailable: {reply.error_message}"
            )
        if isinstance(reply, MemoryFailure) and reply.code == "storage_full":
            raise StepFailed("memory_storage_full", f"memory store full: {reply.error_message}")
        return reply

    async def embed(self, texts: list[str], purpose: EmbedPurpose) -> MemoryVectors:
        ctx = self.ctx
        reply = _required(
            await self._ask(
                ctx.memory.embed(
                    ctx.user_id,
                    MemoryEmbed(texts=texts, purpose=purpose),
                    thread_id=ctx.event.thread_id,
                    cycle_id=ctx.event.cycle_id,
                )
            )
        )
        if len(reply.vectors) != len(texts):
            raise StepFailed(
                "memory_rejected",
                f"the memory service embedded {len(reply.vectors)} of {len(texts)} texts",
                detail="embedding count mismatch",
            )
        return reply

    async def search(self, request: MemorySearch) -> MemoryFound:
        ctx = self.ctx
        return _required(
            await self._ask(
                ctx.memory.search(
                    ctx.user_id,
                    request,
                    thread_id=ctx.event.thread_id,
                    cycle_id=ctx.event.cycle_id,
                )
            )
        )

    async def save(self, request: MemorySave) -> MemorySaved | MemoryFailure:
        ctx = self.ctx
        return await self._ask(
            ctx.memory.save(
                ctx.user_id, request, thread_id=ctx.event.thread_id, cycle_id=ctx.event.cycle_id
            )
        )

    async def update(self, request: MemoryUpdate) -> MemoryUpdated | MemoryFailure:
        ctx = self.ctx
        return await self._ask(
            ctx.memory.update(
                ctx.user_id, request, thread_id=ctx.event.thread_id, cycle_id=ctx.event.cycle_id
            )
        )

    async def delete(self, memory_id: str) -> MemoryDeleted | MemoryFailure:
        ctx = self.ctx
        return await self._ask(
            ctx.memory.delete(
                ctx.user_id,
                MemoryDelete(memory_id=memory_id),
                thread_id=ctx.event.thread_id,
                cycle_id=ctx.event.cycle_id,
            )
        )


@dataclass
class Tally(Generic[R]):
    """What a step's calls on named memories came to, one memory at a time: done (the
    replies), not found, or refused (with the service's reason)."""

    verb: str
    describe: Callable[[R], str]
    done: list[R] = field(default_factory=list)
    not_found: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)

    def summary(self) -> str:
        done = [self.describe(reply) for reply in self.done]
        return outcome_summary(self.verb, done, not_found=self.not_found, refused=self.refused)

    async def add(self, memory_id: str, call: Awaitable[R | MemoryFailure]) -> None:
        """Await ``call`` on ``memory_id`` and file its reply. A failure that stops the step
        carries what was done before it (so the next decision does not redo it)."""
        reply = await with_progress(call, self.summary)
        if not isinstance(reply, MemoryFailure):
            self.done.append(reply)
        elif reply.code == "not_found":
            self.not_found.append(memory_id)
        else:
            self.refused.append(f"{memory_id} ({reply.error_message})")


async def with_progress(call: Awaitable[R], progress: Callable[[], str]) -> R:
    """``call``'s reply; a :class:`StepFailed` during it is told ``progress()`` first."""
    try:
        return await call
    except StepFailed as failure:
        failure.progress = progress()
        raise


# -- the closing explanation ----------------------------------------------------------------


async def explain(
    ctx: ActionContext,
    *,
    task: str,
    system: str,
    ask: str,
    results: object,
    bindings: dict[str, list[str]] | None = None,
) -> ChatRecord | None:
    """Stream the step's short explanation (chat-history true, role assistant); ``system``
    names the user's language as ``{language}``.
    ``results`` go into the prompt and, as JSON, into ``metadata["results"]`` for rule-based
    providers; ``bindings`` (each memory's search keys, by id) only into
    ``metadata["bindings"]``: rules read a memory's subject from its keys, a model from its
    content. A model failure here does not undo the memory work already done, so it is
    logged and the step still succeeds (reporting it as failed would invite a repeat)."""
    results_json = json.dumps(results, ensure_ascii=False, default=str)
    metadata = {"results": results_json}
    if bindings:
        metadata["bindings"] = json.dumps(bindings, ensure_ascii=False)
    request = agent_request(
        ctx,
        task,
        system.format(language=language_name(ctx)),
        f"{ask}\n\nResults (JSON):\n{results_json}",
        metadata=metadata,
    )
    try:
        return await spoken(ctx, request, chat_history=True)
    except LLMError as exc:
        log.warning("%s: no explanation, the model failed: %s", task, exc)
        return None


def succeeded(
    summary: str,
    messages: Sequence[ChatRecord | None],
    arguments: dict[str, Any] | None = None,
) -> ActionOutcome:
    """``arguments``: what the step's plan asked for, compact; decision keeps it as the
    step's tool call arguments in the thread's history."""
    return ActionOutcome(
        status="ok",
        ends_cycle=False,
        summary=summary,
        messages=[m for m in messages if m is not None],
        arguments=arguments,
    )

"""A stored thread with tool-role history, as the memory service keeps it: two cycles
that searched and saved memories, in the order their records were published."""

from __future__ import annotations

from memoria_contracts.chat import ChatRecord, ToolCall
from memoria_llm.conversation import conversation
from memoria_llm.port import LLMRequest, Prompt, PromptMessage

SYSTEM = "You are Memoria, a chat assistant with long-term memory."


def _text(record_id: str, cycle: str, role: str, content: object, **extra: object) -> ChatRecord:
    return ChatRecord.model_validate(
        {
            "id": record_id,
            "cycle_id": cycle,
            "chat-history": True,
            "modal": extra.pop("modal", "text"),
            "role": role,
            "content": content,
            **extra,
        }
    )


def call(cycle: str, step: int, name: str) -> ChatRecord:
    return _text(
        f"{cycle}.{step}.call",
        cycle,
        "assistant",
        "",
        tool_calls=[ToolCall(id=f"call_{cycle}_{step}", name=name, arguments={})],
    )


def result(cycle: str, step: int, name: str, content: str, *, with_id: bool = True) -> ChatRecord:
    extra: dict[str, object] = {"name": name}
    if with_id:
        extra["tool_call_id"] = f"call_{cycle}_{step}"
    return _text(f"{cycle}.{step}.result", cycle, "tool", content, **extra)


def user(cycle: str, content: str) -> ChatRecord:
    return _text(f"{cycle}.user", cycle, "user", content)


def answer(cycle: str, content: str) -> ChatRecord:
    return _text(f"{cycle}.answer", cycle, "assistant", content)


def card(cycle: str, n: int, content: str) -> ChatRecord:
    memory = {"memory_id": f"mem_{n}", "content": content, "memory_type": "preference"}
    return _text(f"{cycle}.card.{n}", cycle, "system", memory, modal="memory")


def thread() -> list[ChatRecord]:
    return [
        user("c1", "What is my favourite colour?"),
        call("c1", 1, "MemorySearch"),
        card("c1", 1, "favourite colour: green"),
        result("c1", 1, "MemorySearch", "found 1 memory"),
        answer("c1", "Your favourite colour is green."),
        user("c2", "Remember that I live in Lisbon."),
        call("c2", 1, "MemorySearch"),
        result("c2", 1, "MemorySearch", "found 0 memories"),
        call("c2", 2, "MemorySave"),
        result("c2", 2, "MemorySave", "saved 1 memory"),
        answer("c2", "Noted: you live in Lisbon."),
    ]


def request_with_tool_history() -> LLMRequest:
    messages = conversation(thread())
    messages.append(PromptMessage(role="user", content="Where do I live?"))
    return LLMRequest(task="decide", prompt=Prompt(system=SYSTEM, messages=messages))

"""Progressive summaries of a thread's history (ADR 11).

The memory service keeps them per thread, computed in the background: the newest messages
go to the LLM verbatim, the ones before them as a structured summary that keeps the turns
(one line per message, a tool result as one line such as ``MemorySearch: 3 found``), and
the oldest as an archived text summary.
"""

from __future__ import annotations

from pydantic import Field

from memoria_contracts.base import ContractModel


class SummaryTurn(ContractModel):
    """One cycle of the summarized part: its messages, one short line each."""

    cycle_id: str | None = None
    lines: list[str] = Field(description="e.g. 'user: …', 'MemorySearch: 3 found', 'assistant: …'")


class HistorySummary(ContractModel):
    turns: list[SummaryTurn] = Field(
        default_factory=list,
        description="The structured summary of the messages before the verbatim ones, oldest "
        "first.",
    )
    archive: str = Field(
        default="", description="A text summary of the messages older than the structured ones."
    )

    @property
    def empty(self) -> bool:
        return not self.turns and not self.archive

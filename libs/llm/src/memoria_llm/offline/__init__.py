"""The offline planner: the LLM port answered by rules when no model is configured."""

from memoria_llm.offline.model import LABEL, OfflineModel

__all__ = ["LABEL", "OfflineModel"]

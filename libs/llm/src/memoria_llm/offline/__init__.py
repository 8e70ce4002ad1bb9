"""The offline planner: the LLM port answered by rules when no model is configured."""

from memoria_llm.offline.model import OfflineModel
from memoria_llm.offline.replies import LABEL

__all__ = ["LABEL", "OfflineModel"]

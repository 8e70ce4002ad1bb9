"""The offline planner: the LLM port answered by rules when no model is configured."""

from memoria_offline.model import OfflineModel
from memoria_offline.replies import LABEL

__all__ = ["LABEL", "OfflineModel"]

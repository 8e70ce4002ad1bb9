"""The memory service's embedding model: it alone turns bindings and queries into vectors."""

from memoria_memory.embedding.port import Calibration, Embedder

__all__ = ["Calibration", "Embedder"]

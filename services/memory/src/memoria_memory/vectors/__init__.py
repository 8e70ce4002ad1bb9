"""Binding vectors: one row per binding, pointing to its memory document."""

from memoria_memory.vectors.port import (
    TextRow,
    VectorHit,
    VectorRow,
    VectorStore,
    collection_name,
)

__all__ = ["TextRow", "VectorHit", "VectorRow", "VectorStore", "collection_name"]

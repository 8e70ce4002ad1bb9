"""Open the vector store the settings name."""

from __future__ import annotations

from memoria_memory.vectors.milvus import MilvusVectorStore
from memoria_memory.vectors.port import VectorStore, collection_name
from memoria_runtime.settings import Settings

# The embedded milvus-lite searches unflushed rows slowly: flush after this many written
# rows, which keeps that cost to a few milliseconds (measurements in MilvusVectorStore).
# Milvus standalone seals segments itself.
EMBEDDED_FLUSH_AFTER_ROWS = 64


async def open_vector_store(settings: Settings, embedder_id: str, dim: int) -> VectorStore:
    """The opened collection of ``embedder_id``'s ``dim``-dimensional vectors, on the Milvus
    of ``MEMORIA_MILVUS_URI`` or else the embedded milvus-lite server of `memoria run`."""
    token = settings.milvus_token.get_secret_value() if settings.milvus_token else None
    embedded = settings.milvus_uri is None
    store = MilvusVectorStore(
        settings.effective_milvus_uri,
        collection_name(embedder_id, dim),
        dim,
        token=token,
        isolation=settings.vector_isolation,
        flush_after_rows=EMBEDDED_FLUSH_AFTER_ROWS if embedded else None,
    )
    await store.open()
    return store

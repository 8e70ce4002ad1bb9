"""Open the vector store the settings name."""

from __future__ import annotations

from redis.asyncio import Redis

from memoria_memory.vectors.cached import CachedVectorStore
from memoria_memory.vectors.milvus import MilvusVectorStore
from memoria_memory.vectors.port import VectorStore, collection_name
from memoria_memory.vectors.versions import VectorVersions
from memoria_runtime.settings import StorageSettings

MB = 1024 * 1024

# The embedded milvus-lite searches unflushed rows slowly: flush after this many written
# rows, which keeps that cost to a few milliseconds (measurements in MilvusVectorStore).
# Milvus standalone seals segments itself.
EMBEDDED_FLUSH_AFTER_ROWS = 64


async def open_vector_store(
    settings: StorageSettings, embedder_id: str, dim: int, broker: Redis | None = None
) -> VectorStore:
    """The opened collection of ``embedder_id``'s ``dim``-dimensional vectors, on the Milvus
    of ``MEMORIA_MILVUS_URI`` or else the embedded milvus-lite server of `memoria run`.

    With ``broker``, every write publishes the user's new vector version there (so replicas
    holding copies notice), and recently searched users' vectors are held in process within
    ``MEMORIA_VECTOR_CACHE_MB`` (``cached.CachedVectorStore``). Whatever may write vectors
    while a memory service runs must pass it; without it, only tools that read."""
    token = settings.effective_milvus_token
    embedded = settings.milvus_uri is None
    store: VectorStore = MilvusVectorStore(
        settings.effective_milvus_uri,
        collection_name(embedder_id, dim),
        dim,
        token=token,
        isolation=settings.vector_isolation,
        flush_after_rows=EMBEDDED_FLUSH_AFTER_ROWS if embedded else None,
    )
    if broker is not None:
        versions = VectorVersions(broker, store.collection)
        store = CachedVectorStore(store, versions, int(settings.vector_cache_mb * MB))
    await store.open()
    return store

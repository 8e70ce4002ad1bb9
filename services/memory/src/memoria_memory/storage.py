"""Everything the memory service owns, opened and closed together: documents, binding
vectors and the embedding model (so vector dimensions never mix)."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from redis.asyncio import Redis

from memoria_memory.cycle_summaries import COLLECTION as CYCLE_SUMMARY_COLLECTION
from memoria_memory.cycle_summaries import CycleSummaries
from memoria_memory.docstore import DocumentStore, open_document_store
from memoria_memory.embedding import Embedder
from memoria_memory.embedding.batching import CoalescingEmbedder
from memoria_memory.embedding.factory import create_embedder
from memoria_memory.faults import Faults
from memoria_memory.history import COLLECTION as HISTORY_COLLECTION
from memoria_memory.history import HistoryRepository
from memoria_memory.memories.access import AccessLog
from memoria_memory.memories.fusion import Fusion
from memoria_memory.memories.reads import MemoryReader, SearchDefaults
from memoria_memory.memories.reconciler import Reconciler
from memoria_memory.memories.repository import MemoryRepository
from memoria_memory.memories.writes import MemoryWriter
from memoria_memory.summarizer import COLLECTION as SUMMARY_COLLECTION
from memoria_memory.summarizer import HistorySummarizer, SummaryBounds, SummaryStore
from memoria_memory.vectors import VectorStore
from memoria_memory.vectors.factory import open_vector_store
from memoria_runtime import redis_clients
from memoria_runtime.settings import MemoryServiceSettings

log = logging.getLogger("memoria.memory")


@dataclass
class MemoryStorage:
    documents: DocumentStore
    history: HistoryRepository
    cycle_summaries: CycleSummaries
    embedder: Embedder
    vectors: VectorStore
    reader: MemoryReader
    writer: MemoryWriter
    reconciler: Reconciler
    summaries: SummaryStore
    summarizer: HistorySummarizer
    broker: Redis
    """Where the vectors' versions are published (``vectors.versions``)."""

    @classmethod
    async def open(cls, settings: MemoryServiceSettings) -> MemoryStorage:
        documents = await open_document_store(settings.storage.effective_docstore_url)
        history = HistoryRepository(documents.collection(HISTORY_COLLECTION))
        await history.setup()
        cycle_summaries = CycleSummaries(
            documents.collection(CYCLE_SUMMARY_COLLECTION), documents.collection(HISTORY_COLLECTION)
        )
        await cycle_summaries.setup()
        summaries = SummaryStore(documents.collection(SUMMARY_COLLECTION))
        summarizer = HistorySummarizer(
            history,
            summaries,
            SummaryBounds(
                verbatim=settings.cycle.history_verbatim_messages,
                structured=settings.cycle.history_structured_messages,
                archive_chars=settings.cycle.history_archive_chars,
            ),
            delay_s=settings.cycle.history_summary_delay_seconds,
        )
        memories = MemoryRepository(documents)
        await memories.setup()
        # The embedder makes an LLM client only when it embeds through the LLM provider.
        # Concurrent saves and searches share engine calls (batches are much faster per text).
        embedder = CoalescingEmbedder(create_embedder(settings))
        broker = redis_clients.connect(settings.bus)
        vectors = await open_vector_store(settings.storage, embedder.id, embedder.dim, broker)
        writer = MemoryWriter(memories, vectors, embedder, Faults(settings.memory.fault_injection))
        access = AccessLog(memories)
        access.start()
        log.info(
            "memories: %s retrieval, embedder %s (%d-dim), vectors in %s, up to %g MB of them "
            "held in process",
            settings.memory.memory_retrieval,
            embedder.id,
            embedder.dim,
            vectors.collection,
            settings.storage.vector_cache_mb,
        )
        return cls(
            documents=documents,
            history=history,
            cycle_summaries=cycle_summaries,
            embedder=embedder,
            vectors=vectors,
            reader=MemoryReader(
                memories,
                vectors,
                embedder,
                SearchDefaults(
                    limit=settings.memory.memory_limit,
                    min_relevance=settings.memory.memory_min_relevance,
                ),
                access,
                Fusion(retrieval=settings.memory.memory_retrieval),
            ),
            writer=writer,
            reconciler=Reconciler(memories, vectors, writer),
            summaries=summaries,
            summarizer=summarizer,
            broker=broker,
        )

    async def close(self) -> None:
        await self.summarizer.aclose()
        await self.reader.access.close()
        await self.vectors.close()
        await self.broker.aclose()
        await self.embedder.aclose()
        await self.documents.close()

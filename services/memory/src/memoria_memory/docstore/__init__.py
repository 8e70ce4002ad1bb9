"""The memory service's document store: one port, SQLite and MongoDB adapters."""

from memoria_memory.docstore.factory import open_document_store
from memoria_memory.docstore.port import (
    Collection,
    Document,
    DocumentStore,
    DocumentStoreError,
    DuplicateKeyError,
    Filter,
    SortSpec,
    UnsupportedFilter,
)

__all__ = [
    "Collection",
    "Document",
    "DocumentStore",
    "DocumentStoreError",
    "DuplicateKeyError",
    "Filter",
    "SortSpec",
    "UnsupportedFilter",
    "open_document_store",
]

"""Open the document store a URL names."""

from __future__ import annotations

from pathlib import Path

from memoria_memory.docstore.port import DocumentStore

_SQLITE_PREFIX = "sqlite://"
_MONGO_PREFIXES = ("mongodb://", "mongodb+srv://")


async def open_document_store(url: str) -> DocumentStore:
    """``sqlite:///<absolute path>`` (parent directories are created) or a MongoDB URL
    (``mongodb://`` / ``mongodb+srv://``; the database is the URL's path, else "memoria")."""
    if url.startswith(_SQLITE_PREFIX + "/"):
        from memoria_memory.docstore.sqlite import SqliteDocumentStore

        # "sqlite:///data/x.db" and "sqlite:////data/x.db" both mean /data/x.db: settings
        # build the URL by appending an absolute path to "sqlite:///".
        path = "/" + url.removeprefix(_SQLITE_PREFIX).lstrip("/")
        return await SqliteDocumentStore.open(Path(path))
    if url.startswith(_MONGO_PREFIXES):
        from memoria_memory.docstore.mongo import MongoDocumentStore

        return MongoDocumentStore.from_url(url)
    # Only the scheme is echoed: the rest of a URL may carry credentials.
    scheme = url.partition("://")[0] if "://" in url else "(none)"
    raise ValueError(
        f"unsupported document store URL scheme {scheme!r}: use sqlite:///<absolute path>, "
        "mongodb://… or mongodb+srv://…"
    )

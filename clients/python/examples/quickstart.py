"""Save a memory, find it, change it, read its history, delete it."""

import os

from memoria_client import Memoria

with Memoria() as memoria:  # MEMORIA_URL, else http://127.0.0.1:8000
    if not memoria.token:
        memoria.login(os.environ.get("MEMORIA_USER", "demo"))
    saved = memoria.add("Prefers window seats", ["seat preference"], memory_type="preference")
    print("saved", saved.memory_id)
    for memory in memoria.search("where do I like to sit on a plane?", min_relevance=0.0):
        print(f"  found {memory.content!r} ({memory.relevance_score:.2f})")
    memoria.update(saved.memory_id, content="Prefers aisle seats")
    memoria.delete(saved.memory_id)
    print("history:", [change.kind for change in memoria.history(saved.memory_id).changes])

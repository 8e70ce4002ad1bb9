"""Long-term memories: documents (source of truth) + binding vectors, written crash-safely."""

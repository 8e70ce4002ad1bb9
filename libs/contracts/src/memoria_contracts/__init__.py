"""The vocabulary every Memoria service shares: chat messages, events, frames, stream names."""

"""`memoria chat`: a terminal chat client for a running gateway (WebSocket + HTTP API)."""

from memoria_cli.chat.repl import run_chat

__all__ = ["run_chat"]

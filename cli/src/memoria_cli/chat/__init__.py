"""`memoria chat`: a terminal chat client for a running gateway, on memoria_client (its
long-lived chat connection and its HTTP calls)."""

from memoria_cli.chat.repl import run_chat

__all__ = ["run_chat"]

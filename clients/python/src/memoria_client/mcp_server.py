"""A Model Context Protocol server over a Memoria gateway: memory tools and chat for Claude
Desktop, Cursor or any MCP client, on stdio or streamable HTTP.

It lives in the client package, as the optional extra ``mcp``, because it needs nothing but
the client: an MCP client on a laptop reaching a remote Memoria can run ``memoria-mcp``
without installing the broker and vector store that the ``memoria`` CLI brings.

The user is always the token's: ``MEMORIA_TOKEN`` on stdio, each request's
``Authorization: Bearer`` on HTTP (passed on to the gateway as it is). No tool takes a user.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Annotated, Any, Final, Literal

from pydantic import AwareDatetime, BaseModel, Field

from memoria_client.client import AsyncMemoria, default_url
from memoria_client.errors import ChatError, GatewayUnreachable, MemoriaError, NotFound
from memoria_client.models import (
    DeletedMemory,
    Memory,
    MemoryHistory,
    MemoryPage,
    MemoryType,
    MemoryUpdate,
)

try:
    from mcp.server.mcpserver import Context, MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp_types import ToolAnnotations
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "the MCP server needs the 'mcp' extra: pip install './clients/python[mcp]' "
        "from a checkout of the Memoria repository"
    ) from exc

Transport = Literal["stdio", "http"]
NAME: Final = "memoria"
INSTRUCTIONS: Final = (
    "Memoria keeps the user's long-term memories: facts about them, preferences, goals, "
    "constraints and critical information. Search before answering questions about the "
    "user; save what they ask you to remember; update a memory rather than adding a "
    "near-duplicate; use chat to ask Memoria's own agent, which searches and saves by itself."
)
READ: Final = ToolAnnotations(readOnlyHint=True, openWorldHint=False)
WRITE: Final = ToolAnnotations(readOnlyHint=False, destructiveHint=False, openWorldHint=False)
DESTROY: Final = ToolAnnotations(readOnlyHint=False, destructiveHint=True, openWorldHint=False)

MemoryId = Annotated[
    str, Field(min_length=1, max_length=200, description="A memory's id, e.g. 'mem_01j…'.")
]
Bindings = Annotated[
    list[Annotated[str, Field(min_length=1, max_length=300)]],
    Field(
        min_length=1,
        max_length=16,
        description="1-16 short phrases the memory should be found by (semantic search "
        "matches them), e.g. ['seat preference', 'flying'].",
    ),
]
Content = Annotated[
    str | dict[str, Any] | list[Any],
    Field(description="The memory: a sentence about the user, or a JSON object or list."),
]
TypeField = Annotated[
    MemoryType,
    Field(
        description="user_profile: who the user is; preference: likes and dislikes; goal: "
        "what they aim for; constraint: limits to respect (allergies, budget); "
        "critical_info: must never be forgotten."
    ),
]


class ChatAnswer(BaseModel):
    """Memoria's answer to one chat message."""

    answer: str = Field(description="What the assistant said.")
    actions: list[str] = Field(description="The steps it took, in order (e.g. MemorySearch).")
    memories: list[Any] = Field(description="The memories it found or saved for this answer.")
    thread_id: str
    cycle_id: str | None = Field(description="Look up the full trace with this id.")
    reason: str = Field(description="Why the cycle ended: 'done' unless something failed.")


class Tokens:
    """Where the token of the current call comes from."""

    def __init__(self, transport: Transport, token: str | None) -> None:
        self.transport = transport
        self.token = token

    def of(self, ctx: Context) -> str:
        if self.transport == "stdio":
            if not self.token:
                raise ToolError("no Memoria token: set MEMORIA_TOKEN in the server's environment")
            return self.token
        header = (ctx.headers or {}).get("authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise ToolError("send your Memoria token as 'Authorization: Bearer <token>'")
        return token.strip()


def _refusal(exc: MemoriaError) -> ToolError:
    """A gateway refusal as a message the model can act on."""
    if isinstance(exc, NotFound):
        return ToolError("not found: no such memory of yours")
    if isinstance(exc, GatewayUnreachable):
        return ToolError(f"Memoria is not reachable: {exc}")
    return ToolError(str(exc))


def build_server(base_url: str, transport: Transport, token: str | None = None) -> MCPServer:
    tokens = Tokens(transport, token)

    @asynccontextmanager
    async def memoria(ctx: Context) -> AsyncIterator[AsyncMemoria]:
        async with AsyncMemoria(base_url, tokens.of(ctx)) as client:
            try:
                yield client
            except MemoriaError as exc:
                raise _refusal(exc) from None

    server = MCPServer(NAME, instructions=INSTRUCTIONS)

    @server.tool(annotations=WRITE)
    async def add_memory(
        content: Content,
        ctx: Context,
        bindings: Bindings | None = None,
        memory_type: TypeField = "user_profile",
    ) -> Memory:
        """Save a new long-term memory about the user. Without bindings, a text memory is
        found by its own words; a JSON memory needs bindings."""
        if bindings is None and not isinstance(content, str):
            raise ToolError("a JSON memory needs bindings: the phrases it should be found by")
        async with memoria(ctx) as client:
            return await client.add(content, bindings, memory_type=memory_type)

    @server.tool(annotations=READ)
    async def search_memories(
        ctx: Context,
        *,
        query: Annotated[
            str | None,
            Field(
                min_length=1,
                max_length=1000,
                description="What to look for, in words (semantic search). Leave out with "
                "mode 'chronological'.",
            ),
        ] = None,
        mode: Annotated[
            Literal["semantic", "chronological"],
            Field(description="semantic: most relevant first; chronological: newest first."),
        ] = "semantic",
        memory_type: Annotated[MemoryType | None, Field(description="Only this type.")] = None,
        limit: Annotated[int | None, Field(ge=1, le=100, description="At most this many.")] = None,
        min_relevance: Annotated[
            float | None,
            Field(ge=0, le=1, description="Semantic only: least relevance_score (0-1)."),
        ] = None,
        since: Annotated[
            AwareDatetime | None,
            Field(
                description="Only memories told at or after this time: ISO 8601 with offset, "
                "e.g. '2026-11-16T00:00:00Z'."
            ),
        ] = None,
        until: Annotated[
            AwareDatetime | None,
            Field(description="Only memories told before this time (ISO 8601 with offset)."),
        ] = None,
    ) -> list[Memory]:
        """Find the user's memories: by meaning (semantic, each with a relevance_score) or
        the latest ones (chronological), optionally only those told within since/until.
        For "what did I tell you last week?": mode 'chronological', since = last week's
        Monday 00:00 and until = this week's Monday 00:00 (in the user's time zone, from
        today's date); add a query with mode 'semantic' when a topic is named too."""
        if mode == "semantic" and query is None:
            raise ToolError("a semantic search needs a query (or use mode 'chronological')")
        if since is not None and until is not None and since > until:
            raise ToolError("since must not be later than until")
        async with memoria(ctx) as client:
            return await client.search(
                *([query] if query and mode == "semantic" else []),
                mode=mode,
                memory_type=memory_type,
                limit=limit,
                min_relevance=min_relevance,
                since=since,
                until=until,
            )

    @server.tool(annotations=READ)
    async def get_memory(memory_id: MemoryId, ctx: Context) -> Memory:
        """Read one memory by its id."""
        async with memoria(ctx) as client:
            return await client.get(memory_id)

    @server.tool(annotations=WRITE)
    async def update_memory(
        memory_id: MemoryId,
        ctx: Context,
        content: Content | None = None,
        memory_type: TypeField | None = None,
        bindings: Bindings | None = None,
    ) -> MemoryUpdate:
        """Change a memory: its content, its type or its bindings (at least one). New
        bindings replace all the old ones."""
        if content is None and memory_type is None and bindings is None:
            raise ToolError("nothing to change: give content, memory_type or bindings")
        async with memoria(ctx) as client:
            return await client.update(
                memory_id, content=content, memory_type=memory_type, bindings=bindings
            )

    @server.tool(annotations=DESTROY)
    async def delete_memory(memory_id: MemoryId, ctx: Context) -> DeletedMemory:
        """Delete a memory for good (its history keeps a record of the deletion)."""
        async with memoria(ctx) as client:
            return await client.delete(memory_id)

    @server.tool(annotations=READ)
    async def list_memories(
        ctx: Context,
        memory_type: Annotated[MemoryType | None, Field(description="Only this type.")] = None,
        limit: Annotated[int, Field(ge=1, le=500, description="Memories per page.")] = 50,
        cursor: Annotated[
            str | None,
            Field(min_length=1, description="next_cursor of the previous page, for the next."),
        ] = None,
    ) -> MemoryPage:
        """List the user's memories, newest first, a page at a time (next_cursor is null on
        the last page)."""
        async with memoria(ctx) as client:
            return await client.list_page(memory_type=memory_type, limit=limit, cursor=cursor)

    @server.tool(annotations=READ)
    async def memory_history(memory_id: MemoryId, ctx: Context) -> MemoryHistory:
        """Every change of a memory, oldest first: created, updated, deleted, with when,
        from where (chat, api, import) and the content before and after."""
        async with memoria(ctx) as client:
            return await client.history(memory_id)

    @server.tool(annotations=WRITE)
    async def chat(
        message: Annotated[
            str, Field(min_length=1, max_length=8000, description="What to say to Memoria.")
        ],
        ctx: Context,
        thread: Annotated[
            str,
            Field(
                pattern=r"^[A-Za-z0-9._-]{1,64}$",
                description="The conversation to continue (letters, digits, . _ -).",
            ),
        ] = "mcp",
    ) -> ChatAnswer:
        """Send a message to Memoria's own agent in a thread and return its answer, with the
        steps it took and the memories it used. It may save or change memories itself."""
        async with memoria(ctx) as client:
            try:
                reply = await client.ask(message, thread=thread)
            except ChatError as exc:
                raise ToolError(f"the chat was refused: {exc}") from None
        return ChatAnswer(
            answer=reply.answer,
            actions=reply.actions,
            memories=[
                m.model_dump(mode="json") if isinstance(m, Memory) else m for m in reply.memories
            ],
            thread_id=reply.thread_id,
            cycle_id=reply.cycle_id,
            reason=reply.reason,
        )

    return server


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="memoria-mcp", description="Memoria's memories and chat as MCP tools."
    )
    parser.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    parser.add_argument("--url", help="the gateway (default: $MEMORIA_URL or the local one)")
    parser.add_argument("--host", default="127.0.0.1", help="HTTP transport: address to bind")
    parser.add_argument("--port", type=int, default=8765, help="HTTP transport: port")
    return parser.parse_args(argv)


def serve(transport: Transport, url: str | None, host: str, port: int) -> None:
    """Run until stopped. stdio needs ``MEMORIA_TOKEN``; HTTP takes each request's bearer."""
    base_url = url or default_url()
    if transport == "stdio":
        token = os.environ.get("MEMORIA_TOKEN")
        if not token:
            raise SystemExit("memoria mcp: set MEMORIA_TOKEN to the token of the user to serve")
        build_server(base_url, "stdio", token).run("stdio")
    else:
        server = build_server(base_url, "http")
        server.run("streamable-http", host=host, port=port, stateless_http=True)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    serve(args.transport, args.url, args.host, args.port)


if __name__ == "__main__":  # pragma: no cover
    main()

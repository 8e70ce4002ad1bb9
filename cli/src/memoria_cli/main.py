"""The `memoria` command line."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import threading
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from memoria_runtime.settings import AuthSettings, Settings

if TYPE_CHECKING:
    from memoria_cli.gateway_client import Connection

app = typer.Typer(no_args_is_help=True, add_completion=False)

GatewayUrl = Annotated[
    str | None,
    typer.Option(
        "--url",
        help="The running gateway's address. Default: $MEMORIA_URL, else "
        "http://127.0.0.1:$MEMORIA_GATEWAY_PORT (8000 unless set).",
        show_default=False,
    ),
]
Token = Annotated[
    str | None,
    typer.Option("--token", help="A session token. Default: $MEMORIA_TOKEN.", show_default=False),
]
User = Annotated[
    str | None,
    typer.Option(
        "--user",
        metavar="USER_ID",
        help="Log in as USER_ID through the gateway's dev login instead of a token.",
        show_default=False,
    ),
]


@app.callback()
def main() -> None:
    """Memoria: a chat agent with long-term memory."""
    from memoria_runtime.redaction import install_log_redaction

    install_log_redaction()  # whatever a command or a library logs, without credentials


def connection(url: str | None, token: str | None, user: str | None) -> Connection:
    """The gateway every command that uses one talks to (gateway_url's rule), and as whom."""
    from pydantic import ValidationError

    from memoria_cli.gateway_client import Connection, gateway_url

    try:
        return Connection(gateway_url(url), token=token, user=user)
    except ValidationError as exc:  # MEMORIA_GATEWAY_PORT (or another setting) is not valid
        for error in exc.errors(include_input=False):  # inputs may be secrets
            typer.echo(
                f"invalid setting {'.'.join(map(str, error['loc']))}: {error['msg']}", err=True
            )
        raise typer.Exit(2) from exc


@app.command()
def run() -> None:
    """Start the broker and the four services; Ctrl-C stops everything."""
    from memoria_cli.run import run as run_memoria  # keeps other commands' start-up light

    raise typer.Exit(asyncio.run(run_memoria(Settings.load())))


@app.command()
def docs(
    root: Annotated[Path, typer.Option(help="Repository root holding docs/.")] = Path("."),
) -> None:
    """Regenerate docs/asyncapi/*.yaml, docs/configuration.md's settings table and the
    cluster overlay's KEDA triggers."""
    from memoria_cli.docs import write_docs

    for path in write_docs(root.resolve()):
        typer.echo(f"wrote {path}")


@app.command()
def export(
    output: Annotated[
        str, typer.Option("--output", "-o", metavar="FILE|-", help="Where to write; - is stdout.")
    ] = "-",
    url: GatewayUrl = None,
    token: Token = None,
    user: User = None,
) -> None:
    """Write your memories as JSON Lines, one memory per line, newest first."""
    from memoria_cli.transfer import run_export

    raise typer.Exit(run_export(connection(url, token, user), output))


@app.command("import")
def import_(
    source: Annotated[
        str,
        typer.Argument(
            metavar="FILE|-",
            help='JSON Lines as export writes them (or {"content": "…"} a line); - is stdin.',
        ),
    ],
    url: GatewayUrl = None,
    token: Token = None,
    user: User = None,
) -> None:
    """Create the memories of a JSON Lines file. Safe to repeat: nothing is created twice.
    Bad lines are reported and skipped; the exit code is 1 if any line failed."""
    from memoria_cli.transfer import run_import

    raise typer.Exit(run_import(connection(url, token, user), source))


@app.command()
def chat(
    url: GatewayUrl = None,
    token: Token = None,
    user: User = None,
    thread: Annotated[
        str | None,
        typer.Option("--thread", metavar="THREAD_ID", help="Thread to chat in. Default: main."),
    ] = None,
) -> None:
    """Chat in the terminal. Type /help for the commands; Ctrl-D leaves. Without a
    terminal, each line of standard input is sent in turn, each reply awaited."""
    from memoria_cli.chat import run_chat

    raise typer.Exit(run_chat(connection(url, token, user), thread))


@app.command()
def token(
    user_id: Annotated[str, typer.Argument(metavar="USER_ID", help="Who the token logs in.")],
    ttl: Annotated[
        int | None,
        typer.Option(
            min=60,
            metavar="SECONDS",
            help="Lifetime, at most MEMORIA_TOKEN_TTL_SECONDS (the longest a gateway honours "
            "a token). Default: MEMORIA_TOKEN_TTL_SECONDS.",
        ),
    ] = None,
    create_secret: Annotated[
        bool,
        typer.Option(
            "--create-secret",
            help="Without MEMORIA_AUTH_SECRET, and no Memoria has used the data directory "
            "yet: make the secret there (for a Memoria that will use this directory).",
        ),
    ] = False,
) -> None:
    """Print a session token for USER_ID, signed with MEMORIA_AUTH_SECRET (or the secret
    `memoria run` keeps in the data directory, MEMORIA_DATA_DIR). This is how people log in
    where the dev login is off: e.g. `docker compose exec gateway memoria token ana`."""
    from pydantic import TypeAdapter, ValidationError

    from memoria_cli.tokens import TokenRefused, issuer_for
    from memoria_contracts.events import UserId

    try:
        valid = TypeAdapter(UserId).validate_python(user_id)
    except ValidationError as exc:
        typer.echo(f"not a valid user id: {exc.errors()[0]['msg']}", err=True)
        raise typer.Exit(2) from exc
    try:
        issuer = issuer_for(AuthSettings(), ttl, create_secret=create_secret)
    except TokenRefused as exc:
        typer.echo(f"memoria token: {exc}", err=True)
        raise typer.Exit(2) from exc
    typer.echo(issuer.issue(valid))


DOCTOR_TIMEOUT_S = 5.0


@app.command()
def doctor(
    json_output: Annotated[
        bool, typer.Option("--json", help="Print a machine-readable report.")
    ] = False,
    timeout: Annotated[
        float, typer.Option(min=0.1, metavar="SECONDS", help="Time each check may take.")
    ] = DOCTOR_TIMEOUT_S,
) -> None:
    """Show what the settings select and check that every part answers: broker, Milvus,
    document store, embedder, LLM, and the four services (memory, decision, action workers,
    gateway), and that they are the Memoria of this data directory, not another one on this
    machine. Exit code 1 if a check failed (warnings, e.g. Memoria not running yet, do not
    count). With Gemini it makes one tiny paid call per model (a fraction of a cent)."""
    from memoria_cli.doctor import main as run_doctor

    raise typer.Exit(run_doctor(json_output=json_output, timeout=timeout))


# The memory service's own maintenance module: the CLI runs it, never imports it.
MEMORY_ADMIN_MODULE = "memoria_memory.admin"
REEMBED_DEFAULT_BATCH = 200
RELAY_JOIN_S = 5.0  # the progress display's last draw, once the admin command has exited
# Paragraphs of one line each: typer keeps a help paragraph's line breaks as written.
REEMBED_HELP = (
    "Re-embed every memory with the embedding model the settings select now.\n\n"
    "Run it after changing MEMORIA_EMBEDDER or the Gemini key (or the embedding model or "
    "dimension), with the same settings (environment, .env) as the memory service. It asks "
    "first: with a paid embedding API a migration costs money.\n\n"
    "It can run while Memoria runs (SQLite and Milvus both take a second client), and must "
    "with the embedded Milvus, which runs inside `memoria run`. Memories become searchable "
    "with the new model as they migrate; restart Memoria with the new settings to search "
    "with it. Safe to interrupt and to repeat: it continues where it stopped.\n\n"
    "--drop-old is best used after that restart: it migrates what was saved meanwhile, then "
    "drops the old vector collections - unless a memory failed to migrate."
)


@app.command(help=REEMBED_HELP)
def reembed(
    batch: Annotated[
        int, typer.Option(min=1, help="Memories embedded and written per step.")
    ] = REEMBED_DEFAULT_BATCH,
    drop_old: Annotated[
        bool,
        typer.Option(
            "--drop-old",
            help="Afterwards drop the old vector collections, if every memory migrated.",
        ),
    ] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    from memoria_cli.progress import relay

    argv = [sys.executable, "-m", MEMORY_ADMIN_MODULE, "reembed", "--batch", str(batch)]
    if drop_old:
        argv.append("--drop-old")
    if yes:
        argv.append("--yes")
    # The child inherits this environment (and working directory, for .env) and terminal, and
    # reports its progress on a socket of its own, drawn here.
    ours, theirs = socket.socketpair()
    with ours:
        try:
            child = subprocess.Popen(
                [*argv, "--progress-fd", str(theirs.fileno())], pass_fds=[theirs.fileno()]
            )
        finally:
            theirs.close()  # the child's copy alone: its exit ends the relay
        with child:
            shown = threading.Thread(
                target=relay, args=(ours, sys.stderr, "re-embedding", "memories"), daemon=True
            )
            shown.start()
            code = child.wait()
            shown.join(timeout=RELAY_JOIN_S)
    raise typer.Exit(code)


class McpTransport(StrEnum):
    stdio = "stdio"
    http = "http"


@app.command()
def mcp(
    transport: Annotated[
        McpTransport,
        typer.Option(
            help="stdio: for Claude Desktop, Cursor (the user is $MEMORIA_TOKEN's); http: "
            "streamable HTTP at /mcp, each request's 'Authorization: Bearer' names the user.",
        ),
    ] = McpTransport.stdio,
    url: Annotated[
        str | None,
        typer.Option(
            "--url",
            help="The gateway. Default: $MEMORIA_URL, else "
            "http://127.0.0.1:$MEMORIA_GATEWAY_PORT (8000).",
            show_default=False,
        ),
    ] = None,
    host: Annotated[str, typer.Option(help="http: the address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="http: the port.")] = 8765,
) -> None:
    """Serve your memories and the chat as Model Context Protocol tools."""
    from memoria_client.mcp_server import serve

    serve("http" if transport is McpTransport.http else "stdio", url, host, port)

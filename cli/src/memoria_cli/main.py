"""The `memoria` command line."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer

from memoria_runtime.settings import Settings

app = typer.Typer(no_args_is_help=True, add_completion=False)

# Where `memoria run` serves the gateway unless MEMORIA_GATEWAY_PORT moves it.
DEFAULT_GATEWAY_URL = f"http://127.0.0.1:{Settings.model_fields['gateway_port'].default}"

GatewayUrl = Annotated[str, typer.Option("--url", help="The running gateway's address.")]
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


@app.command()
def run() -> None:
    """Start the broker and the four services; Ctrl-C stops everything."""
    from memoria_cli.run import run as run_memoria  # keeps other commands' start-up light

    raise typer.Exit(asyncio.run(run_memoria(Settings())))


@app.command()
def docs(
    root: Annotated[Path, typer.Option(help="Repository root holding README.md and docs/.")] = Path(
        "."
    ),
) -> None:
    """Regenerate docs/asyncapi/*.yaml and the README settings table from the code."""
    from memoria_cli.docs import write_docs

    for path in write_docs(root.resolve()):
        typer.echo(f"wrote {path}")


@app.command()
def export(
    output: Annotated[
        str, typer.Option("--output", "-o", metavar="FILE|-", help="Where to write; - is stdout.")
    ] = "-",
    url: GatewayUrl = DEFAULT_GATEWAY_URL,
    token: Token = None,
    user: User = None,
) -> None:
    """Write your memories as JSON Lines, one memory per line, newest first."""
    from memoria_cli.gateway_client import Connection
    from memoria_cli.transfer import run_export

    raise typer.Exit(run_export(Connection(url, token=token, user=user), output))


@app.command("import")
def import_(
    source: Annotated[
        str, typer.Argument(metavar="FILE|-", help="JSON Lines as export writes them; - is stdin.")
    ],
    url: GatewayUrl = DEFAULT_GATEWAY_URL,
    token: Token = None,
    user: User = None,
) -> None:
    """Create the memories of a JSON Lines file. Safe to repeat: nothing is created twice.
    Bad lines are reported and skipped; the exit code is 1 if any line failed."""
    from memoria_cli.gateway_client import Connection
    from memoria_cli.transfer import run_import

    raise typer.Exit(run_import(Connection(url, token=token, user=user), source))

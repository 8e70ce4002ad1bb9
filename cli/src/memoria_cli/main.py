"""The `memoria` command line."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer

from memoria_runtime.settings import Settings

app = typer.Typer(no_args_is_help=True, add_completion=False)


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

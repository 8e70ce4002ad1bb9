"""The milvus-lite server (pure Python, from the ``milvus-lite`` wheel) run as a supervised
child, so that the services reach their vectors by URI exactly as they reach a Milvus
standalone in the cluster profile.

The child is ``python -m memoria_cli.embedded_milvus server …``: milvus-lite's own server
command, with two changes. It requires a password (milvus_server.py), read from a file of the
data directory so that no other account sees it in the process list. And milvus-lite shuts
down cleanly only on KeyboardInterrupt (it stops gRPC, flushes its in-memory rows to segment
files and releases the data directory's lock); the supervisor stops children with SIGTERM,
whose default action kills the process on the spot. Nothing is lost that way either (every
write is in the write-ahead log before it is acknowledged, and the next start replays it),
but the clean path exits with code 0 and leaves nothing to replay, so SIGTERM is routed to it.

Durability: writes reach the operating system before they are acknowledged but are not
fsynced, so a process crash loses nothing and a power cut may lose the last seconds.
Data lives under ``<data_dir>/milvus``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from memoria_cli.supervisor import ProcessSpec, ReadinessCheck, StartupError
from memoria_runtime.settings import EMBEDDED_MILVUS_USER, EMBEDDED_PASSWORD_FILE

NAME = "milvus"
HOST = "127.0.0.1"
SUBDIR = "milvus"
COLOR = "bright_cyan"
MODULE = "memoria_cli.embedded_milvus"
CONNECT_TIMEOUT_S = 2.0
# milvus-lite answers GetVersion with "milvus_lite-<version>"; a real Milvus with "v2.x".
LITE_VERSION_PREFIX = "milvus_lite"
# milvus-lite holds an exclusive flock on this file of its data directory while serving it.
LOCK_FILE = "LOCK"
PROC_LOCKS = Path("/proc/locks")
HINT = "set MEMORIA_EMBEDDED_MILVUS_PORT or MEMORIA_MILVUS_URI"
PORT_FLAG = "--port"
PASSWORD_FILE_FLAG = "--password-file"
BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def milvus_dir(data_dir: Path) -> Path:
    return data_dir / SUBDIR


def argv(port: int, data_dir: Path, password_file: Path | None = None) -> list[str]:
    """``password_file``: the server requires ``memoria:<its content>`` as token; None: no
    check (tests that start their own server)."""
    # The interpreter of this very environment: milvus-lite (and the pymilvus it imports)
    # are found wherever memoria itself is installed, with no console script to look up.
    command = [
        sys.executable,
        "-m",
        MODULE,
        "server",
        "--data-dir",
        str(milvus_dir(data_dir)),
        "--host",
        HOST,
        "--port",
        str(port),
    ]
    if password_file is not None:
        command += [PASSWORD_FILE_FLAG, str(password_file)]
    return command


def uri(port: int) -> str:
    return f"http://{HOST}:{port}"


async def server_version(port: int, token: str | None = None) -> str:
    """The version a Milvus-protocol server on ``port`` reports (raises when none answers).

    A bare gRPC GetVersion, the protocol's own liveness call, rather than a pymilvus client
    (its shared connection cache and error logging, a traceback per refused probe, do not
    suit a probe repeated every few hundred milliseconds). Blocking gRPC in a thread, not
    grpc.aio: aio leaves gRPC threads behind in the supervisor, and every later fork of a
    service then logs "Other threads are currently calling into gRPC"."""
    return await asyncio.to_thread(_server_version, port, token)


def _server_version(port: int, token: str | None) -> str:
    import grpc
    from pymilvus.grpc_gen import milvus_pb2, milvus_pb2_grpc

    from memoria_cli.milvus_server import AUTHORIZATION, authorization_for

    metadata = [(AUTHORIZATION, authorization_for(token).decode())] if token else None
    with grpc.insecure_channel(f"{HOST}:{port}") as channel:
        stub = milvus_pb2_grpc.MilvusServiceStub(channel)
        reply = stub.GetVersion(
            milvus_pb2.GetVersionRequest(), timeout=CONNECT_TIMEOUT_S, metadata=metadata
        )
    return str(reply.version)


def lock_holder(data_dir: Path) -> int | None:
    """The pid holding milvus-lite's lock on our directory, from ``/proc/locks`` (Linux);
    None when nobody holds it or this cannot be known. Looks only: taking the lock, even for
    an instant, could make a starting server fail."""
    try:
        stat = (milvus_dir(data_dir) / LOCK_FILE).stat()
        table = PROC_LOCKS.read_text()
    except OSError:
        return None
    # "1: FLOCK  ADVISORY  WRITE <pid> <major>:<minor>:<inode> 0 EOF" (hex device numbers);
    # lines with "->" are waiters, not holders.
    wanted = f"{os.major(stat.st_dev):02x}:{os.minor(stat.st_dev):02x}:{stat.st_ino}"
    for line in table.splitlines():
        fields = line.split()
        if len(fields) >= 6 and fields[1] != "->" and fields[5] == wanted:
            return int(fields[4])
    return None


def _sees_locks() -> bool:
    return PROC_LOCKS.is_file()


def readiness_check(port: int, data_dir: Path, token: str | None = None) -> ReadinessCheck:
    """Ready once a milvus-lite answers on ``port`` (to ``token``) and (where the kernel
    tells) someone holds the lock of *our* directory: a stranger on the port does not count."""

    async def check() -> bool:
        if not (await server_version(port, token)).startswith(LITE_VERSION_PREFIX):
            return False
        return not _sees_locks() or lock_holder(data_dir) is not None

    return check


def spec(port: int, data_dir: Path, password: str | None = None) -> ProcessSpec:
    """``password``: the one kept in the data directory (its file is named in the command
    line, never the password itself)."""
    password_file = data_dir / EMBEDDED_PASSWORD_FILE if password else None
    token = f"{EMBEDDED_MILVUS_USER}:{password}" if password else None
    return ProcessSpec(
        name=NAME,
        argv=argv(port, data_dir, password_file),
        ready=readiness_check(port, data_dir, token),
        critical=True,
        color=COLOR,
    )


async def ensure_port_free(port: int, data_dir: Path) -> None:
    """Fail with a clear message when a process already serves our milvus directory (a
    server left behind would make ours die on the directory lock) or something listens on
    ``port`` (gRPC binds with SO_REUSEPORT: a second server could silently share it)."""
    pid = lock_holder(data_dir)
    if pid is not None:
        raise StartupError(
            f"pid {pid} already serves this data directory ({milvus_dir(data_dir)}), "
            f"probably a milvus-lite left behind by an earlier `memoria run`; stop it "
            f"(kill {pid}), or set MEMORIA_MILVUS_URI"
        )
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(HOST, port), CONNECT_TIMEOUT_S)
    except (OSError, TimeoutError):
        return  # nothing accepts connections there
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    raise StartupError(f"port {port} is in use; {HINT}")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=MODULE, description="milvus-lite, with a password")
    commands = parser.add_subparsers(dest="command", required=True)
    server = commands.add_parser("server", help="serve a data directory over gRPC")
    server.add_argument("--data-dir", required=True)
    server.add_argument("--host", default=HOST)
    server.add_argument(PORT_FLAG, type=int, required=True)
    server.add_argument(PASSWORD_FILE_FLAG, type=Path, default=None)
    return parser


def main(args: Sequence[str] | None = None) -> int:
    """The server, with SIGTERM stopping it like Ctrl-C."""
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    # One BLAS thread: a search is a few thousand dot products, where BLAS threads only
    # contend with the memory service's embedder for the same cores (measured on 2 cores: the
    # embedding much slower, the search no faster). Set before
    # numpy and faiss load; a user's own setting wins.
    for variable in BLAS_THREAD_VARIABLES:
        os.environ.setdefault(variable, "1")
    options = _parser().parse_args(list(sys.argv[1:] if args is None else args))
    token = None
    if options.password_file is not None:
        token = f"{EMBEDDED_MILVUS_USER}:{options.password_file.read_text().strip()}"
    from memoria_cli.milvus_server import serve  # gRPC only in the server's own process

    try:
        serve(options.data_dir, options.host, options.port, token)
    except KeyboardInterrupt:  # stopped before it served: nothing to flush, a clean stop
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""milvus-lite's gRPC server, with a password.

milvus-lite's own server (``milvus_lite.adapter.grpc.server``) opens an insecure port with no
interceptor, and its servicer never looks at credentials: any local account that reaches
the port reads and changes every user's vectors. This builds the same server (its servicer
on its engine, gRPC on a thread pool, the same message limits) with one gRPC interceptor
that refuses, as UNAUTHENTICATED, every call whose ``authorization`` metadata is not the
token pymilvus sends for ``token="user:password"`` (base64 of it). Clients need no change:
the memory service passes MEMORIA_MILVUS_TOKEN (or the embedded password) as that token.
Why a password and not a Unix socket: docs/adr/0028-embedded-servers-require-a-password.md.
"""

from __future__ import annotations

import base64
import hmac
from collections.abc import Callable
from concurrent import futures
from typing import Any, Final

import grpc

MAX_MESSAGE_BYTES: Final = 256 * 1024 * 1024  # milvus-lite's own limit, as Milvus standalone's
WORKERS: Final = 10  # milvus-lite's default thread pool
STOP_GRACE_S: Final = 5.0
AUTHORIZATION: Final = "authorization"
REFUSED: Final = "a valid token is required (MEMORIA_MILVUS_TOKEN, or memoria run's password)"


def authorization_for(token: str) -> bytes:
    """The ``authorization`` metadata pymilvus sends for ``token``."""
    return base64.b64encode(token.encode())


class TokenCheck(grpc.ServerInterceptor):  # type: ignore[misc]
    """Lets through only calls that carry the expected token."""

    def __init__(self, token: str) -> None:
        self._expected = authorization_for(token)

    def intercept_service(
        self, continuation: Callable[[Any], Any], details: grpc.HandlerCallDetails
    ) -> Any:
        for key, value in details.invocation_metadata or ():
            given = value.encode() if isinstance(value, str) else value
            if key.lower() == AUTHORIZATION and hmac.compare_digest(given, self._expected):
                return continuation(details)
        return _refusal(continuation(details))


def _deny(request: Any, context: grpc.ServicerContext) -> Any:
    context.abort(grpc.StatusCode.UNAUTHENTICATED, REFUSED)


def _refusal(handler: Any) -> Any:
    """A handler of the method's own shape that refuses the call (None: no such method)."""
    if handler is None:
        return None
    if handler.request_streaming and handler.response_streaming:
        return grpc.stream_stream_rpc_method_handler(_deny)
    if handler.request_streaming:
        return grpc.stream_unary_rpc_method_handler(_deny)
    if handler.response_streaming:
        return grpc.unary_stream_rpc_method_handler(_deny)
    return grpc.unary_unary_rpc_method_handler(_deny)


def serve(data_dir: str, host: str, port: int, token: str | None) -> None:
    """Serve ``data_dir`` on ``host:port`` until KeyboardInterrupt (then stop gRPC and close
    the engine, which flushes and releases the directory's lock); ``token`` None: no check."""
    from milvus_lite.adapter.grpc.servicer import MilvusServicer
    from milvus_lite.db import MilvusLite
    from pymilvus.grpc_gen import milvus_pb2_grpc

    db = MilvusLite(data_dir)
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=WORKERS),
        interceptors=[TokenCheck(token)] if token else [],
        options=[
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
        ],
    )
    milvus_pb2_grpc.add_MilvusServiceServicer_to_server(MilvusServicer(db), server)
    address = f"{host}:{port}"
    server.add_insecure_port(address)
    server.start()
    print(f"MilvusLite gRPC server listening on {address} (data_dir={data_dir!r})", flush=True)
    try:
        server.wait_for_termination()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop(grace=STOP_GRACE_S)
        db.close()

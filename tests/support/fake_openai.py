"""A local fake of the OpenAI REST API, for tests of the real ``openai`` SDK.

A real HTTP server on 127.0.0.1 (a free port, a background thread) answers what an
OpenAI-compatible server (OpenAI, Ollama, llama.cpp, vLLM) offers, in OpenAI's JSON shapes::

    POST /v1/chat/completions     JSON, or SSE chunks ending in ``data: [DONE]`` with ``stream``
    POST /v1/embeddings           float lists, or base64 float32 as the SDK asks by default
    GET  /v1/models

Each request is recorded (HTTP method, path, headers, JSON body). Tests program what comes
next with :meth:`FakeOpenAI.enqueue`: one behaviour per request, first in first out, whatever
the endpoint. With nothing queued the fake answers sensibly: the first enum value or a minimal
instance of the schema under ``response_format`` json_schema, ``{}`` in json_object mode, a
fixed sentence otherwise, and deterministic (unnormalised) embedding vectors.

Server quirks (:class:`Quirks`) imitate servers that refuse parts of the API before they
generate anything, so a refusal does not use up a queued behaviour: :data:`OLLAMA_LIKE`
rejects json_schema and accepts json_object, :data:`NO_STREAM_OPTIONS` rejects
``stream_options``.

    with FakeOpenAI() as fake:
        fake.enqueue(Fail(429, retry_after="0.2"), Reply("hi"))
        ...  # point the SDK at fake.base_url
        assert len(fake.requests) == 2
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

DEFAULT_TEXT = "Hello from the fake OpenAI."
DEFAULT_MODELS = ("fake-chat", "fake-embed")
DEFAULT_EMBEDDING_DIM = 768
EMBEDDING_SCALE = 3.0  # not unit length, so clients that forget to normalise are caught
START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 10.0
HANG_POLL_S = 0.05
CREATED = 1_700_000_000  # a fixed timestamp keeps responses deterministic
FORMAT_REJECTED = "response_format json_schema not supported"
STREAM_OPTIONS_REJECTED = "stream_options: unsupported parameter"
ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    404: "invalid_request_error",
    429: "rate_limit_exceeded",
    500: "server_error",
    503: "server_error",
}

Json = dict[str, Any]


# -- behaviours --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Usage:
    prompt: int
    completion: int

    def as_json(self) -> Json:
        return {
            "prompt_tokens": self.prompt,
            "completion_tokens": self.completion,
            "total_tokens": self.prompt + self.completion,
        }


@dataclass(frozen=True)
class Reply:
    """Answer with this text; on a streamed request, as one chunk per word."""

    text: str
    finish_reason: str = "stop"
    usage: Usage | None = None


def reply_json(value: object) -> Reply:
    return Reply(json.dumps(value))


@dataclass(frozen=True)
class Stream:
    """Stream these text chunks, waiting ``delay_seconds`` before each one after the first;
    then, if ``error`` is set, an error event (as vLLM sends one) instead of the end."""

    chunks: Sequence[str]
    delay_seconds: float = 0.0
    usage: Usage | None = None
    error: Fail | None = None


@dataclass(frozen=True)
class Fail:
    """An error status with OpenAI's error body; ``retry_after`` becomes the header."""

    code: int
    message: str = "scripted failure"
    retry_after: str | None = None
    type: str | None = None

    def as_json(self) -> Json:
        kind = self.type or ERROR_TYPES.get(self.code, "api_error")
        return {"error": {"message": self.message, "type": kind, "param": None, "code": None}}


def format_rejected() -> Fail:
    """What a server without structured output says to ``response_format`` json_schema."""
    return Fail(400, FORMAT_REJECTED)


@dataclass(frozen=True)
class Raw:
    """A raw HTTP body, e.g. a proxy's HTML page or truncated JSON."""

    body: str
    status: int = 200
    content_type: str = "application/json"


@dataclass(frozen=True)
class Hang:
    """Accept the request and send nothing for ``seconds`` (or until the fake stops)."""

    seconds: float


@dataclass(frozen=True)
class Embed:
    """Embeddings of this dimension instead of the usual one."""

    dimension: int


Behaviour = Reply | Stream | Fail | Raw | Hang | Embed


@dataclass(frozen=True)
class Quirks:
    """What the server refuses, with a 400, before generating anything."""

    json_schema: bool = True
    json_object: bool = True
    stream_options: bool = True


FAITHFUL = Quirks()
OLLAMA_LIKE = Quirks(json_schema=False)  # older Ollama: json mode only
NO_STREAM_OPTIONS = Quirks(stream_options=False)


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: Json = field(default_factory=dict)

    @property
    def response_format(self) -> Json | None:
        value = self.body.get("response_format")
        return value if isinstance(value, dict) else None


# -- response shapes ---------------------------------------------------------------------------


def _words(text: str) -> int:
    return len(text.split())


def _prompt_tokens(body: Json) -> int:
    return sum(
        _words(message["content"])
        for message in body.get("messages", [])
        if isinstance(message.get("content"), str)
    )


def _tool_messages_problem(messages: list[Json]) -> str | None:
    """OpenAI's rules for tool messages (what it answers with a 400): each ``tool`` message
    answers a call of the assistant message with ``tool_calls`` right before its run of tool
    messages, and every call is answered before the next non-tool message."""
    waiting: list[str] = []  # call ids of the last assistant message not answered yet
    for message in messages:
        role = message.get("role")
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in waiting:
                return (
                    "Invalid parameter: messages with role 'tool' must be a response to a "
                    "preceeding message with 'tool_calls'."
                )
            waiting.remove(call_id)
            continue
        if waiting:
            return (
                "An assistant message with 'tool_calls' must be followed by tool messages "
                "responding to each 'tool_call_id'. The following tool_call_ids did not have "
                f"response messages: {', '.join(waiting)}"
            )
        calls = message.get("tool_calls") if role == "assistant" else None
        for call in calls or []:
            function = call.get("function") or {}
            if call.get("type") != "function" or not function.get("name"):
                return "Invalid value for 'messages.tool_calls': a function name is required."
            if not isinstance(function.get("arguments"), str):
                return (
                    "Invalid type for 'messages.tool_calls.function.arguments': expected a string."
                )
        waiting = [str(call.get("id")) for call in calls or []]
    if waiting:
        return (
            "An assistant message with 'tool_calls' must be followed by tool messages "
            f"responding to each 'tool_call_id'. The following tool_call_ids did not have "
            f"response messages: {', '.join(waiting)}"
        )
    return None


def _example(schema: Json, root: Json) -> object:
    """A minimal instance of a JSON Schema, the way a constrained model would fill it."""
    if "$ref" in schema:
        return _example(root["$defs"][schema["$ref"].split("/")[-1]], root)
    if schema.get("anyOf"):
        return _example(schema["anyOf"][0], root)
    if "enum" in schema:
        return schema["enum"][0]
    if "default" in schema:
        return schema["default"]
    kind = schema.get("type", "object")
    if kind == "object":
        properties: Json = schema.get("properties", {})
        return {name: _example(sub, root) for name, sub in properties.items()}
    if kind == "array":
        return [_example(schema["items"], root)] if schema.get("minItems") else []
    return {"string": "text", "integer": 0, "number": 0.0, "boolean": False}.get(kind)


def _default_text(body: Json) -> str:
    response_format = body.get("response_format") or {}
    if response_format.get("type") == "json_schema":
        schema = response_format["json_schema"].get("schema") or {}
        return json.dumps(_example(schema, schema))
    if response_format.get("type") == "json_object":
        return "{}"
    return DEFAULT_TEXT


def _completion_id(text: str) -> str:
    return "chatcmpl-" + hashlib.sha1(text.encode()).hexdigest()[:12]


def _completion(model: str, reply: Reply, usage: Usage) -> Json:
    return {
        "id": _completion_id(reply.text),
        "object": "chat.completion",
        "created": CREATED,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": reply.text},
                "finish_reason": reply.finish_reason,
            }
        ],
        "usage": usage.as_json(),
    }


def _chunk(model: str, delta: Json, finish_reason: str | None, *, with_usage: bool) -> Json:
    chunk: Json = {
        "id": _completion_id(model),
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }
    if with_usage:
        chunk["usage"] = None  # like OpenAI: null on every chunk but the last
    return chunk


def embedding_vector(text: str, dimension: int) -> list[float]:
    """The fake's (deterministic, unnormalised) embedding of ``text``."""
    values: list[float] = []
    counter = 0
    while len(values) < dimension:
        digest = hashlib.sha256(f"{counter}:{text}".encode()).digest()
        values.extend((byte - 127.5) / 127.5 * EMBEDDING_SCALE for byte in digest)
        counter += 1
    return values[:dimension]


def _encode(vector: list[float], encoding: str) -> list[float] | str:
    if encoding == "base64":  # little-endian float32, as OpenAI sends it
        return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()
    return vector


# -- the server --------------------------------------------------------------------------------


class FakeOpenAI:
    """The fake server. ``api_keys``: bearer tokens it accepts (others get a 401); None
    accepts any, like Ollama. ``embedding_dim``: the dimension of its embeddings when a
    request does not ask for one."""

    def __init__(
        self,
        *,
        api_keys: Sequence[str] | None = None,
        models: Sequence[str] = DEFAULT_MODELS,
        embedding_dim: int = DEFAULT_EMBEDDING_DIM,
    ) -> None:
        self.api_keys = None if api_keys is None else set(api_keys)
        self.models = list(models)
        self.embedding_dim = embedding_dim
        self.quirks = FAITHFUL
        self._lock = threading.Lock()
        self._queue: deque[Behaviour] = deque()
        self._requests: list[RecordedRequest] = []
        self._streamed = 0
        self._stopping = threading.Event()
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind(("127.0.0.1", 0))
        self.port: int = self._socket.getsockname()[1]
        app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._chat, methods=["POST"]),
                Route("/v1/embeddings", self._embeddings, methods=["POST"]),
                Route("/v1/models", self._models, methods=["GET"]),
            ]
        )
        config = uvicorn.Config(
            app, log_level="warning", lifespan="off", timeout_graceful_shutdown=1
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, daemon=True
        )

    @property
    def base_url(self) -> str:
        """What clients are configured with: the ``/v1`` root, as for Ollama or vLLM."""
        return f"http://127.0.0.1:{self.port}/v1"

    # -- programming and inspecting ----------------------------------------------------------

    def enqueue(self, *behaviours: Behaviour) -> None:
        with self._lock:
            self._queue.extend(behaviours)

    @property
    def pending(self) -> int:
        """Behaviours queued and not used yet."""
        with self._lock:
            return len(self._queue)

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    def requests_to(self, path: str) -> list[RecordedRequest]:
        """Requests to one endpoint, e.g. ``/v1/embeddings``."""
        return [request for request in self.requests if request.path == path]

    @property
    def streamed_chunks(self) -> int:
        """Text chunks and error events streamed so far, over all requests."""
        with self._lock:
            return self._streamed

    def reset(self) -> None:
        with self._lock:
            self._queue.clear()
            self._requests.clear()
            self._streamed = 0
            self.quirks = FAITHFUL

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the fake OpenAI server did not start")
            time.sleep(0.01)

    def stop(self) -> None:
        self._stopping.set()
        self._server.should_exit = True
        self._thread.join(STOP_TIMEOUT_S)
        self._socket.close()

    def __enter__(self) -> FakeOpenAI:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    # -- request handling (server thread) ----------------------------------------------------

    async def _admit(self, request: Request) -> Json | Response:
        """Record the request and check its key: the body, or the error to send."""
        raw = await request.body()
        try:
            body: Json = json.loads(raw) if raw else {}
        except json.JSONDecodeError:
            return self._fail(Fail(400, "We could not parse the JSON body of your request."))
        with self._lock:
            self._requests.append(
                RecordedRequest(
                    method=request.method,
                    path=request.url.path,
                    headers={k.lower(): v for k, v in request.headers.items()},
                    body=body,
                )
            )
        token = request.headers.get("authorization", "").removeprefix("Bearer ")
        if self.api_keys is not None and token not in self.api_keys:
            return self._fail(Fail(401, "Incorrect API key provided.", type="invalid_api_key"))
        return body

    def _next(self) -> Behaviour | None:
        with self._lock:
            return self._queue.popleft() if self._queue else None

    async def _models(self, request: Request) -> Response:
        admitted = await self._admit(request)
        if isinstance(admitted, Response):
            return admitted
        data = [
            {"id": name, "object": "model", "created": CREATED, "owned_by": "fake"}
            for name in self.models
        ]
        return JSONResponse({"object": "list", "data": data})

    async def _chat(self, request: Request) -> Response:
        body = await self._admit(request)
        if isinstance(body, Response):
            return body
        refusal = self._refusal(body)
        if refusal is not None:
            return self._fail(refusal)
        behaviour = self._next()
        early = await self._common(request, behaviour)
        if early is not None:
            return early
        model = str(body["model"])
        if body.get("stream"):
            return self._stream(model, body, behaviour)
        if behaviour is None:
            behaviour = Reply(_default_text(body))
        if not isinstance(behaviour, Reply):
            return self._misuse(behaviour, "a chat completion")
        usage = behaviour.usage or Usage(_prompt_tokens(body), _words(behaviour.text))
        return JSONResponse(_completion(model, behaviour, usage))

    def _refusal(self, body: Json) -> Fail | None:
        """What a real server rejects before generating: a bad request or a quirk."""
        if not body.get("model"):
            return Fail(400, "you must provide a model parameter")
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return Fail(400, "'messages' must be a non-empty array")
        if any(message.get("role") not in ROLES for message in messages):
            return Fail(400, "Invalid value for 'messages.role'")
        tool_problem = _tool_messages_problem(messages)
        if tool_problem is not None:
            return Fail(400, tool_problem)
        if "stream_options" in body and not self.quirks.stream_options:
            return Fail(400, STREAM_OPTIONS_REJECTED)
        return self._format_refusal(body.get("response_format"), messages)

    def _format_refusal(self, response_format: Json | None, messages: list[Json]) -> Fail | None:
        kind = (response_format or {}).get("type", "text")
        if kind == "json_schema":
            if not self.quirks.json_schema:
                return format_rejected()
            if not (response_format or {}).get("json_schema", {}).get("name"):
                return Fail(400, "Missing required parameter: 'response_format.json_schema.name'")
        elif kind == "json_object":
            if not self.quirks.json_object:
                return Fail(400, "response_format json_object is not supported")
            if not any("json" in str(message.get("content", "")).lower() for message in messages):
                # OpenAI's own rule, so the client must say "JSON" in the prompt.
                return Fail(
                    400,
                    "'messages' must contain the word 'json' in some form, to use "
                    "'response_format' of type 'json_object'.",
                )
        elif kind != "text":
            return Fail(400, f"Invalid value for 'response_format.type': {kind}")
        return None

    async def _common(self, request: Request, behaviour: Behaviour | None) -> Response | None:
        """The behaviours that answer any endpoint the same way."""
        if isinstance(behaviour, Fail):
            return self._fail(behaviour)
        if isinstance(behaviour, Raw):
            return Response(behaviour.body, behaviour.status, media_type=behaviour.content_type)
        if isinstance(behaviour, Hang):
            await self._hang(request, behaviour.seconds)
            return self._fail(Fail(504, "the fake hung"))
        return None

    @staticmethod
    def _fail(failure: Fail) -> Response:
        headers = {"retry-after": failure.retry_after} if failure.retry_after else None
        return JSONResponse(failure.as_json(), failure.code, headers=headers)

    @staticmethod
    def _misuse(behaviour: Behaviour, what: str) -> Response:
        message = f"fake OpenAI: {type(behaviour).__name__} is not {what}"
        return JSONResponse(Fail(400, message).as_json(), 400)

    async def _hang(self, request: Request, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not self._stopping.is_set():
            if await request.is_disconnected():
                return
            await asyncio.sleep(HANG_POLL_S)

    def _stream(self, model: str, body: Json, behaviour: Behaviour | None) -> Response:
        if behaviour is None:
            behaviour = Reply(_default_text(body))
        if isinstance(behaviour, Reply):
            pieces = behaviour.text.split(" ")
            chunks = [piece + " " for piece in pieces[:-1]] + pieces[-1:]
            behaviour = Stream(chunks, usage=behaviour.usage)
        if not isinstance(behaviour, Stream):
            return self._misuse(behaviour, "a stream")
        options = body.get("stream_options") or {}
        events = self._sse(model, body, behaviour, bool(options.get("include_usage")))
        return StreamingResponse(events, media_type="text/event-stream")

    async def _sse(
        self, model: str, body: Json, stream: Stream, include_usage: bool
    ) -> AsyncIterator[str]:
        # OpenAI opens with the role and an empty content, then one delta per piece.
        yield self._event(
            _chunk(model, {"role": "assistant", "content": ""}, None, with_usage=include_usage),
            count=False,
        )
        for index, piece in enumerate(stream.chunks):
            if index and stream.delay_seconds:
                await asyncio.sleep(stream.delay_seconds)
            yield self._event(_chunk(model, {"content": piece}, None, with_usage=include_usage))
        if stream.error is not None:
            if stream.delay_seconds:
                await asyncio.sleep(stream.delay_seconds)
            yield self._event(stream.error.as_json())
            return
        yield self._event(_chunk(model, {}, "stop", with_usage=include_usage), count=False)
        if include_usage:
            usage = stream.usage or Usage(
                _prompt_tokens(body), sum(_words(piece) for piece in stream.chunks)
            )
            final = {**_chunk(model, {}, None, with_usage=True), "choices": []}
            final["usage"] = usage.as_json()
            yield self._event(final, count=False)
        yield "data: [DONE]\n\n"

    def _event(self, payload: Json, *, count: bool = True) -> str:
        if count:
            with self._lock:
                self._streamed += 1
        return f"data: {json.dumps(payload)}\n\n"

    async def _embeddings(self, request: Request) -> Response:
        body = await self._admit(request)
        if isinstance(body, Response):
            return body
        if not body.get("model"):
            return self._fail(Fail(400, "you must provide a model parameter"))
        behaviour = self._next()
        early = await self._common(request, behaviour)
        if early is not None:
            return early
        if behaviour is not None and not isinstance(behaviour, Embed):
            return self._misuse(behaviour, "an embedding")
        texts = body.get("input")
        texts = [texts] if isinstance(texts, str) else list(texts or [])
        dimension = (
            behaviour.dimension if behaviour else body.get("dimensions") or self.embedding_dim
        )
        encoding = str(body.get("encoding_format") or "float")
        data = [
            {
                "object": "embedding",
                "index": index,
                "embedding": _encode(embedding_vector(text, dimension), encoding),
            }
            for index, text in enumerate(texts)
        ]
        tokens = sum(_words(str(text)) for text in texts)
        return JSONResponse(
            {
                "object": "list",
                "data": data,
                "model": body["model"],
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        )

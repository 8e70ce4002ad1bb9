"""A local fake of the Gemini REST API, for tests of the real ``google-genai`` SDK.

A real HTTP server on 127.0.0.1 (a free port, a background thread) answers the endpoints the
SDK calls, in Gemini's JSON shapes::

    POST /{version}/models/{model}:generateContent
    POST /{version}/models/{model}:streamGenerateContent?alt=sse
    POST /{version}/models/{model}:batchEmbedContents

Each request is recorded (path, query, headers, JSON body). Tests program what comes next
with :meth:`FakeGemini.enqueue`: one behaviour per request, first in first out, whatever the
endpoint. With nothing queued the fake answers sensibly: the first enum value in enum mode,
a minimal instance of the response schema in JSON mode, a fixed sentence otherwise, and
deterministic (unnormalised, like Gemini's below 3072 dimensions) embedding vectors.

    with FakeGemini() as fake:
        fake.enqueue(Fail(429), Reply("hi"))
        ...  # point the SDK at fake.base_url
        assert len(fake.requests) == 2
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import socket
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

DEFAULT_TEXT = "Hello from the fake Gemini."
START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 10.0
HANG_POLL_S = 0.05
EMBEDDING_SCALE = 3.0  # Gemini's vectors below 3072 dimensions are not unit length
DEFAULT_EMBEDDING_DIM = 3072
BAD_KEY_MESSAGE = "API key not valid. Please pass a valid API key."

STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}

Json = dict[str, Any]


# -- behaviours --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Usage:
    prompt: int
    candidates: int
    thoughts: int = 0  # a thinking model's, counted apart from the answer's (candidates)

    def as_json(self) -> Json:
        counts = {
            "promptTokenCount": self.prompt,
            "candidatesTokenCount": self.candidates,
            "totalTokenCount": self.prompt + self.candidates + self.thoughts,
        }
        return counts | ({"thoughtsTokenCount": self.thoughts} if self.thoughts else {})


@dataclass(frozen=True)
class Reply:
    """Answer with this model text; on the stream endpoint, as one chunk per word."""

    text: str
    finish_reason: str = "STOP"
    usage: Usage | None = None


def reply_json(value: object) -> Reply:
    return Reply(json.dumps(value))


@dataclass(frozen=True)
class Stream:
    """Stream these text chunks, waiting ``delay_seconds`` before each one after the first;
    then, if ``error`` is set, an error event instead of the end of the stream."""

    chunks: Sequence[str]
    delay_seconds: float = 0.0
    usage: Usage | None = None
    error: Fail | None = None


@dataclass(frozen=True)
class Fail:
    """An error status with Gemini's error body."""

    code: int
    message: str = "scripted failure"
    status: str | None = None
    details: Sequence[Json] = ()

    def as_json(self) -> Json:
        name = self.status or STATUS_NAMES.get(self.code, "UNKNOWN")
        error: Json = {"code": self.code, "message": self.message, "status": name}
        if self.details:
            error["details"] = list(self.details)
        return {"error": error}


def bad_api_key() -> Fail:
    """Gemini's answer to an unknown key (yes, 400, not 401)."""
    return Fail(
        400,
        BAD_KEY_MESSAGE,
        "INVALID_ARGUMENT",
        [
            {
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": "API_KEY_INVALID",
                "domain": "googleapis.com",
                "metadata": {"service": "generativelanguage.googleapis.com"},
            }
        ],
    )


def rate_limited(retry_delay: str = "1s") -> Fail:
    """Gemini's 429 for a spent quota, with the wait it asks for."""
    return Fail(
        429,
        "You exceeded your current quota, please check your plan and billing details.",
        "RESOURCE_EXHAUSTED",
        [
            {
                "@type": "type.googleapis.com/google.rpc.QuotaFailure",
                "violations": [
                    {
                        "quotaMetric": "generativelanguage.googleapis.com/"
                        "generate_content_free_tier_requests",
                        "quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier",
                    }
                ],
            },
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": retry_delay},
        ],
    )


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
    """Embeddings of this dimension instead of the one asked for (None: as asked); with
    ``prompt_tokens``, also the batch's usage metadata (which Gemini usually leaves out)."""

    dimension: int | None = None
    prompt_tokens: int | None = None


Behaviour = Reply | Stream | Fail | Raw | Hang | Embed


@dataclass(frozen=True)
class RecordedRequest:
    path: str
    version: str
    model: str
    method: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Json


# -- response shapes ---------------------------------------------------------------------------


def _words(text: str) -> int:
    return len(text.split())


def _prompt_tokens(body: Json) -> int:
    texts = [
        part.get("text", "")
        for content in [body.get("systemInstruction") or {}, *body.get("contents", [])]
        for part in content.get("parts", [])
    ]
    return sum(_words(text) for text in texts)


FUNCTION_CALL_ORDER = (
    "Please ensure that function call turn comes immediately after a user turn or after a "
    "function response turn."
)
FUNCTION_RESPONSE_ALONE = "Requests ending with a model turn are not supported."
"""What the API answers (misleadingly) when a content mixes function responses with text."""
FUNCTION_RESPONSE_COUNT = (
    "Please ensure that the number of function response parts is equal to the number of "
    "function call parts of the function call turn."
)


def _function_turns_problem(contents: list[Json]) -> str | None:
    """The Gemini API's checks on function calling history (its 400 INVALID_ARGUMENT): a
    ``model`` turn with function calls follows a ``user`` turn (text or function responses),
    and the next turn answers each call with a function response."""
    previous: Json | None = None
    for content in contents:
        parts = content.get("parts", [])
        calls = [part for part in parts if "functionCall" in part]
        if calls and (previous is None or previous.get("role") != "user"):
            return FUNCTION_CALL_ORDER
        responses = [part for part in parts if "functionResponse" in part]
        if responses and len(responses) != len(parts):
            return FUNCTION_RESPONSE_ALONE
        if previous is not None:
            asked = [p for p in previous.get("parts", []) if "functionCall" in p]
            answers = [part for part in parts if "functionResponse" in part]
            if asked and (content.get("role") != "user" or len(answers) != len(asked)):
                return FUNCTION_RESPONSE_COUNT
            if answers and len(answers) != len(asked):
                return FUNCTION_RESPONSE_COUNT
        for part in calls:
            if not part["functionCall"].get("name"):
                return "function_call.name is required."
        previous = content
    return None


def _candidate(text: str, finish_reason: str | None) -> Json:
    candidate: Json = {"content": {"parts": [{"text": text}], "role": "model"}, "index": 0}
    if finish_reason:
        candidate["finishReason"] = finish_reason
    return candidate


def _generate_response(model: str, text: str, finish_reason: str | None, usage: Json) -> Json:
    return {
        "candidates": [_candidate(text, finish_reason)],
        "usageMetadata": usage,
        "modelVersion": model,
        "responseId": "fake-response",  # one id for every chunk of a stream, as Gemini sends
    }


def _example(schema: Json, root: Json) -> object:
    """A minimal instance of an OpenAPI-style (``responseSchema``) or JSON Schema
    (``responseJsonSchema``) schema, the way a model in JSON mode would fill it."""
    if "$ref" in schema:
        return _example(root["$defs"][schema["$ref"].split("/")[-1]], root)
    for key in ("anyOf", "oneOf"):
        if schema.get(key):
            return _example(schema[key][0], root)
    if "enum" in schema:
        return schema["enum"][0]
    if "default" in schema:
        return schema["default"]
    kind = str(schema.get("type", "OBJECT")).upper()
    if kind == "OBJECT":
        properties: Json = schema.get("properties", {})
        return {name: _example(sub, root) for name, sub in properties.items()}
    if kind == "ARRAY":
        return [_example(schema["items"], root)] if schema.get("minItems") else []
    return {"STRING": "text", "INTEGER": 0, "NUMBER": 0.0, "BOOLEAN": False}.get(kind)


def _default_text(body: Json) -> str:
    config: Json = body.get("generationConfig", {})
    schema = config.get("responseSchema") or config.get("responseJsonSchema")
    mime = config.get("responseMimeType")
    if mime == "text/x.enum" and schema and schema.get("enum"):
        return str(schema["enum"][0])
    if mime == "application/json" and schema:
        return json.dumps(_example(schema, schema))
    return DEFAULT_TEXT


def embedding_vector(text: str, dimension: int) -> list[float]:
    """The fake's (deterministic, unnormalised) embedding of ``text``."""
    values: list[float] = []
    counter = 0
    while len(values) < dimension:
        digest = hashlib.sha256(f"{counter}:{text}".encode()).digest()
        values.extend((byte - 127.5) / 127.5 * EMBEDDING_SCALE for byte in digest)
        counter += 1
    return values[:dimension]


# -- the server --------------------------------------------------------------------------------


class FakeGemini:
    """The fake server. ``api_keys``: keys it accepts (others get Gemini's 400
    ``API_KEY_INVALID``); None accepts any key."""

    def __init__(self, api_keys: Sequence[str] | None = None) -> None:
        self.api_keys = None if api_keys is None else set(api_keys)
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
            routes=[Route("/{version}/models/{target:path}", self._handle, methods=["POST"])]
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
        return f"http://127.0.0.1:{self.port}"

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

    @property
    def streamed_chunks(self) -> int:
        """Stream events (text chunks and errors) written so far, over all requests."""
        with self._lock:
            return self._streamed

    def requests_to(self, method: str) -> list[RecordedRequest]:
        """Requests of one API method, e.g. ``generateContent``."""
        return [request for request in self.requests if request.method == method]

    def reset(self) -> None:
        with self._lock:
            self._queue.clear()
            self._requests.clear()
            self._streamed = 0

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the fake Gemini server did not start")
            time.sleep(0.01)

    def stop(self) -> None:
        self._stopping.set()
        self._server.should_exit = True
        self._thread.join(STOP_TIMEOUT_S)
        self._socket.close()

    def __enter__(self) -> FakeGemini:
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

    async def _handle(self, request: Request) -> Response:
        model, _, method = request.path_params["target"].partition(":")
        raw = await request.body()
        try:
            body: Json = json.loads(raw) if raw else {}
        except json.JSONDecodeError:
            return JSONResponse(Fail(400, "Invalid JSON payload received.").as_json(), 400)
        with self._lock:
            self._requests.append(
                RecordedRequest(
                    path=request.url.path,
                    version=request.path_params["version"],
                    model=model,
                    method=method,
                    query=dict(request.query_params),
                    headers={k.lower(): v for k, v in request.headers.items()},
                    body=body,
                )
            )
        key = request.headers.get("x-goog-api-key") or request.query_params.get("key")
        if self.api_keys is not None and key not in self.api_keys:
            return self._fail(bad_api_key())
        if method in ("generateContent", "streamGenerateContent"):
            problem = _function_turns_problem(body.get("contents", []))
            if problem is not None:
                return self._fail(Fail(400, problem))
        with self._lock:
            behaviour = self._queue.popleft() if self._queue else None
        if isinstance(behaviour, Fail):
            return self._fail(behaviour)
        if isinstance(behaviour, Raw):
            return Response(behaviour.body, behaviour.status, media_type=behaviour.content_type)
        if isinstance(behaviour, Hang):
            await self._hang(request, behaviour.seconds)
            return JSONResponse(Fail(504, "the fake hung").as_json(), 504)
        if method == "generateContent":
            return self._generate(model, body, behaviour)
        if method == "streamGenerateContent":
            return self._stream(model, body, behaviour)
        if method == "batchEmbedContents":
            return self._embed(body, behaviour)
        return self._fail(Fail(404, f"Method {method} not found in the fake.", "NOT_FOUND"))

    @staticmethod
    def _fail(failure: Fail) -> Response:
        return JSONResponse(failure.as_json(), failure.code)

    async def _hang(self, request: Request, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not self._stopping.is_set():
            if await request.is_disconnected():
                return
            await asyncio.sleep(HANG_POLL_S)

    @staticmethod
    def _misuse(behaviour: Behaviour, method: str) -> Response:
        message = f"fake Gemini: {type(behaviour).__name__} is not an answer to {method}"
        return JSONResponse(Fail(400, message).as_json(), 400)

    def _generate(self, model: str, body: Json, behaviour: Behaviour | None) -> Response:
        if behaviour is None:
            behaviour = Reply(_default_text(body))
        if not isinstance(behaviour, Reply):
            return self._misuse(behaviour, "generateContent")
        usage = behaviour.usage or Usage(_prompt_tokens(body), _words(behaviour.text))
        payload = _generate_response(
            model, behaviour.text, behaviour.finish_reason, usage.as_json()
        )
        return JSONResponse(payload)

    def _stream(self, model: str, body: Json, behaviour: Behaviour | None) -> Response:
        if behaviour is None:
            behaviour = Reply(_default_text(body))
        if isinstance(behaviour, Reply):
            pieces = behaviour.text.split(" ")
            chunks = [piece + " " for piece in pieces[:-1]] + pieces[-1:]
            behaviour = Stream(chunks, usage=behaviour.usage)
        if not isinstance(behaviour, Stream):
            return self._misuse(behaviour, "streamGenerateContent")
        return StreamingResponse(self._sse(model, body, behaviour), media_type="text/event-stream")

    async def _sse(self, model: str, body: Json, stream: Stream) -> AsyncIterator[str]:
        prompt = _prompt_tokens(body)
        usage = stream.usage or Usage(prompt, sum(_words(chunk) for chunk in stream.chunks))
        for index, chunk in enumerate(stream.chunks):
            if index and stream.delay_seconds:
                await asyncio.sleep(stream.delay_seconds)
            last = index == len(stream.chunks) - 1 and stream.error is None
            # Like Gemini: every chunk carries the prompt count, only the last the totals.
            metadata = usage.as_json() if last else {"promptTokenCount": usage.prompt}
            payload = _generate_response(model, chunk, "STOP" if last else None, metadata)
            yield self._event(payload)
        if stream.error is not None:
            if stream.delay_seconds:
                await asyncio.sleep(stream.delay_seconds)
            yield self._event(stream.error.as_json())

    def _event(self, payload: Json) -> str:
        with self._lock:
            self._streamed += 1
        return f"data: {json.dumps(payload)}\r\n\r\n"

    def _embed(self, body: Json, behaviour: Behaviour | None) -> Response:
        if behaviour is not None and not isinstance(behaviour, Embed):
            return self._misuse(behaviour, "batchEmbedContents")
        embeddings = []
        for item in body.get("requests", []):
            text = " ".join(part.get("text", "") for part in item["content"]["parts"])
            asked = item.get("outputDimensionality") or DEFAULT_EMBEDDING_DIM
            dimension = behaviour.dimension if behaviour and behaviour.dimension else asked
            embeddings.append({"values": embedding_vector(text, dimension)})
        payload: Json = {"embeddings": embeddings}
        if behaviour is not None and behaviour.prompt_tokens is not None:
            payload["usageMetadata"] = {"promptTokenCount": behaviour.prompt_tokens}
        return JSONResponse(payload)

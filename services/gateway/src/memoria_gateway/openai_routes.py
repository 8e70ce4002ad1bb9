"""OpenAI-compatible chat: ``POST /v1/chat/completions`` and ``GET /v1/models``.

Any OpenAI client or chat UI can talk to Memoria with its token as the API key. The newest
user message of a request runs one full thought cycle on a Memoria thread (the
``X-Memoria-Thread`` header, else the request's ``user`` field, else ``openai``); the answer
comes back whole or as OpenAI's server-sent chunks. Errors are OpenAI error objects, so the
clients raise their usual exceptions.
"""

# No `from __future__ import annotations`: FastAPI reads the dependencies' annotations,
# which name closure variables that a string annotation could not be resolved to.

import contextlib
import hashlib
import json
import re
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from typing import Annotated, Any, Final

from fastapi import APIRouter, Depends, Header, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from fastapi.routing import APIRoute
from pydantic import ValidationError
from redis.exceptions import RedisError
from starlette.exceptions import HTTPException as StarletteHTTPException

from memoria_contracts.cycles import cycle_id_for
from memoria_contracts.frames import ClientMessage, ErrorFrame
from memoria_gateway.bearer import bearer_user
from memoria_gateway.core import Gateway
from memoria_gateway.cycle_answer import (
    AnswerEvent,
    AnswerLost,
    AnswerTimeout,
    CycleOver,
    MemoryUsed,
    TextPiece,
    follow,
)
from memoria_gateway.error_words import one_line
from memoria_gateway.hub import FrameListener
from memoria_gateway.openai_schemas import (
    MODEL_ID,
    AnswerMessage,
    ChatCompletion,
    ChatCompletionChunk,
    ChatCompletionRequest,
    Choice,
    ChunkChoice,
    ChunkDelta,
    ErrorBody,
    ErrorResponse,
    MemoriaExtension,
    ModelCard,
    ModelList,
    TextPart,
    Usage,
)
from memoria_gateway.rate_limit import retry_after_seconds
from memoria_gateway.user_rate_limit import per_user
from memoria_gateway.validation_errors import NOT_TEXT, UNREADABLE_BODY

DEFAULT_THREAD: Final = "openai"
THREAD_HEADER: Final = "X-Memoria-Thread"
_THREAD_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
_QUEUE_SLACK_S: Final = 30.0
"""Beyond the longest cycle: a message queued behind another cycle of its thread waits."""

_ERROR_TYPES: Final = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    404: ("invalid_request_error", "model_not_found"),
    413: ("invalid_request_error", "context_length_exceeded"),
    429: ("rate_limit_error", "rate_limit_exceeded"),
    503: ("server_error", "service_unavailable"),
    504: ("server_error", "timeout"),
}


class OpenAIError(Exception):
    def __init__(self, status: int, message: str, *, param: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.headers: dict[str, str] = {}


def error_body(status: int, message: str, param: str | None = None) -> ErrorResponse:
    kind, code = _ERROR_TYPES.get(status, ("server_error", None))
    return ErrorResponse(error=ErrorBody(message=message, type=kind, param=param, code=code))


def error_response(
    status: int, message: str, param: str | None = None, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    body = error_body(status, message, param).model_dump()
    return JSONResponse(body, status_code=status, headers=headers)


def _validation_message(exc: RequestValidationError) -> tuple[str, str | None]:
    """The errors in the user's words, and the first one's field (OpenAI's ``param``)."""
    errors = exc.errors()
    where = [str(p) for p in errors[0].get("loc", ()) if p != "body"] if errors else []
    return one_line(errors), ".".join(where) or None


class OpenAIErrorRoute(APIRoute):
    """Every error of these routes as an OpenAI error object, whatever raised it (the token
    check, the body's validation, the rate limit, the route itself)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def route(request: Request) -> Response:
            try:
                return await handler(request)
            except RequestValidationError as exc:
                message, param = _validation_message(exc)
                return error_response(400, message, param)
            except StarletteHTTPException as exc:  # FastAPI's own, and the body parser's
                detail = str(exc.detail)
                if detail == UNREADABLE_BODY:
                    detail = NOT_TEXT
                return error_response(exc.status_code, detail, headers=exc.headers)
            except OpenAIError as exc:
                return error_response(exc.status, exc.message, exc.param, exc.headers)

        return route


def thread_for(header: str | None, user_field: str | None) -> str:
    """The header names the thread as it is; the ``user`` field too when it is a valid
    thread id, else a stable id made from it (chat UIs put emails or UUIDs there)."""
    if header is not None:
        if not _THREAD_ID.match(header):
            raise OpenAIError(
                400,
                f"{THREAD_HEADER}: a thread id is 1-64 letters, digits, '.', '_' or '-'",
                param=THREAD_HEADER,
            )
        return header
    if user_field:
        if _THREAD_ID.match(user_field):
            return user_field
        return "user-" + hashlib.sha256(user_field.encode()).hexdigest()[:20]
    return DEFAULT_THREAD


def newest_user_text(request: ChatCompletionRequest, max_chars: int) -> str:
    for index in range(len(request.messages) - 1, -1, -1):
        message = request.messages[index]
        if message.role != "user":
            continue
        param = f"messages.{index}.content"
        content = message.content
        if isinstance(content, list):
            if any(not isinstance(part, TextPart) for part in content):
                raise OpenAIError(400, "only text content parts are supported", param=param)
            content = "\n".join(part.text for part in content if isinstance(part, TextPart))
        if not content or not content.strip():
            raise OpenAIError(400, "the newest user message is empty", param=param)
        if len(content) > max_chars:
            raise OpenAIError(
                400,
                f"the newest user message has {len(content)} characters; the limit is {max_chars}",
                param=param,
            )
        return content
    raise OpenAIError(400, "messages: a user message is required", param="messages")


async def listen_here(gateway: Gateway, user_id: str, exits: contextlib.ExitStack) -> FrameListener:
    """The user's frames this gateway delivers until ``exits`` closes (with routed fan-out,
    the gateway is registered for them first)."""
    listener = exits.enter_context(gateway.hub.listen(user_id))
    try:
        await gateway.routes.enter(user_id)
    except (RedisError, OSError) as exc:
        raise OpenAIError(503, "the broker is unavailable; nothing was sent") from exc
    exits.callback(gateway.routes.leave, user_id)
    return listener


def openai_router(gateway: Gateway) -> APIRouter:
    settings = gateway.settings
    current_user = bearer_user(gateway.tokens)
    limited = per_user(gateway.tokens, gateway.requests)
    router = APIRouter(prefix="/v1", tags=["OpenAI-compatible"], route_class=OpenAIErrorRoute)
    started = int(time.time())
    cycle_bound_s = settings.cycle.cycle_max_steps * settings.cycle.step_timeout_seconds

    @router.get("/models", response_model=ModelList, dependencies=limited)
    async def list_models(_: Annotated[str, Depends(current_user)]) -> ModelList:
        """The models this server answers as: one, a full thought cycle over your memories."""
        return ModelList(data=[ModelCard(id=MODEL_ID, created=started)])

    @router.get(
        "/models/{model}",
        response_model=ModelCard,
        dependencies=limited,
        responses={404: {"model": ErrorResponse, "description": "No such model."}},
    )
    async def get_model(model: str, _: Annotated[str, Depends(current_user)]) -> ModelCard:
        if model != MODEL_ID:
            raise OpenAIError(404, f"no model '{model}': this server serves '{MODEL_ID}'")
        return ModelCard(id=MODEL_ID, created=started)

    async def take_message_allowance(user_id: str) -> None:
        if gateway.messages is None:
            return
        try:
            wait = await gateway.messages.take(user_id)
        except (RedisError, OSError) as exc:
            raise OpenAIError(503, "the broker is unavailable; nothing was sent") from exc
        if wait > 0:
            seconds = retry_after_seconds(wait)
            error = OpenAIError(
                429,
                f"too many messages: at most {gateway.messages.per_minute} a minute for one "
                f"user; try again in {seconds} s",
            )
            error.headers = {"Retry-After": str(seconds)}
            raise error

    @router.post(
        "/chat/completions",
        response_model=ChatCompletion,
        dependencies=limited,
        responses={
            200: {
                "description": "The answer; with `stream: true`, `text/event-stream` chunks "
                "(`chat.completion.chunk`) ending with `data: [DONE]`."
            },
            400: {"model": ErrorResponse},
            401: {"model": ErrorResponse},
            404: {"model": ErrorResponse},
            429: {"model": ErrorResponse},
            503: {"model": ErrorResponse},
            504: {"model": ErrorResponse},
        },
    )
    async def chat_completions(
        body: ChatCompletionRequest,
        user_id: Annotated[str, Depends(current_user)],
        x_memoria_thread: Annotated[str | None, Header()] = None,
    ) -> Response:
        """Send the newest user message to a Memoria thread and answer with what the
        thought cycle said. The extension field `memoria` carries the thread, the cycle,
        its actions and the memories it used."""
        if body.model != MODEL_ID:
            raise OpenAIError(
                404, f"no model '{body.model}': this server serves '{MODEL_ID}'", param="model"
            )
        if body.n not in (None, 1):
            raise OpenAIError(400, "n: only one choice is supported", param="n")
        thread_id = thread_for(x_memoria_thread, body.user)
        text = newest_user_text(body, settings.gateway.max_message_chars)
        try:
            message = ClientMessage(type="message", thread_id=thread_id, content=text)
        except ValidationError as exc:  # a control character, a lone surrogate…
            raise OpenAIError(400, one_line(exc.errors()), param="messages") from exc
        await take_message_allowance(user_id)

        exits = contextlib.ExitStack()
        try:
            listener = await listen_here(gateway, user_id, exits)  # before the cycle starts
            accepted = await gateway.intake.submit(user_id, message)
            if isinstance(accepted, ErrorFrame):
                raise OpenAIError(503, accepted.message)
        except BaseException:
            exits.close()
            raise
        timeout_s = cycle_bound_s * (2 if accepted.queued else 1) + _QUEUE_SLACK_S
        answer = _Answer(thread_id, accepted.id, listener, timeout_s)
        if body.stream:
            include_usage = body.stream_options is not None and body.stream_options.include_usage
            return StreamingResponse(
                _closing(exits, answer.chunks(include_usage)),
                media_type="text/event-stream",
                headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
            )
        with exits:
            completion = await answer.whole()
        return JSONResponse(completion.model_dump(mode="json"))

    return router


async def _closing(exits: contextlib.ExitStack, chunks: AsyncIterator[str]) -> AsyncIterator[str]:
    """Stop listening when the stream ends, or when the client goes away mid-answer."""
    with exits:
        async for chunk in chunks:
            yield chunk


class _Answer:
    def __init__(
        self, thread_id: str, message_id: str, listener: FrameListener, timeout_s: float
    ) -> None:
        self.cycle_id = cycle_id_for(message_id)
        self.completion_id = f"chatcmpl-{self.cycle_id}"
        self.created = int(time.time())
        self.extension = MemoriaExtension(
            thread_id=thread_id, cycle_id=self.cycle_id, message_id=message_id
        )
        self._listener = listener
        listener.only(self.cycle_id)  # the user's other cycles are not this request's
        self._timeout_s = timeout_s

    def _events(self) -> AsyncIterator[AnswerEvent]:
        return follow(self._listener, self.cycle_id, self._timeout_s)

    def _ended(self, event: CycleOver) -> None:
        self.extension.actions = event.end.actions
        self.extension.reason = event.end.reason
        self.extension.usage = event.end.usage

    async def whole(self) -> ChatCompletion:
        text: list[str] = []
        try:
            async for event in self._events():
                if isinstance(event, TextPiece):
                    text.append(event.text)
                elif isinstance(event, MemoryUsed):
                    self.extension.memories.append(event.memory)
                else:
                    self._ended(event)
        except AnswerTimeout as exc:
            raise OpenAIError(504, self._timeout_message()) from exc
        except AnswerLost as exc:
            raise OpenAIError(503, _LOST) from exc
        return ChatCompletion(
            id=self.completion_id,
            created=self.created,
            model=MODEL_ID,
            choices=[Choice(message=AnswerMessage(content="".join(text)))],
            usage=Usage.of(self.extension.usage),
            memoria=self.extension,
        )

    async def chunks(self, include_usage: bool) -> AsyncIterator[str]:
        yield self._chunk(ChunkDelta(role="assistant", content=""))
        try:
            async for event in self._events():
                if isinstance(event, TextPiece):
                    yield self._chunk(ChunkDelta(content=event.text))
                elif isinstance(event, MemoryUsed):
                    self.extension.memories.append(event.memory)
                    yield self._chunk(ChunkDelta(), memoria={"memory": event.memory})
                else:
                    self._ended(event)
        except AnswerTimeout:
            yield _sse(error_body(504, self._timeout_message()).model_dump())
            yield _DONE
            return
        except AnswerLost:
            yield _sse(error_body(503, _LOST).model_dump())
            yield _DONE
            return
        yield self._chunk(
            ChunkDelta(),
            finish_reason="stop",
            memoria=self.extension.model_dump(mode="json"),
        )
        if include_usage:
            usage = ChatCompletionChunk(
                id=self.completion_id,
                created=self.created,
                model=MODEL_ID,
                choices=[],
                usage=Usage.of(self.extension.usage),
            )
            yield _sse(usage.model_dump(mode="json"))
        yield _DONE

    def _chunk(
        self,
        delta: ChunkDelta,
        *,
        finish_reason: Any = None,
        memoria: dict[str, Any] | None = None,
    ) -> str:
        chunk = ChatCompletionChunk(
            id=self.completion_id,
            created=self.created,
            model=MODEL_ID,
            choices=[ChunkChoice(delta=delta, finish_reason=finish_reason)],
            memoria=memoria,
        )
        return _sse(chunk.model_dump(mode="json"))

    def _timeout_message(self) -> str:
        return (
            f"no answer within {int(self._timeout_s)} s; the message was accepted and its "
            f"answer will still appear in thread '{self.extension.thread_id}'"
        )


_LOST: Final = (
    "the answer's frames came faster than this request read them; the answer is in the "
    "thread's history (GET /api/threads/{thread_id}/messages)"
)
_DONE: Final = "data: [DONE]\n\n"


def _sse(data: dict[str, Any]) -> str:
    return f"data: {json.dumps(data, ensure_ascii=False, separators=(',', ':'))}\n\n"

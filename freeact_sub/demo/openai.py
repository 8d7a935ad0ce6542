"""The OpenAI chat-completions protocol of the scripted model server.

`POST /v1/chat/completions` (and `/chat/completions`) answers with what the responder decides,
streamed as server-sent events when the request says `"stream": true` — reasoning as
`reasoning_content` deltas, then text deltas, then tool-call deltas, then a usage chunk when
`stream_options.include_usage` asks for it, then `[DONE]` — or as one JSON completion otherwise.
`GET /v1/models` lists the demo model.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from .faults import Fault, faulty_stream
from .replies import ModelErrorReply, Reply
from .tasks import DEMO_MODEL
from .wire import ScriptedModel, pieces, read_model_request

__all__ = ["openai_routes"]


def openai_routes(server: ScriptedModel) -> list[Any]:
    """The Starlette routes that serve `server`'s responder over the OpenAI chat-completions protocol."""
    from sse_starlette import EventSourceResponse
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    def error(status: int, message: str, headers: dict[str, str] | None = None, *, kind: str | None = None,
              code: str | None = None) -> Response:
        kind = kind or _ERROR_TYPES.get(status, "invalid_request_error")
        body = {"error": {"message": message, "type": kind, "param": "messages" if code else None, "code": code}}
        return JSONResponse(body, status_code=status, headers=headers)

    async def completions(request: Request) -> Response:
        read = await read_model_request(server, "openai", request, error, "the request needs a list of messages")
        if not isinstance(read, tuple):
            return read  # refused: not JSON, no messages, or a fault that answers with a status
        body, fault = read
        reply = server.responder(body)
        if isinstance(reply, ModelErrorReply):
            return error(reply.status, reply.message)
        model = str(body.get("model") or DEMO_MODEL)
        if body.get("stream"):
            usage = bool((body.get("stream_options") or {}).get("include_usage"))
            chunks = _chunks(reply, model, body, usage, server.chunk_delay)
            if fault is not None:
                chunks = faulty_stream(chunks, fault, malformed='{"id": "chatcmpl-broken", "choices": [{"delta"',
                                       error_event=_error_chunk(fault))
            return EventSourceResponse(chunks, ping=0, sep="\n")
        return JSONResponse(_completion(reply, model, body))

    async def models(request: Request) -> Response:
        return JSONResponse(
            {"object": "list", "data": [{"id": DEMO_MODEL, "object": "model", "owned_by": "freeact-sub"}]}
        )

    return [
        Route("/v1/chat/completions", completions, methods=["POST"]),
        Route("/chat/completions", completions, methods=["POST"]),
        Route("/v1/models", models, methods=["GET"]),
    ]


_ERROR_TYPES = {429: "rate_limit_exceeded", 500: "server_error", 503: "service_unavailable", 529: "overloaded"}
"""The error `type` OpenAI-compatible servers send for a status (pydantic-ai reads the category from it in a stream)."""


def _error_chunk(fault: Fault) -> str:
    """An `error` chunk inside a stream, as OpenAI sends one when a response fails after it started."""
    kind = _ERROR_TYPES.get(fault.status, "server_error")
    return json.dumps({"error": {"message": fault.text(), "type": kind, "code": kind}})


def _usage(body: dict[str, Any], reply: Reply) -> dict[str, int]:
    prompt = len(json.dumps(body.get("messages", []))) // 4
    completion = (
        len(reply.reasoning) + len(reply.text) + sum(len(json.dumps(c.arguments)) for c in reply.tool_calls)
    ) // 4
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


async def _chunks(reply: Reply, model: str, body: dict[str, Any], usage: bool, delay: float) -> AsyncIterator[str]:
    """The `data:` payloads of one streamed completion (the SSE framing is sse-starlette's)."""
    ident, created = f"chatcmpl-{uuid.uuid4().hex[:16]}", int(time.time())

    def chunk(delta: dict[str, Any] | None, finish: str | None = None, **extra: Any) -> str:
        choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
        return json.dumps(
            {"id": ident, "object": "chat.completion.chunk", "created": created, "model": model, "choices": choices}
            | extra
        )

    yield chunk({"role": "assistant", "content": ""})
    for field, text in (("reasoning_content", reply.reasoning), ("content", reply.text)):
        for piece in pieces(text):
            await asyncio.sleep(delay)
            yield chunk({field: piece})
    for index, call in enumerate(reply.tool_calls):
        await asyncio.sleep(delay)
        start = {"index": index, "id": call.id, "type": "function", "function": {"name": call.name, "arguments": ""}}
        yield chunk({"tool_calls": [start]})
        arguments = json.dumps(call.arguments)
        for offset in range(0, len(arguments), 48):
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": arguments[offset : offset + 48]}}]})
    yield chunk({}, "tool_calls" if reply.tool_calls else "stop")
    if usage:
        yield chunk(None, usage=_usage(body, reply))
    yield "[DONE]"


def _completion(reply: Reply, model: str, body: dict[str, Any]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if reply.reasoning:
        message["reasoning_content"] = reply.reasoning
    if reply.tool_calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
            for c in reply.tool_calls
        ]
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:16]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if reply.tool_calls else "stop"}],
        "usage": _usage(body, reply),
    }

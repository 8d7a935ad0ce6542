"""The Anthropic Messages protocol of the scripted model server (every `DemoServer` serves it beside OpenAI's).

`POST /v1/messages` translates the request into the chat-completions shape the responder reads
(system prompt, user/assistant turns, tool calls and results, tools), then streams the reply as
the Messages API's server-sent events: `message_start`; per content block (`thinking`, `text`,
`tool_use`) a `content_block_start`, its `thinking_delta` / `text_delta` / `input_json_delta`
deltas and `content_block_stop`; `message_delta` with the stop reason and usage; `message_stop`.
Without `"stream": true` it answers with one JSON message.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Mapping
from typing import Any

from .faults import ANTHROPIC_ERROR_TYPES, Fault, faulty_stream
from .replies import ModelErrorReply, Reply
from .wire import ScriptedModel, pieces, read_model_request

__all__ = ["anthropic_routes", "to_chat_request"]


def anthropic_routes(server: ScriptedModel) -> list[Any]:
    """The Starlette routes that serve `server`'s responder over the Anthropic Messages protocol."""
    from sse_starlette import EventSourceResponse
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    def error(status: int, message: str, headers: dict[str, str] | None = None, *, kind: str | None = None,
              code: str | None = None) -> Response:
        kind = kind or ANTHROPIC_ERROR_TYPES.get(status, "invalid_request_error")
        return JSONResponse({"type": "error", "error": {"type": kind, "message": message}}, status_code=status,
                            headers=headers)

    async def messages(request: Request) -> Response:
        read = await read_model_request(server, "anthropic", request, error, "messages: a list of messages is required")
        if not isinstance(read, tuple):
            return read  # refused: not JSON, no messages, or a fault that answers with a status
        body, fault = read
        reply = server.responder(to_chat_request(body))
        if isinstance(reply, ModelErrorReply):
            return error(reply.status, reply.message)
        model = str(body.get("model") or "scripted")
        if body.get("stream"):
            events = _events(reply, model, body, server.chunk_delay)
            if fault is not None:
                broken = {"event": "content_block_delta", "data": '{"type": "con'}
                events = faulty_stream(events, fault, malformed=broken, error_event=_error_event(fault))
            return EventSourceResponse(events, ping=0, sep="\n")
        return JSONResponse(_message(reply, model, body))

    return [Route("/v1/messages", messages, methods=["POST"])]


def to_chat_request(body: Mapping[str, Any]) -> dict[str, Any]:
    """A Messages API request in the chat-completions shape: `{model, messages, tools}`."""
    chat: list[dict[str, Any]] = []
    system = body.get("system")
    if system:
        chat.append({"role": "system", "content": _plain(system)})
    for message in body.get("messages") or []:
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])
        if message.get("role") == "assistant":
            text = "".join(b.get("text", "") for b in blocks if b.get("type") == "text")
            calls = [
                {
                    "id": b["id"],
                    "type": "function",
                    "function": {"name": b["name"], "arguments": json.dumps(b["input"])},
                }
                for b in blocks
                if b.get("type") == "tool_use"
            ]
            chat.append({"role": "assistant", "content": text or None, **({"tool_calls": calls} if calls else {})})
            continue
        texts = []
        for block in blocks:
            if block.get("type") == "tool_result":
                chat.append(
                    {
                        "role": "tool",
                        "tool_call_id": block.get("tool_use_id"),
                        "content": _plain(block.get("content", "")),
                    }
                )
            elif block.get("type") == "text":
                texts.append(block.get("text", ""))
        if texts:
            chat.append({"role": "user", "content": "\n".join(texts)})
    tools = [
        {
            "type": "function",
            "function": {
                "name": t.get("name"),
                "description": t.get("description", ""),
                "parameters": t.get("input_schema", {}),
            },
        }
        for t in body.get("tools") or []
    ]
    return {"model": body.get("model"), "messages": chat, "tools": tools, "stream": bool(body.get("stream"))}


def _plain(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content or [] if isinstance(b, Mapping) and b.get("type") == "text")


def _usage(body: Mapping[str, Any], reply: Reply) -> tuple[int, int]:
    prompt = len(json.dumps(body.get("messages", []))) // 4
    output = len(reply.reasoning) + len(reply.text) + sum(len(json.dumps(c.arguments)) for c in reply.tool_calls)
    return prompt, max(1, output // 4)


def _error_event(fault: Fault) -> dict[str, str]:
    """An `error` event inside a stream, as Anthropic sends `overloaded_error` after a response started."""
    kind = ANTHROPIC_ERROR_TYPES.get(fault.status, "api_error")
    return {"event": "error", "data": json.dumps({"type": "error", "error": {"type": kind, "message": fault.text()}})}


def _sse(kind: str, data: dict[str, Any]) -> dict[str, str]:
    """One Messages API event, framed by sse-starlette (`event: <kind>`, `data: <json>`)."""
    return {"event": kind, "data": json.dumps({"type": kind, **data})}


async def _events(reply: Reply, model: str, body: Mapping[str, Any], delay: float) -> AsyncIterator[dict[str, str]]:
    input_tokens, output_tokens = _usage(body, reply)
    yield _sse(
        "message_start",
        {
            "message": {
                "id": f"msg_{uuid.uuid4().hex[:20]}",
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": input_tokens, "output_tokens": 1},
            }
        },
    )
    index = 0
    for kind, text in (("thinking", reply.reasoning), ("text", reply.text)):
        if not text:
            continue
        start = (
            {"type": "thinking", "thinking": "", "signature": ""}
            if kind == "thinking"
            else {"type": "text", "text": ""}
        )
        yield _sse("content_block_start", {"index": index, "content_block": start})
        for piece in pieces(text):
            await asyncio.sleep(delay)
            delta = {"type": f"{kind}_delta", kind: piece}
            yield _sse("content_block_delta", {"index": index, "delta": delta})
        if kind == "thinking":
            signature = {"type": "signature_delta", "signature": "scripted"}
            yield _sse("content_block_delta", {"index": index, "delta": signature})
        yield _sse("content_block_stop", {"index": index})
        index += 1
    for call in reply.tool_calls:
        await asyncio.sleep(delay)
        block = {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}
        yield _sse("content_block_start", {"index": index, "content_block": block})
        arguments = json.dumps(call.arguments)
        for offset in range(0, len(arguments), 48):
            delta = {"type": "input_json_delta", "partial_json": arguments[offset : offset + 48]}
            yield _sse("content_block_delta", {"index": index, "delta": delta})
        yield _sse("content_block_stop", {"index": index})
        index += 1
    stop = "tool_use" if reply.tool_calls else "end_turn"
    yield _sse(
        "message_delta",
        {"delta": {"stop_reason": stop, "stop_sequence": None}, "usage": {"output_tokens": output_tokens}},
    )
    yield _sse("message_stop", {})


def _message(reply: Reply, model: str, body: Mapping[str, Any]) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if reply.reasoning:
        content.append({"type": "thinking", "thinking": reply.reasoning, "signature": "scripted"})
    if reply.text:
        content.append({"type": "text", "text": reply.text})
    content += [{"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments} for c in reply.tool_calls]
    input_tokens, output_tokens = _usage(body, reply)
    return {
        "id": f"msg_{uuid.uuid4().hex[:20]}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": "tool_use" if reply.tool_calls else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
    }

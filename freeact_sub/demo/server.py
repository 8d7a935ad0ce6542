"""A scripted model served on a local port over two protocols at once: OpenAI chat completions
and the Anthropic Messages API (see `anthropic.py`).

`POST /v1/chat/completions` answers with what `scenario.respond()` decides, streamed as
server-sent events when the request says `"stream": true` (reasoning as `reasoning_content`
deltas, then text deltas, then tool-call deltas, then a usage chunk), or as one JSON
completion otherwise. `GET /v1/models` lists the demo model. `POST /v1/messages` answers the
same way in the Anthropic protocol, so one server (one port, one thread, one `close()`) serves
a parent on one protocol and its children on the other. The server runs with uvicorn in a
daemon thread with an event loop of its own, so it works from plain code and from inside a
running event loop (a notebook cell) alike.
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import re
import socket
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import Any, Literal

from .scenario import DEMO_MODEL, ModelErrorReply, Reply, respond

__all__ = ["DemoServer", "start_demo_server"]

DEFAULT_CHUNK_DELAY = 0.02
"""Seconds between streamed chunks: slow enough to watch, fast enough not to wait."""


class DemoServer:
    """A running scripted-model server. Stop it with `close()` or use it as a context manager."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        chunk_delay: float = DEFAULT_CHUNK_DELAY,
        protocol: Literal["openai", "anthropic"] = "openai",
        responder: Callable[[Mapping[str, Any]], Reply | ModelErrorReply] = respond,
    ) -> None:
        import uvicorn

        self.chunk_delay = chunk_delay
        self.protocol = protocol
        """The protocol `base_url` points at: `openai` (chat completions) or `anthropic` (messages).

        The server answers both either way; `base_url_for()` gives the other one's URL."""
        self.responder = responder
        """Decides each reply from a chat-completions shaped request (Anthropic requests are translated)."""
        self.requests: collections.deque[dict[str, Any]] = collections.deque(maxlen=200)
        """The bodies of the latest model requests (at most 200) of both protocols, oldest first, as sent."""
        self.requests_by_protocol: dict[str, collections.deque[dict[str, Any]]] = {
            name: collections.deque(maxlen=200) for name in ("openai", "anthropic")
        }
        """The same bodies by protocol: `requests_by_protocol["anthropic"]` holds the Messages API requests."""
        self._socket = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind((host, port))
        self._socket.listen(64)
        bound_host, bound_port = self._socket.getsockname()[:2]
        self.host: str = bound_host
        self.port: int = bound_port
        config = uvicorn.Config(
            _application(self), log_config=None, log_level="warning", access_log=False, lifespan="off"
        )
        self._server = uvicorn.Server(config)
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=f"freeact-sub-demo-server:{self.port}", daemon=True)
        self._closed = False

    @property
    def base_url(self) -> str:
        """The base URL for its `protocol`: `http://127.0.0.1:8123/v1` (OpenAI), `http://127.0.0.1:8123` (Anthropic)."""
        return self.base_url_for(self.protocol)

    def base_url_for(self, protocol: Literal["openai", "anthropic"]) -> str:
        """The base URL a pydantic-ai provider of `protocol` needs to reach this server.

        `openai`: `http://127.0.0.1:8123/v1` (for `OpenAIProvider`, or a bare model name with `base_url`);
        `anthropic`: `http://127.0.0.1:8123` (for `model="anthropic:<name>"`; the SDK adds `/v1/messages`).
        """
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}" + ("/v1" if protocol == "openai" else "")

    def log(self, protocol: str, body: dict[str, Any]) -> None:
        """Record one model request's body (called by the protocol handlers)."""
        self.requests.append(body)
        self.requests_by_protocol[protocol].append(body)

    def _run(self) -> None:
        try:
            asyncio.run(self._server.serve(sockets=[self._socket]))
        except BaseException as exc:  # reported by start() if it happens before the server listens
            self._failure = exc

    def start(self, timeout: float = 10.0) -> DemoServer:
        """Start serving and return once the server accepts requests."""
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if self._failure is not None or not self._thread.is_alive():
                self.close()
                raise RuntimeError(f"the demo model server did not start: {self._failure!r}")
            if time.monotonic() > deadline:
                self.close()
                raise RuntimeError("the demo model server did not start in time")
            time.sleep(0.005)
        return self

    def close(self) -> None:
        """Stop the server; calling it again does nothing."""
        if self._closed:
            return
        self._closed = True
        self._server.should_exit = True
        if self._thread.is_alive():
            self._thread.join(timeout=2.0)
            if self._thread.is_alive():
                self._server.force_exit = True  # a stream still open: stop without waiting for it
                self._thread.join(timeout=3.0)
        self._socket.close()

    def __enter__(self) -> DemoServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<DemoServer {self.protocol} {self.base_url}{' closed' if self._closed else ''}>"


def chunk_delay_from_env() -> float:
    """`FREEACT_SUB_DEMO_CHUNK_DELAY` (seconds between streamed chunks), or the default when unset.

    Raises `ValueError` naming the variable when it is not a number of seconds.
    """
    raw = os.environ.get("FREEACT_SUB_DEMO_CHUNK_DELAY", "").strip()
    if not raw:
        return DEFAULT_CHUNK_DELAY
    try:
        delay = float(raw)
    except ValueError:
        delay = -1.0
    if not delay >= 0:
        raise ValueError(f"FREEACT_SUB_DEMO_CHUNK_DELAY: expected seconds, got {raw!r}")
    return delay


def start_demo_server(
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    chunk_delay: float | None = None,
    protocol: Literal["openai", "anthropic"] = "openai",
    responder: Callable[[Mapping[str, Any]], Reply | ModelErrorReply] = respond,
) -> DemoServer:
    """Start the scripted demo model server in a background thread; returns once it listens.

    `port=0` picks a free port (see `DemoServer.base_url`). `chunk_delay` is the pause between
    streamed chunks in seconds (default: `FREEACT_SUB_DEMO_CHUNK_DELAY`, else 0.02). The server
    speaks both the OpenAI chat-completions and the Anthropic Messages protocol; `protocol` picks
    which one `base_url` points at
    (`protocol="anthropic"`: use it with `model="anthropic:<name>"` and `base_url=server.base_url`).
    """
    delay = chunk_delay_from_env() if chunk_delay is None else chunk_delay
    return DemoServer(host, port, chunk_delay=delay, protocol=protocol, responder=responder).start()


def _application(server: DemoServer) -> Any:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response, StreamingResponse
    from starlette.routing import Route

    async def completions(request: Request) -> Response:
        try:
            body = await request.json()
        except json.JSONDecodeError:
            return _error(400, "the request body is not valid JSON")
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return _error(400, "the request needs a list of messages")
        server.log("openai", body)
        reply = server.responder(body)
        if isinstance(reply, ModelErrorReply):
            return _error(reply.status, reply.message)
        model = str(body.get("model") or DEMO_MODEL)
        if body.get("stream"):
            usage = bool((body.get("stream_options") or {}).get("include_usage"))
            chunks = _sse(reply, model, body, usage, server.chunk_delay)
            return StreamingResponse(chunks, media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
        return JSONResponse(_completion(reply, model, body))

    async def models(request: Request) -> Response:
        return JSONResponse(
            {"object": "list", "data": [{"id": DEMO_MODEL, "object": "model", "owned_by": "freeact-sub"}]}
        )

    from .anthropic import anthropic_routes

    return Starlette(
        routes=[
            Route("/v1/chat/completions", completions, methods=["POST"]),
            Route("/chat/completions", completions, methods=["POST"]),
            Route("/v1/models", models, methods=["GET"]),
            *anthropic_routes(server),
        ]
    )


def _error(status: int, message: str) -> Any:
    from starlette.responses import JSONResponse

    return JSONResponse(
        {"error": {"message": message, "type": "invalid_request_error", "code": None}}, status_code=status
    )


def _pieces(text: str) -> Iterator[str]:
    """Split text into small streamable pieces (a word with its following space)."""
    yield from (m.group(0) for m in re.finditer(r"\S+\s*|\s+", text))


def _usage(body: dict[str, Any], reply: Reply) -> dict[str, int]:
    prompt = len(json.dumps(body.get("messages", []))) // 4
    completion = (
        len(reply.reasoning) + len(reply.text) + sum(len(json.dumps(c.arguments)) for c in reply.tool_calls)
    ) // 4
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


async def _sse(reply: Reply, model: str, body: dict[str, Any], usage: bool, delay: float) -> AsyncIterator[bytes]:
    ident, created = f"chatcmpl-{uuid.uuid4().hex[:16]}", int(time.time())

    def event(delta: dict[str, Any] | None, finish: str | None = None, **extra: Any) -> bytes:
        choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
        chunk = {"id": ident, "object": "chat.completion.chunk", "created": created, "model": model, "choices": choices}
        chunk.update(extra)
        return f"data: {json.dumps(chunk)}\n\n".encode()

    yield event({"role": "assistant", "content": ""})
    for field, text in (("reasoning_content", reply.reasoning), ("content", reply.text)):
        for piece in _pieces(text):
            await asyncio.sleep(delay)
            yield event({field: piece})
    for index, call in enumerate(reply.tool_calls):
        await asyncio.sleep(delay)
        start = {"index": index, "id": call.id, "type": "function", "function": {"name": call.name, "arguments": ""}}
        yield event({"tool_calls": [start]})
        arguments = json.dumps(call.arguments)
        for offset in range(0, len(arguments), 48):
            yield event({"tool_calls": [{"index": index, "function": {"arguments": arguments[offset : offset + 48]}}]})
    yield event({}, "tool_calls" if reply.tool_calls else "stop")
    if usage:
        yield event(None, usage=_usage(body, reply))
    yield b"data: [DONE]\n\n"


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

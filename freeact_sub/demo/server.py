"""A scripted model served on a local port over two protocols at once: OpenAI chat completions
(`openai.py`) and the Anthropic Messages API (`anthropic.py`).

Both answer with what `scenario.respond()` decides, so one server (one port, one thread, one
`close()`) serves a parent on one protocol and its children on the other. The server runs with uvicorn in a
daemon thread with an event loop of its own, so it works from plain code and from inside a
running event loop (a notebook cell) alike.
"""

from __future__ import annotations

import asyncio
import collections
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from .anthropic import anthropic_routes
from .faults import FaultChooser
from .mcp_http import MCP_PATH, LazyMcpEndpoint
from .openai import openai_routes
from .replies import ModelErrorReply, Reply
from .scenario import respond
from .wire import Wire

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
        protocol: Wire = "openai",
        responder: Callable[[Mapping[str, Any]], Reply | ModelErrorReply] = respond,
        faults: FaultChooser | None = None,
    ) -> None:
        import uvicorn

        self.chunk_delay = chunk_delay
        self.protocol = protocol
        """The protocol `base_url` points at: `openai` (chat completions) or `anthropic` (messages).

        The server answers both either way; `base_url_for()` gives the other one's URL."""
        self.responder = responder
        """Decides each reply from a chat-completions shaped request (Anthropic requests are translated)."""
        self.faults = faults
        """Decides which requests fail and how (`freeact_sub.demo.faults`): rate limits, overloads, broken streams."""
        self.requests: collections.deque[dict[str, Any]] = collections.deque(maxlen=200)
        """The bodies of the latest model requests (at most 200) of both protocols, oldest first, as sent."""
        self.requests_by_protocol: dict[str, collections.deque[dict[str, Any]]] = {
            name: collections.deque(maxlen=200) for name in ("openai", "anthropic")
        }
        """The same bodies by protocol: `requests_by_protocol["anthropic"]` holds the Messages API requests."""
        self._socket = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # asyncio sets TCP_NODELAY only on sockets made with proto IPPROTO_TCP, not on this one (proto 0), and its
        # connections inherit the listener's: without it a response's headers and body wait out the client's
        # delayed ACK (Nagle), 40 ms a request
        self._socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._socket.bind((host, port))
        self._socket.listen(64)
        bound_host, bound_port = self._socket.getsockname()[:2]
        self.host: str = bound_host
        self.port: int = bound_port
        config = uvicorn.Config(  # no WebSocket protocol: none is served, and loading it costs ~30 ms of CPU a start
            _application(self), log_config=None, log_level="warning", access_log=False, lifespan="off", ws="none"
        )
        self._server = uvicorn.Server(config)
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=f"freeact-sub-demo-server:{self.port}", daemon=True)
        self._closed = False

    @property
    def base_url(self) -> str:
        """The base URL for its `protocol`: `http://127.0.0.1:8123/v1` (OpenAI), `http://127.0.0.1:8123` (Anthropic)."""
        return self.base_url_for(self.protocol)

    def base_url_for(self, protocol: Wire) -> str:
        """The base URL a pydantic-ai provider of `protocol` needs to reach this server.

        `openai`: `http://127.0.0.1:8123/v1` (for `OpenAIProvider`, or a bare model name with `base_url`);
        `anthropic`: `http://127.0.0.1:8123` (for `model="anthropic:<name>"`; the SDK adds `/v1/messages`).
        """
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}" + ("/v1" if protocol == "openai" else "")

    @property
    def mcp_url(self) -> str:
        """The URL of the demo MCP server (tools `constant` and `word_count`) that this server also serves, over
        streamable HTTP: `{"url": server.mcp_url}` is an `mcp_servers` entry (`demo_mcp_server()` gives it)."""
        return self.base_url_for("anthropic") + MCP_PATH

    def log(self, protocol: Wire, body: dict[str, Any]) -> None:
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
    protocol: Wire = "openai",
    responder: Callable[[Mapping[str, Any]], Reply | ModelErrorReply] = respond,
    faults: FaultChooser | None = None,
) -> DemoServer:
    """Start the scripted demo model server in a background thread; returns once it listens.

    `port=0` picks a free port (see `DemoServer.base_url`). `chunk_delay` is the pause between
    streamed chunks in seconds (default: `FREEACT_SUB_DEMO_CHUNK_DELAY`, else 0.02). The server
    speaks both the OpenAI chat-completions and the Anthropic Messages protocol; `protocol` picks
    which one `base_url` points at
    (`protocol="anthropic"`: use it with `model="anthropic:<name>"` and `base_url=server.base_url`).
    `faults` makes some requests fail as real providers do (`freeact_sub.demo.faults.Fault`).
    """
    delay = chunk_delay_from_env() if chunk_delay is None else chunk_delay
    return DemoServer(host, port, chunk_delay=delay, protocol=protocol, responder=responder,
                      faults=faults).start()


def _application(server: DemoServer) -> Any:
    from starlette.applications import Starlette
    from starlette.routing import Route

    mcp = Route(MCP_PATH, endpoint=LazyMcpEndpoint(), methods=["GET", "POST", "DELETE"])
    return Starlette(routes=[*openai_routes(server), *anthropic_routes(server), mcp])

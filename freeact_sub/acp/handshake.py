"""The client's `initialize`, answered before the ACP SDK is imported.

The SDK's schema is a module of some 6,000 lines of pydantic models: importing it takes a second or more,
and an editor shows its agent as starting until `initialize` is answered. So the first request is read
and answered here, with plain JSON, while the SDK, the configuration and the model are made in the
background; everything after it goes to the SDK's connection. `FreeactAcpAgent.initialize` returns the
same answer (`initialize_result`), so a client that the SDK serves gets nothing different.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

__all__ = ["PROTOCOL_VERSION", "answer_initialize", "initialize_result", "relayed"]

PROTOCOL_VERSION = 1
"""The ACP version this agent speaks (the SDK's `acp.PROTOCOL_VERSION`; a test keeps the two equal)."""


def initialize_result(version: str) -> dict[str, Any]:
    """The `initialize` result, as ACP's JSON names it: the protocol version, what this agent can do, who it is."""
    return {
        "protocolVersion": PROTOCOL_VERSION,
        "agentCapabilities": {
            "loadSession": True,
            "promptCapabilities": {"embeddedContext": True},
            "mcpCapabilities": {"http": True},
        },
        "agentInfo": {"name": "freeact-sub", "title": "freeact-sub", "version": version},
    }


async def answer_initialize(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, version: str
) -> tuple[bytes, dict[str, Any] | None]:
    """Read the client's first message; if it is `initialize`, answer it. Returns what the SDK must still read
    (the message, when it was something else) and the `initialize` params (None when it was not answered here)."""
    line = await reader.readline()
    try:
        message = json.loads(line)
    except ValueError:
        return line, None
    if not isinstance(message, dict) or message.get("method") != "initialize" or "id" not in message:
        return line, None
    answer = {"jsonrpc": "2.0", "id": message["id"], "result": initialize_result(version)}
    writer.write(json.dumps(answer).encode() + b"\n")
    await writer.drain()
    params = message.get("params")
    return b"", params if isinstance(params, dict) else {}


def relayed(source: asyncio.StreamReader, first: bytes, limit: int) -> tuple[asyncio.StreamReader, asyncio.Task[None]]:
    """A reader that yields `first`, then whatever `source` yields, and the task that copies it over."""
    target = asyncio.StreamReader(limit=limit)
    if first:
        target.feed_data(first)

    async def copy() -> None:
        try:
            while chunk := await source.read(65536):
                target.feed_data(chunk)
        finally:
            with contextlib.suppress(Exception):
                target.feed_eof()

    return target, asyncio.create_task(copy(), name="acp-stdin")

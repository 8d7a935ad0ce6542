"""The ACP handshake answered before the SDK loads says exactly what the SDK-served `initialize` says."""

from __future__ import annotations

import argparse
import asyncio
import json

import acp

import freeact_sub
from freeact_sub.acp.handshake import PROTOCOL_VERSION, answer_initialize, initialize_result, relayed
from freeact_sub.acp.server import FreeactAcpAgent


def test_the_protocol_version_is_the_sdks() -> None:
    assert PROTOCOL_VERSION == acp.PROTOCOL_VERSION


async def test_the_early_answer_equals_the_sdk_served_one() -> None:
    served = await FreeactAcpAgent(argparse.Namespace()).initialize(protocol_version=1)
    as_sent = served.model_dump(mode="json", by_alias=True, exclude_none=True, exclude_unset=True)
    assert as_sent == initialize_result(freeact_sub.__version__)


class _Sink:
    def __init__(self) -> None:
        self.data = b""

    def write(self, data: bytes) -> None:
        self.data += data

    async def drain(self) -> None:
        return None


async def test_initialize_is_answered_and_the_rest_goes_on_to_the_sdk() -> None:
    source = asyncio.StreamReader()
    hello = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
             "params": {"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": True}}}}
    source.feed_data(json.dumps(hello).encode() + b"\n" + b'{"jsonrpc": "2.0", "id": 1, "method": "session/new"}\n')
    source.feed_eof()
    sink = _Sink()
    first, params = await answer_initialize(source, sink, "9.9")  # type: ignore[arg-type]
    assert json.loads(sink.data) == {"jsonrpc": "2.0", "id": 0, "result": initialize_result("9.9")}
    assert first == b"" and params == hello["params"]
    rest, copying = relayed(source, first, limit=1024)
    assert json.loads(await rest.readline())["method"] == "session/new"
    assert await rest.readline() == b""
    await copying


async def test_a_first_message_that_is_not_initialize_is_left_for_the_sdk() -> None:
    source = asyncio.StreamReader()
    line = b'{"jsonrpc": "2.0", "id": 3, "method": "session/new"}\n'
    source.feed_data(line)
    source.feed_eof()
    sink = _Sink()
    first, params = await answer_initialize(source, sink, "9.9")  # type: ignore[arg-type]
    assert (first, params, sink.data) == (line, None, b"")
    rest, copying = relayed(source, first, limit=1024)
    assert await rest.readline() == line
    await copying

"""The client's first `session/new`, answered before the ACP SDK loads: what it answers, and what it leaves to the
SDK's path."""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from acp.schema import NewSessionResponse, SessionMode, SessionModeState

from freeact_sub import AgentConfig
from freeact_sub.acp.early import Prepared, answer_session_new, modes_result
from freeact_sub.launch.modes import MODES


class _Sink:
    def __init__(self) -> None:
        self.data = b""

    def write(self, data: bytes) -> None:
        self.data += data

    async def drain(self) -> None:
        return None


@pytest.mark.parametrize("auto", [False, True])
def test_the_early_modes_equal_the_sdk_served_ones(auto: bool) -> None:
    state = SessionModeState(
        current_mode_id="auto" if auto else "ask",
        available_modes=[
            SessionMode(id=mode.id, name=mode.name, description=mode.description) for mode in MODES.values()
        ],
    )
    served = NewSessionResponse(session_id="s", modes=state).model_dump(mode="json", by_alias=True, exclude_none=True)
    assert served["modes"] == modes_result(auto)


def _prepared(folder: Path, *, auto: bool = False) -> asyncio.Future[Prepared]:
    done: asyncio.Future[Prepared] = asyncio.get_running_loop().create_future()
    done.set_result(
        Prepared(
            demo=None, folder=folder.resolve(), config=AgentConfig(model="test", working_dir=folder, auto_approve=auto)
        )
    )
    return done


def _reader(*messages: dict[str, Any]) -> asyncio.StreamReader:
    source = asyncio.StreamReader()
    for message in messages:
        source.feed_data(json.dumps(message).encode() + b"\n")
    source.feed_eof()
    return source


async def test_a_session_new_for_the_configured_folder_is_answered_with_a_new_id(tmp_path: Path) -> None:
    params = {"cwd": str(tmp_path), "mcpServers": []}
    sink = _Sink()
    first, early = await answer_session_new(
        _reader({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": params}),
        sink,  # type: ignore[arg-type]
        argparse.Namespace(working_dir=None),
        _prepared(tmp_path, auto=True),
    )
    answer = json.loads(sink.data)
    assert first == b"" and early is not None and early.params == params
    assert answer == {"jsonrpc": "2.0", "id": 1, "result": {"sessionId": early.session_id, "modes": modes_result(True)}}


@pytest.mark.parametrize(
    "message",
    [
        {"jsonrpc": "2.0", "id": 1, "method": "session/load", "params": {"cwd": "/", "sessionId": "x"}},
        {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/", "mcpServers": []}},
        {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"mcpServers": []}},
    ],
    ids=["another-request", "another-folder", "no-cwd"],
)
async def test_other_requests_and_other_folders_go_on_to_the_sdk(tmp_path: Path, message: dict[str, Any]) -> None:
    sink = _Sink()
    first, early = await answer_session_new(
        _reader(message),
        sink,
        argparse.Namespace(working_dir=None),  # type: ignore[arg-type]
        _prepared(tmp_path),
    )
    assert (json.loads(first), early, sink.data) == (message, None, b"")


async def test_a_configuration_that_failed_leaves_the_session_to_the_sdk(tmp_path: Path) -> None:
    failed: asyncio.Future[Prepared] = asyncio.get_running_loop().create_future()
    failed.set_exception(ValueError("bad config"))
    message = {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": str(tmp_path)}}
    sink = _Sink()
    first, early = await answer_session_new(
        _reader(message),
        sink,
        argparse.Namespace(working_dir=None),  # type: ignore[arg-type]
        failed,
    )
    assert (json.loads(first), early, sink.data) == (message, None, b"")

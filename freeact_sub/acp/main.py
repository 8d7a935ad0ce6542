"""`freeact-sub acp`: the agent on stdin/stdout, for an editor or a chat that speaks the Agent Client Protocol.

Stdout carries the protocol and nothing else: the process keeps its own copies of fds 0 and 1 for the
connection and points fd 1 at stderr and fd 0 at /dev/null, so a stray `print`, a library's warning or
a process it starts cannot corrupt (or read) the protocol. Logs go to stderr. The process ends when the
client closes stdin, or on SIGTERM/SIGINT; either way every session's agent is stopped first (kernels,
MCP servers, subagents), so nothing outlives it.

Exit codes: 0 the client went away; 2 a usage or configuration error found before serving.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Callable
from typing import Any, TypeVar

from freeact_sub.launch import UsageError, add_config_flags, add_demo_flag

__all__ = ["acp_main", "build_parser"]

T = TypeVar("T")

_STREAM_LIMIT = 50 * 1024 * 1024
"""The longest line (one JSON-RPC message) read from the client."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="freeact-sub acp",
        description="Serve freeact-sub over the Agent Client Protocol on stdio (Zed, JetBrains, Neovim, Jupyter AI). "
        "Configured as the terminal command is; the project's powerful agent types are used only in a trusted "
        "folder (freeact-sub trust) or with --trust-project.",
    )
    add_config_flags(parser)
    add_demo_flag(parser)
    parser.add_argument("--log-level", default="WARNING", help="log level on stderr (default: WARNING)")
    return parser


def acp_main(argv: list[str]) -> int:
    """Run the ACP agent until the client goes away; returns the exit code."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=args.log_level.upper(),
                        format="freeact-sub acp: %(levelname)s %(message)s")
    try:
        streams = _own_stdio()
        return asyncio.run(_serve(args, *streams))
    except UsageError as exc:
        print(f"freeact-sub acp: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    finally:  # everything is stopped: a late SIGTERM (a client that waited less) must not cut the exit short
        signal.signal(signal.SIGTERM, signal.SIG_IGN)


def _own_stdio() -> tuple[int, int]:
    """Private copies of stdin and stdout for the protocol; fd 0 becomes /dev/null, fd 1 a copy of stderr."""
    protocol_in, protocol_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    return protocol_in, protocol_out


async def _streams(fd_in: int, fd_out: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=_STREAM_LIMIT)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(fd_in, "rb", buffering=0))
    transport, protocol = await loop.connect_write_pipe(
        lambda: asyncio.StreamReaderProtocol(asyncio.StreamReader()), os.fdopen(fd_out, "wb", buffering=0)
    )
    return reader, asyncio.StreamWriter(transport, protocol, None, loop)


async def _serve(args: argparse.Namespace, fd_in: int, fd_out: int) -> int:
    import freeact_sub

    from .early import answer_session_new, prepare
    from .handshake import answer_initialize, relayed

    task = asyncio.current_task()
    assert task is not None
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        loop.add_signal_handler(signum, task.cancel)
    # The client's `initialize` is answered at once (`handshake.py`); then the demo server and the configuration
    # of the served folder are made, and its first `session/new` is answered (`early.py`); then the SDK is
    # imported, and the model (pydantic-ai and the provider's SDK: seconds) and the agent behind the connection.
    # Each waits for the one before, so none slows the answer before it on a busy machine. A bad flag, file or
    # key is said on stderr as soon as it is found, and ends the process (exit 2).
    prepared = asyncio.create_task(asyncio.to_thread(prepare, args), name="prepare-acp")
    sdk = asyncio.create_task(_after(prepared, _import_sdk), name="import-acp")
    agent: Any = None
    jobs: list[asyncio.Task[Any]] = [prepared, sdk]
    try:
        reader, writer = await _streams(fd_in, fd_out)
        first, client = await answer_initialize(reader, writer, freeact_sub.__version__)
        early = None
        if not first:  # `initialize` was answered: the next request may be the first `session/new`
            first, early = await answer_session_new(reader, writer, args, prepared)
        run_agent, agent_class = await sdk
        agent = agent_class(args)
        agent.client_initialize, agent.wire = client, writer
        if not prepared.exception():
            agent.demo = prepared.result().demo
        checked = asyncio.create_task(asyncio.to_thread(agent.check_config), name="check-config")
        agent.ready = checked
        checked.add_done_callback(_collect_as_usual)
        if early is not None:
            agent.open_early(early.session_id, early.params, early.store)
        rest, copying = relayed(reader, first, _STREAM_LIMIT)
        serving = asyncio.create_task(run_agent(agent, input_stream=writer, output_stream=rest))
        jobs += [copying, serving]  # not `checked`: a thread runs on anyway, and a session answered early needs it
        await asyncio.wait({checked, serving}, return_when=asyncio.FIRST_COMPLETED)
        if checked.done() and checked.exception() is not None:
            raise checked.exception()  # type: ignore[misc]
        await serving
    except asyncio.CancelledError:
        _uncancel(task)
    finally:
        for job in jobs:
            if not job.done():
                job.cancel()
                with contextlib.suppress(BaseException):
                    await job
        if agent is not None:
            closing = asyncio.ensure_future(_close(agent))
            while not closing.done():  # a signal while the sessions stop does not cut the stop short
                try:
                    await asyncio.shield(closing)
                except asyncio.CancelledError:
                    _uncancel(task)
    return 0


async def _after(first: asyncio.Task[Any], job: Callable[[], T]) -> T:
    """`job` in a thread once `first` has ended (however it ended)."""
    await asyncio.wait({first})
    return await asyncio.to_thread(job)


def _import_sdk() -> tuple[Any, Any]:
    """The ACP SDK's `run_agent` and our agent class (whose module imports the SDK's schema)."""
    from acp import run_agent

    from .server import FreeactAcpAgent

    return run_agent, FreeactAcpAgent


def _uncancel(task: asyncio.Task[Any]) -> None:
    while task.uncancel():
        pass


async def _close(agent: Any) -> None:
    try:
        await agent.close()
    finally:
        if agent.demo is not None:
            agent.demo.close()


def _collect_as_usual(checked: asyncio.Task[Any]) -> None:
    """The SDK, the configuration and the model's SDK are imported: the garbage collector's start-up pace ends."""
    from freeact_sub.start_gc import started

    started()

"""The client's first `session/new`, answered before the ACP SDK, the model's SDK and the agent are imported.

An editor waits on `session/new` before it lets a person type. Its answer needs only a session id and the
session's modes; the id is chosen here (`new_session_id()`), the saved session is made on disk under it before
the answer (a client may load it at once, in another process), and the modes come from the configuration of the
folder the process serves (`prepare`: the demo server and `build_config`, without the model). The session's agent
is made once the SDK is in (`FreeactAcpAgent.open_early`), from the same request as the SDK parses it; its first
prompt waits for it.

Only a `session/new` for the folder that was configured (the process's, or `--working-dir`'s) is answered
here; any other first request, or a configuration that failed, goes to the SDK as before.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from freeact_sub import AgentConfig
    from freeact_sub.demo import DemoServer
    from freeact_sub.sessions import SessionStore

__all__ = ["EarlySession", "Prepared", "answer_session_new", "modes_result", "prepare"]


@dataclass(frozen=True, kw_only=True)
class Prepared:
    """What the process made before the SDK: the demo server, and the configuration of the folder it serves."""

    demo: DemoServer | None
    """The demo's model server (`--demo`), handed on to the ACP agent."""
    folder: Path
    """The folder `config` was built for."""
    config: AgentConfig
    """That folder's configuration (its model checked, not built)."""


@dataclass(frozen=True, kw_only=True)
class EarlySession:
    """A `session/new` answered here: the id handed out and the request's params, for `open_early`."""

    session_id: str
    params: dict[str, Any]
    store: SessionStore | None = None
    """The session, made on disk (and locked) before the answer: a client may load the id it was handed at once.
    None with `save_sessions` off. The agent takes it over (`Agent.name_new_session`)."""


def prepare(args: argparse.Namespace) -> Prepared:
    """Start the demo server (`--demo`) and build the configuration of the folder the process serves; a
    `UsageError` names a problem (the process then ends, as it does when the full check finds it)."""
    from freeact_sub import ConfigError
    from freeact_sub.launch import UsageError, build_config, load_dotenv, start_demo

    demo = start_demo() if args.demo else None
    folder = Path(args.working_dir or Path.cwd()).expanduser().resolve()
    try:
        load_dotenv(folder, lambda _: None)  # its warning is the session's to log, when the SDK's path makes it
        config = build_config(args, folder, demo)
        config.check_model()
    except BaseException as exc:
        if demo is not None:
            demo.close()
        if isinstance(exc, ConfigError):
            raise UsageError(str(exc)) from None
        raise
    return Prepared(demo=demo, folder=folder, config=config)


def modes_result(auto_approve: bool) -> dict[str, Any]:
    """A session's modes as ACP's JSON names them (`SessionModeState`), `auto` current when everything is
    approved, else `ask` (`launch.modes.initial_mode`)."""
    from freeact_sub.launch.modes import MODES

    return {
        "currentModeId": "auto" if auto_approve else "ask",
        "availableModes": [
            {"id": mode.id, "name": mode.name, "description": mode.description} for mode in MODES.values()
        ],
    }


async def answer_session_new(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    args: argparse.Namespace,
    prepared: asyncio.Future[Prepared],
) -> tuple[bytes, EarlySession | None]:
    """Read the client's next message; if it is a `session/new` for the configured folder, answer it with a new
    session id. Returns what the SDK must still read (the message, when it was not answered here) and the
    session answered (None when none was)."""
    from freeact_sub.sessions.store import new_session_id

    line = await reader.readline()
    try:
        message = json.loads(line)
    except ValueError:
        return line, None
    if not isinstance(message, dict) or message.get("method") != "session/new" or "id" not in message:
        return line, None
    params = message.get("params")
    if not isinstance(params, dict) or not isinstance(params.get("cwd"), str):
        return line, None
    cwd = params["cwd"]
    try:
        made = await prepared
    except Exception:  # the SDK's path says what is wrong (and the process ends, as before)
        return line, None
    if args.working_dir is None and await asyncio.to_thread(lambda: Path(cwd).expanduser().resolve()) != made.folder:
        return line, None  # another folder's configuration is made on the SDK's path
    session_id = new_session_id()
    store = None
    if made.config.save_sessions:
        from freeact_sub.sessions import SessionError, SessionStore

        try:
            store = await asyncio.to_thread(SessionStore.create, made.folder, session_id)
        except SessionError:  # the SDK's path makes it, and says what is wrong
            return line, None
        store.mark_used()  # its id is handed out: kept even if nothing is ever said in it
    session = EarlySession(session_id=session_id, params=params, store=store)
    result = {"sessionId": session.session_id, "modes": modes_result(made.config.auto_approve)}
    writer.write(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode() + b"\n")
    await writer.drain()
    return b"", session

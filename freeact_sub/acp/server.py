"""The ACP agent: `initialize`, `session/new`, `session/load`, `session/prompt`, `session/cancel`, `session/set_mode`.

Every session is a main `Agent` built from the same configuration as the terminal's (`--config`, flags,
`FREEACT_SUB_*` variables, the working folder's `.env`, agent types, sandbox, rules, hooks). The
session's folder is the client's `cwd` unless `--working-dir` names one; MCP servers the client passes
(stdio ones) join the configured ones. A session's id is the id it is saved under, so `session/load`
resumes it (the conversation goes on; the kernel is new) and replays it to the client first.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from acp import RequestError, update_agent_message_text, update_agent_thought_text
from acp.schema import (
    InitializeResponse,
    LoadSessionResponse,
    NewSessionResponse,
    PromptResponse,
    SetSessionModeResponse,
)

import freeact_sub
from freeact_sub.launch import UsageError, build_config, load_dotenv, start_demo
from freeact_sub.launch.modes import MODES

from .handshake import initialize_result

if TYPE_CHECKING:
    from freeact_sub import Agent
    from freeact_sub.demo import DemoServer
    from freeact_sub.sessions import SessionStore

    from .session import AcpSession

__all__ = ["FreeactAcpAgent"]

log = logging.getLogger("freeact_sub.acp")


def _prompt_text(blocks: list[Any]) -> str:
    """The prompt's text: text blocks, and embedded text resources quoted after it (links by their URI)."""
    parts: list[str] = []
    for block in blocks:
        kind = getattr(block, "type", None)
        if kind == "text":
            parts.append(block.text)
        elif kind == "resource" and hasattr(block.resource, "text"):
            parts.append(f"\n[{block.resource.uri}]\n{block.resource.text}")
        elif kind == "resource_link":
            parts.append(f"[{block.name}]({block.uri})")
    return "\n".join(parts).strip()


def _client_servers(servers: list[Any] | None) -> dict[str, dict[str, Any]]:
    """The client's stdio and HTTP MCP servers in the `mcpServers` shape; others (SSE) are left out, logged."""
    found: dict[str, dict[str, Any]] = {}
    for server in servers or []:
        if getattr(server, "command", None) is not None:
            found[server.name] = {"command": server.command, "args": list(server.args or []),
                                  "env": {variable.name: variable.value for variable in server.env or []}}
        elif getattr(server, "type", None) == "http":
            found[server.name] = {"url": server.url,
                                  "headers": {header.name: header.value for header in server.headers or []}}
        else:
            log.warning("MCP server %s from the client left out: only stdio and HTTP servers are used", server.name)
    return found


STARTING = "Starting the kernel and MCP servers …\n"
"""What the first prompt of a session says while it waits for the session's start."""

RESOURCE_NOT_FOUND = -32002
"""ACP's error for an unknown session: clients such as acpx make a new session when they get it."""


def _saved_events(open_session: Any, session_id: str, working_dir: Path) -> list[Any]:
    """The saved events of a session to replay (none, logged, if it cannot be read)."""
    from freeact_sub import SessionError

    try:
        return list(open_session(session_id, working_dir).events())
    except SessionError as exc:
        log.warning("session %s could not be replayed: %s", session_id, exc)
        return []


class FreeactAcpAgent:
    """The ACP `Agent` the SDK's connection calls; one `AcpSession` per session."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.demo: DemoServer | None = None
        """The offline demo's model server (`--demo`), started by `check_config`."""
        self.ready: asyncio.Future[None] | None = None
        """`check_config` running behind the client's `initialize`; a session waits for it."""
        self.client: Any = None
        self.client_initialize: dict[str, Any] | None = None
        """The client's `initialize` params (its capabilities and name), when `handshake.py` answered it."""
        self.wire: asyncio.StreamWriter | None = None
        """The protocol's stdout, for the updates the SDK has no types for (subagents as child sessions)."""
        self.sessions: dict[str, AcpSession] = {}
        self._untrusted: dict[int, tuple[Agent, Any, Any]] = {}
        """By `id()` of an agent that started without its folder's files with powers: the agent, those files
        (`ProjectPowers`) and the config, until the session's first prompt has asked (`trust.py`)."""
        self._starting: dict[str, asyncio.Future[None]] = {}
        """Sessions whose agent starts behind the `session/new` answer, until their first prompt waited for it."""
        self._early: dict[str, asyncio.Task[NewSessionResponse]] = {}
        """Sessions whose `session/new` was answered before the SDK was imported (`early.py`), while they are made."""

    def on_connect(self, conn: Any) -> None:
        self.client = conn

    async def initialize(self, protocol_version: int, client_capabilities: Any = None, client_info: Any = None,
                         **kwargs: Any) -> InitializeResponse:
        return InitializeResponse.model_validate(initialize_result(freeact_sub.__version__))

    async def authenticate(self, method_id: str, **kwargs: Any) -> None:
        return None

    def check_config(self) -> None:
        """Start the demo server (`--demo`), and build the configuration once for the folder the process starts in:
        `UsageError` names the problem. It imports the agent and the model's SDK, so that a session need not."""
        from freeact_sub import ConfigError

        if self.args.demo and self.demo is None:
            self.demo = start_demo()
        working_dir = Path(self.args.working_dir or Path.cwd()).expanduser().resolve()
        try:
            build_config(self.args, working_dir, self.demo).resolve_model()
        except ConfigError as exc:
            raise UsageError(str(exc)) from None
        import freeact_sub.agent.agent  # noqa: F401 - here, off the event loop, not when the first session starts

    async def _config(self, cwd: str, mcp_servers: list[Any] | None) -> Any:
        from freeact_sub import ConfigError

        if self.ready is not None:
            await asyncio.shield(self.ready)  # its error ends the process; here it is the session's too
        folder = self.args.working_dir or cwd
        working_dir = await asyncio.to_thread(lambda: Path(folder).expanduser().resolve())
        if not working_dir.is_dir():
            why = "not a folder (a file of that name is there)" if working_dir.exists() else "there is no such folder"
            raise RequestError.invalid_params({"cwd": f"{folder}: {why}"})
        load_dotenv(working_dir, lambda text: log.warning("%s", text))
        try:
            config = build_config(self.args, working_dir, self.demo)
            extra = _client_servers(mcp_servers)
            if extra:  # the person's editor is as trusted as their config file: its servers join the configured
                config.mcp_servers = {**config.mcp_servers, **extra}  # type: ignore[dict-item]
            config.check_model()  # a missing key or an unknown model is reported before any kernel starts
        except (ConfigError, UsageError) as exc:
            raise RequestError.invalid_params({"configuration": str(exc)}) from None
        return config

    async def _start(self, config: Any, session: str | None, trust: bool | None = None) -> Agent:
        from freeact_sub import FreeactError

        agent = self._agent(config, session, trust)
        try:
            await agent.start()
        except FreeactError as exc:
            await agent.stop()
            raise RequestError.internal_error({"start": str(exc)}) from None
        return agent

    def _agent(self, config: Any, session: str | None, trust: bool | None = None) -> Agent:
        """The session's agent; in a folder whose files with powers wait for trust, without them (inert), noted in
        `_untrusted` so that the session's first prompt asks (`trust.py`)."""
        from freeact_sub import Agent, ConfigError, SessionError

        try:
            agent = Agent(config, session=session, trust_project=self.args.trust_project if trust is None else trust)
            project = agent.untrusted_project()
        except (SessionError, ConfigError) as exc:
            raise RequestError.invalid_params({"session": str(exc)}) from None
        if project is not None:
            agent.trust_project = False
            self._untrusted[id(agent)] = (agent, project, config)
        return agent

    async def new_session(self, cwd: str, mcp_servers: list[Any] | None = None, **kwargs: Any) -> NewSessionResponse:
        """The session's id at once; its kernel and MCP servers start behind the answer, and its first prompt
        waits for them (a start that fails is that prompt's error)."""
        from freeact_sub.sessions.store import new_session_id

        return await self._new(cwd, mcp_servers, new_session_id())

    def open_early(self, session_id: str, params: dict[str, Any], store: SessionStore | None = None) -> None:
        """Make the session whose `session/new` (`params`, as the client sent them) was answered with `session_id`
        before the SDK was imported (`early.py`), its saved session `store` made then already; a request on it waits
        until it is made, and gets its error."""
        from acp.schema import NewSessionRequest

        async def make() -> NewSessionResponse:
            try:
                request = NewSessionRequest.model_validate(params)
            except ValueError as exc:
                if store is not None:
                    store.close()
                raise RequestError.invalid_params({"session/new": str(exc)}) from None
            return await self._new(request.cwd, request.mcp_servers, session_id, store)

        made = asyncio.create_task(make(), name=f"session-{session_id}")
        made.add_done_callback(lambda task: None if task.cancelled() else task.exception())  # its requests raise it
        self._early[session_id] = made

    async def _made(self, session_id: str) -> None:
        """Wait until a session answered early is made; its error is this request's (and every later one's)."""
        made = self._early.get(session_id)
        if made is not None:
            await asyncio.shield(made)

    async def _new(
        self, cwd: str, mcp_servers: list[Any] | None, session_id: str, store: SessionStore | None = None
    ) -> NewSessionResponse:
        try:
            agent = self._agent(await self._config(cwd, mcp_servers), None)
        except BaseException:
            if store is not None:
                store.close()
            raise
        # saved under the id handed out (with `save_sessions` off, never saved), in `store` if it was made already
        agent.name_new_session(session_id, store)
        agent.keep_session()  # its id is handed out now: a client may load it, still empty, in another process
        starting = asyncio.ensure_future(agent.start())
        await asyncio.sleep(0)  # a type file or a session that cannot start fails before `start()` first waits
        if starting.done() and starting.exception() is not None:
            await self._failed_start(agent, starting)
        session = self._open(agent, session_id)
        self._starting[session_id] = starting
        return NewSessionResponse(session_id=session_id, modes=session.modes())

    async def _failed_start(self, agent: Agent, starting: asyncio.Future[None]) -> None:
        """Stop what had started, and raise the start's error as the client's request error."""
        from freeact_sub import FreeactError

        exc = starting.exception()
        await agent.stop()
        if isinstance(exc, FreeactError):
            raise RequestError.internal_error({"start": str(exc)}) from None
        raise exc  # type: ignore[misc]

    async def _started(self, session_id: str) -> None:
        """Wait for the session's agent to have started (`new_session` starts it behind its answer)."""
        starting = self._starting.get(session_id)
        if starting is None:
            return
        try:
            await asyncio.shield(starting)
        except asyncio.CancelledError:
            if not starting.cancelled():
                raise
        self._starting.pop(session_id, None)
        if starting.cancelled() or starting.exception() is not None:
            session = self.sessions.pop(session_id, None)
            if session is not None and not starting.cancelled():
                await self._failed_start(session.agent, starting)
            raise RequestError.internal_error({"start": "the session's start was cancelled"})

    async def _stop_starting(self, session_id: str) -> None:
        starting = self._starting.pop(session_id, None)
        session = self.sessions.get(session_id)
        if starting is not None and not starting.done() and session is not None and session.agent.session_id is None:
            # its session is made once its model is, and the client has its id: made first, then stopped
            with contextlib.suppress(BaseException):
                await starting
        if starting is not None and not starting.done():
            starting.cancel()
            with contextlib.suppress(BaseException):
                await starting

    async def load_session(self, cwd: str, session_id: str, mcp_servers: list[Any] | None = None,
                           **kwargs: Any) -> LoadSessionResponse:
        from freeact_sub import SessionError
        from freeact_sub.sessions import open_session

        await self._made(session_id)
        live = self.sessions.get(session_id)
        if live is not None:  # the client reloads a session this process runs: replay it, and it goes on as it is
            await live.replay(_saved_events(open_session, session_id, live.agent.settings.working_dir))
            return LoadSessionResponse(modes=live.modes())
        config = await self._config(cwd, mcp_servers)
        try:
            open_session(session_id, config.working_dir)
        except SessionError as exc:  # the one error a client recovers from (it makes a new session)
            raise RequestError(RESOURCE_NOT_FOUND, "Resource not found", {"sessionId": str(exc)}) from None
        agent = await self._start(config, session_id)
        session = self._open(agent)
        await session.replay(_saved_events(open_session, session_id, config.working_dir))
        return LoadSessionResponse(modes=session.modes())

    def _open(self, agent: Agent, session_id: str | None = None) -> AcpSession:
        from .child_sessions import advertised, raw_sender
        from .session import AcpSession

        session_id = session_id or agent.session_id or agent.agent_id
        wire = self.wire if advertised(self.client_initialize) else None
        session = AcpSession(session_id, agent, self.client, raw=raw_sender(wire) if wire is not None else None)
        self.sessions[session_id] = session
        session.watch_background()
        return session

    def _session(self, session_id: str) -> AcpSession:
        session = self.sessions.get(session_id)
        if session is None:
            raise RequestError.invalid_params({"sessionId": f"no session {session_id} in this process"})
        return session

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        await self._made(session_id)
        session = self._session(session_id)
        starting = self._starting.get(session_id)
        if starting is not None and not starting.done():  # the first prompt waits for the start, and says so
            await session.send(update_agent_thought_text(STARTING))
        await self._started(session_id)
        if id(self._session(session_id).agent) in self._untrusted and not await self._ask_trust(session_id):
            return PromptResponse(stop_reason="cancelled")
        return await self._session(session_id).prompt(_prompt_text(prompt))

    async def _ask_trust(self, session_id: str) -> bool:
        """Ask whether to trust the folder's files with powers (`trust.py`); with them, the session's agent starts
        again on the same session. False if the question was cancelled (the next prompt asks again)."""
        from freeact_sub.launch.trust_advice import trust_advice

        from .trust import choice, trust_options, trust_question

        session = self._session(session_id)
        _, project, config = self._untrusted[id(session.agent)]
        try:
            response = await self.client.request_permission(session_id=session_id, tool_call=trust_question(project),
                                                            options=trust_options())
        except Exception as exc:  # a client that cannot ask: the session goes on without them, and says how to trust
            log.warning("the trust question failed: %s", exc)
            advice = trust_advice(project.folder, {})
            picked = "without"
            if advice is not None:
                await session.send(update_agent_message_text(advice + "\n\n"))
        else:
            picked = choice(response)
        if picked == "cancelled":
            return False
        self._untrusted.pop(id(session.agent), None)
        if picked == "without":
            return True
        if picked == "trust":
            await asyncio.to_thread(project.remember)
        mode = session.mode
        self.sessions.pop(session_id, None)
        await session.close()
        again = self._open(await self._start(config, session_id, trust=True))
        if again.mode.id != mode.id:
            await again.set_mode(mode.id)
        return True

    async def set_session_mode(self, session_id: str, mode_id: str, **kwargs: Any) -> SetSessionModeResponse:
        if mode_id not in MODES:
            raise RequestError.invalid_params({"modeId": f"no mode {mode_id!r}; the modes: {', '.join(MODES)}"})
        await self._made(session_id)
        await self._session(session_id).set_mode(mode_id)
        return SetSessionModeResponse()

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        """`session/cancel`: a session's turn, or, on a child session, that subagent only."""
        with contextlib.suppress(Exception):  # a session that could not be made has nothing to cancel
            await self._made(session_id)
        session = self.sessions.get(session_id)
        if session is not None:
            session.cancel()
            return
        for parent in self.sessions.values():
            if parent.cancel_child(session_id):
                return

    async def close(self) -> None:
        """Stop every session's agent (the client went away, or a signal ended the process)."""
        for made in self._early.values():  # a session answered early is made (its folder kept), then stopped
            with contextlib.suppress(Exception):
                await asyncio.shield(made)
        for session_id in list(self._starting):
            await self._stop_starting(session_id)
        sessions, self.sessions = list(self.sessions.values()), {}
        for session in sessions:
            try:
                await session.close()
            except Exception as exc:  # the next one is stopped all the same
                log.warning("stopping session %s: %s", session.session_id, exc)

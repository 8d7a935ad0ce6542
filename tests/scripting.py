"""Script a model for tests: pre-planned streamed responses through pydantic-ai's `FunctionModel`.

A `Script` is a list of steps, one per model request. A step is a list of items that are
streamed in order (or a callable that gets the messages and returns such a list):

- `"text"`: a chunk of the model's text (several strings make several `ResponseChunk`s);
- `Think("...")`: a chunk of thinking (consecutive ones make one thinking part);
- `Call(name, args)`: a tool call; `args` is a dict (sent as JSON) or a raw string (sent as is,
  so invalid JSON can be scripted); the id defaults to `call-1`, `call-2`, … across the script;
- `Fail(exc)`: the model raises `exc` at that point of the stream;
- `Block(event)`: the stream waits until `event` is set (forever without one), e.g. to cancel
  a turn while the model is streaming.

The script records what each request received, so a test can assert on the model's view::

    from tests.scripting import Call, Script, drive, single_agent_config

    script = Script(
        ["Let me compute.", Call("execute_ipython_cell", {"code": "print(6 * 7)"})],
        ["The answer is 42."],
    )
    async with Agent(single_agent_config(script, tmp_path)) as agent:
        events = await drive(agent.stream("What is 6*7?"))   # every approval answered yes
    assert "42" in script.tool_results(1)["call-1"]   # what request #1 (0-based) got back
    assert script.calls == 2

`drive(agent.stream(prompt), decide=True)` consumes a turn, answering approvals, and returns
its events; `single_agent_config(script, workdir)` is an agent without the `task` tool.
`script.reset(*steps)` plans new steps and forgets old requests, for an agent that several
tests share.

Running out of steps raises `ScriptExhausted` inside the model (the agent reports it as a
`ModelError`), so a test whose agent asks the model more often than planned fails loudly.

Several agents sharing one model (a parent and its subagents) make requests in an order
that depends on scheduling; `Router` picks a script per conversation by its first prompt::

    model = Router({"main job": main_script, "sub job": child_script}).model
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
import pytest_asyncio
from pydantic_ai.messages import ModelMessage, ModelRequest, ToolReturnPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, DeltaThinkingPart, DeltaToolCall, FunctionModel

from freeact_sub import Agent, AgentConfig, AgentEvent, ApprovalRequest

__all__ = [
    "Block",
    "Call",
    "Fail",
    "Handler",
    "Router",
    "Script",
    "ScriptExhausted",
    "Think",
    "auto_approved_without_pools",
    "configs",
    "drive",
    "first_prompt",
    "new_kernel_turn",
    "no_freeact_sub_environment",
    "note_kernels",
    "of",
    "shared_agent",
    "single_agent_config",
    "tool_results",
    "until",
]


@dataclass(frozen=True)
class Call:
    """A tool call the model makes."""

    name: str
    args: dict[str, Any] | str | None = None
    id: str | None = None


@dataclass(frozen=True)
class Think:
    """A chunk of the model's thinking."""

    content: str


@dataclass(frozen=True)
class Fail:
    """The model raises `error` at this point of its stream."""

    error: BaseException


@dataclass(frozen=True)
class Block:
    """The stream pauses until `event` is set (forever if None)."""

    event: asyncio.Event | None = None


Item = str | Call | Think | Fail | Block
Step = Sequence[Item] | Callable[[list[ModelMessage]], Sequence[Item]]


class ScriptExhausted(AssertionError):
    """The model was asked more often than the script planned."""


@dataclass
class Script:
    """A model that streams pre-planned responses, one step per request, and records the requests."""

    steps: list[Step] = field(default_factory=list)
    requests: list[list[ModelMessage]] = field(default_factory=list)
    """The messages each request received, in order."""
    infos: list[AgentInfo] = field(default_factory=list)
    """What each request was offered (tools and their schemas: `infos[i].function_tools`)."""

    def __init__(self, *steps: Step, model_name: str = "scripted") -> None:
        self.steps = list(steps)
        self.requests = []
        self.infos = []
        self._ids = itertools.count(1)
        self.model = FunctionModel(stream_function=self._stream, model_name=model_name)
        """The `FunctionModel` to put in `AgentConfig(model=...)`."""

    @property
    def calls(self) -> int:
        """How many requests the model received."""
        return len(self.requests)

    def add(self, *steps: Step) -> Script:
        """Plan more steps (e.g. for the next `stream()` call); returns the script."""
        self.steps.extend(steps)
        return self

    def reset(self, *steps: Step) -> Script:
        """Forget the recorded requests and plan `steps` afresh (for an agent shared by several tests)."""
        self.steps = list(steps)
        self.requests.clear()
        self.infos.clear()
        return self

    def tool_results(self, request: int) -> dict[str, str]:
        """Tool results (by tool call id) in the last message of request number `request` (0-based)."""
        return tool_results(self.requests[request])

    def _stream(self, messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        index = len(self.requests)
        self.requests.append(list(messages))
        self.infos.append(info)
        if index >= len(self.steps):
            raise ScriptExhausted(f"the model was asked {index + 1} times, the script plans {len(self.steps)}")
        step = self.steps[index]
        items = step(list(messages)) if callable(step) else step
        return self._play(list(items))

    async def _play(self, items: list[Item]) -> AsyncIterator[Any]:
        thinking: int | None = None  # consecutive `Think` items continue one thinking part
        for position, item in enumerate(items):
            if isinstance(item, Think):
                thinking = position if thinking is None else thinking
                yield {thinking: DeltaThinkingPart(content=item.content)}
                continue
            thinking = None
            if isinstance(item, str):
                yield item
            elif isinstance(item, Call):
                args = item.args if isinstance(item.args, str) or item.args is None else json.dumps(item.args)
                call_id = item.id or f"call-{next(self._ids)}"
                yield {position: DeltaToolCall(name=item.name, json_args=args, tool_call_id=call_id)}
            elif isinstance(item, Fail):
                raise item.error
            elif isinstance(item, Block):
                if item.event is None:
                    await asyncio.Event().wait()
                else:
                    await item.event.wait()
            else:  # pragma: no cover - a mistake in the test
                raise TypeError(f"not a script item: {item!r}")


class Router:
    """One model for several conversations: each request goes to the script whose key is in its first prompt."""

    def __init__(self, scripts: Mapping[str, Script]) -> None:
        self.scripts = dict(scripts)
        self.model = FunctionModel(stream_function=self._stream, model_name="scripted-router")

    def _stream(self, messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        prompt = first_prompt(messages)
        for key, script in self.scripts.items():
            if key in prompt:
                return script._stream(messages, info)
        raise ScriptExhausted(f"no script for a conversation that starts with {prompt[:200]!r}")


Handler = Callable[[AgentEvent], Awaitable[None] | None]
"""Sees each event of a turn as it comes (awaited when it returns an awaitable)."""


async def drive(
    events: AsyncIterator[AgentEvent],
    decide: bool | Callable[[ApprovalRequest], bool | None] | None = True,
    *,
    on_event: Handler | Sequence[Handler] = (),
    limit: float | None = None,
) -> list[AgentEvent]:
    """Consume one turn's events, answering each undecided `ApprovalRequest`, and return them all.

    `decide` is the answer for every request, or a function of the request; None (or a function
    that returns None) leaves the request open (the test answers it some other way, or cancels).
    Each event goes to the `on_event` handlers first; `limit` (seconds) turns a hang into a failure.
    """
    handlers = [on_event] if callable(on_event) else list(on_event)
    seen: list[AgentEvent] = []
    async with asyncio.timeout(limit):
        async for event in events:
            seen.append(event)
            for handler in handlers:
                outcome = handler(event)
                if outcome is not None:
                    await outcome
            if isinstance(event, ApprovalRequest) and not event.decided and decide is not None:
                answer = decide(event) if callable(decide) else decide
                if answer is not None:
                    event.approve(answer)
    return seen


def note_kernels(agent: Agent, kernels: dict[str, Any]) -> Handler:
    """An `on_event` handler for `drive()`: notes in `kernels` the kernel of each agent of `agent`'s tree as its
    first event comes (None for an agent without one), while the agent still runs."""

    def note(event: AgentEvent) -> None:
        record = agent.tree.agents.get(event.agent_id)
        if record is not None:
            kernels.setdefault(event.agent_id, getattr(record.agent, "kernel", None))

    return note


def first_prompt(messages: Sequence[ModelMessage]) -> str:
    """The text of the first user prompt in a conversation."""
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, UserPromptPart) and isinstance(part.content, str):
                    return part.content
    return ""


def tool_results(messages: Sequence[ModelMessage]) -> dict[str, str]:
    """Tool results (by tool call id) in the last message of a conversation."""
    if not messages or not isinstance(messages[-1], ModelRequest):
        return {}
    return {
        part.tool_call_id: part.model_response_str()
        for part in messages[-1].parts
        if isinstance(part, ToolReturnPart)
    }


def configs(**defaults: Any) -> Callable[..., AgentConfig]:
    """A test module's `config(model, workdir, **settings)`: an `AgentConfig` on `model` in `workdir`, with the
    module's `defaults` (no pools, auto-approve, …) under what each test sets itself::

        config = configs(auto_approve=True, kernel_pool_size=0)
        config(script.model, workdir, max_turns=3)  # an AgentConfig
    """

    def config(model: Any, workdir: Any, **settings: Any) -> AgentConfig:
        return AgentConfig(**{"model": model, "working_dir": workdir, **defaults, **settings})

    return config


auto_approved_without_pools = configs(auto_approve=True, kernel_pool_size=0, mcp_pool_size=0)
"""An auto-approving agent tree without kernel or MCP pools: each child starts its own kernel and servers."""


def single_agent_config(script: Script, workdir: Any, **settings: Any) -> AgentConfig:
    """An `AgentConfig` on `script`'s model in `workdir`, without the `task` tool."""
    return configs(enable_subagents=False)(script.model, workdir, **settings)


async def new_kernel_turn(script: Script, workdir: Any, prompt: str) -> list[AgentEvent]:
    """One turn of a fresh agent (no `task` tool) on `script`, approved throughout, after which its kernel must be
    another process than the one it started with (the turn killed or reset it); the turn's events."""
    async with Agent(single_agent_config(script, workdir)) as agent:
        pid = agent.kernel.pid
        events = await drive(agent.stream(prompt))
        assert agent.kernel.pid != pid, "the kernel was not restarted"
    return events


def shared_agent(folder: str) -> Any:
    """A module's `shared` fixture: `(agent, script)`, one agent (no `task` tool) on a `Script` that its tests
    `reset()`, started once for the module in a temporary folder named `folder`. For the tests that need no fresh
    history and do not restart its kernel::

        shared = shared_agent("faults")
    """

    @pytest_asyncio.fixture(scope="module", loop_scope="module")
    async def shared(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[Agent, Script]]:
        script = Script()
        async with Agent(single_agent_config(script, tmp_path_factory.mktemp(folder))) as agent:
            yield agent, script

    return shared


def of(kind: type, events: Sequence[Any]) -> list[Any]:
    """The events of one type, in order."""
    return [event for event in events if isinstance(event, kind)]


async def until(
    condition: Callable[[], Any], what: str, limit: float = 60.0, *, interval: float = 0.02, in_thread: bool = False
) -> None:
    """Wait for `condition` while the agent works (the limit only turns a hang into a failure).

    For state with no event to wait on (pools, widgets, a gateway's kernels). `in_thread` asks a
    blocking `condition` (one that makes a request, say) in a thread, so the event loop goes on.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit
    while not (await asyncio.to_thread(condition) if in_thread else condition()):
        if loop.time() > deadline:
            raise AssertionError(f"gave up waiting for: {what}")
        await asyncio.sleep(interval)


@contextlib.contextmanager
def no_freeact_sub_environment() -> Iterator[None]:
    """No `FREEACT_SUB_*` variable while inside; the whole environment as it was after."""
    saved = dict(os.environ)
    for key in [k for k in os.environ if k.startswith("FREEACT_SUB_")]:
        del os.environ[key]
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)

"""Subagents (the `task` tool) with real kernels, real MCP servers and scripted models.

One `Router` model serves the parent and every child (children share their parent's model);
each conversation is picked by its first prompt: `PARENT` for the main agent, `CHILD-<name>:`
for the child started with that prompt. Child cells print `PID=<n>` so the tests know each
child's kernel process, and the `Watch` notes whether those processes still ran when the
child's `SubagentFinished` event arrived.

Concurrency is measured from what happened, never from wall-clock totals: the order of
`SubagentStarted` / `SubagentFinished` events, start/end marks the cells write to files, and
a poll of the kernel processes alive.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import sys
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
from pydantic_ai.messages import ModelMessage, SystemPromptPart

from freeact_sub import (
    Agent,
    AgentConfig,
    AgentEvent,
    ApprovalRequest,
    CodeExecutionOutput,
    CodeExecutionOutputChunk,
    Response,
    ResponseChunk,
    RunCancelled,
    SubagentFinished,
    SubagentQueued,
    SubagentStarted,
    Thoughts,
    ThoughtsChunk,
    ToolOutput,
    TurnStarted,
)
from tests.processes import calc_servers, kernel_processes
from tests.scripting import (
    Call,
    Fail,
    Handler,
    Router,
    Script,
    Think,
    auto_approved_without_pools,
    drive,
    tool_results,
    until,
)

PARENT = "PARENT"
AGENT_ID = re.compile(r"^agent-[0-9a-f]+$")
PID_MARK = re.compile(r"PID=(\d+)")
PRINT_PID = "import os\nprint(f'PID={os.getpid()}')\n"
# A run that hangs (a child waiting on another, say) fails here instead of at pytest's timeout.
RUN_LIMIT = 120.0

# -- scripting --------------------------------------------------------------------------------


def child(name: str, job: str = "do the job") -> str:
    """The prompt of a child; `CHILD-<name>:` is the key its script is routed by."""
    return f"CHILD-{name}: {job}"


def task(name: str, job: str = "do the job", *, max_turns: int | None = None) -> Call:
    args: dict[str, Any] = {"prompt": child(name, job)}
    if max_turns is not None:
        args["max_turns"] = max_turns
    return Call("task", args, id=f"task-{name}")


def cell(code: str, call_id: str | None = None) -> Call:
    return Call("execute_ipython_cell", {"code": code}, id=call_id)


def echo_results(prefix: str) -> Callable[[list[ModelMessage]], list[Any]]:
    """A step that answers with the tool results the model just received."""

    def step(messages: list[ModelMessage]) -> list[Any]:
        return [prefix + " | ".join(tool_results(messages).values())]

    return step


def routed(parent: Script, children: dict[str, Script]) -> Router:
    return Router({PARENT: parent, **{f"CHILD-{name}:": script for name, script in children.items()}})


# no pools: these tests count the kernels and servers each child starts (tests/integration/test_mcp_pool.py
# and test_subagents_pool.py cover the pools)
config = auto_approved_without_pools


# -- driving and watching -----------------------------------------------------------------------


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


@dataclass
class Watch:
    """Every event of a run, each agent's process ids, and which of a child's were alive at its end."""

    events: list[AgentEvent] = field(default_factory=list)
    pids: dict[str, set[int]] = field(default_factory=lambda: defaultdict(set))
    alive_at_finish: dict[str, list[int]] = field(default_factory=dict)

    def __call__(self, event: AgentEvent) -> None:
        self.events.append(event)
        if isinstance(event, CodeExecutionOutput | CodeExecutionOutputChunk):
            self.pids[event.agent_id].update(int(pid) for pid in PID_MARK.findall(event.content))
        elif isinstance(event, ToolOutput) and event.tool_name == "calc_server_pid" and not event.is_error:
            self.pids[event.agent_id].add(int(event.content))
        elif isinstance(event, SubagentFinished):
            self.alive_at_finish[event.subagent_id] = [p for p in self.pids[event.subagent_id] if alive(p)]

    def of(self, kind: type[Any], agent_id: str | None = None) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind) and (agent_id is None or e.agent_id == agent_id)]


async def watched(agent: Agent, prompt: str, *handlers: Handler, watch: Watch | None = None) -> Watch:
    """Run one turn to its end, passing each event to the watch, then to the handlers (which answer approvals)."""
    watch = watch or Watch()
    await drive(agent.stream(prompt), None, on_event=(watch, *handlers), limit=RUN_LIMIT)
    return watch


class KernelCounter:
    """Polls the kernel processes of this test while a run goes on; `peak` is the most seen at once."""

    def __init__(self) -> None:
        self.peak = 0
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> KernelCounter:
        self._task = asyncio.create_task(self._poll())
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._task is not None
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)

    async def _poll(self) -> None:
        while True:
            self.peak = max(self.peak, len(await asyncio.to_thread(kernel_processes)))
            await asyncio.sleep(0.02)


# -- what every run with children must show ---------------------------------------------------


@dataclass(frozen=True)
class ChildRun:
    """One child as the parent's events show it."""

    started: SubagentStarted
    finished: SubagentFinished
    result: ToolOutput
    """The parent's `ToolOutput` of the `task` call."""
    answer: str
    """The child's final `Response` text ('' if it gave none)."""


def children_of(watch: Watch, parent_id: str) -> dict[str, ChildRun]:
    """Check the framing of every child in the parent's stream and return the children by prompt.

    From the events alone: each child belongs to one approved `task` call of the parent, every
    event of the child lies between its `SubagentStarted` and `SubagentFinished`, and the parent's
    `ToolOutput` for that call (the only result event) comes after the child ended.
    """
    events = watch.events
    task_requests = {
        e.tool_call_id: i
        for i, e in enumerate(events)
        if isinstance(e, ApprovalRequest) and e.agent_id == parent_id and e.tool_name == "task"
    }
    runs: dict[str, ChildRun] = {}
    for i, start in enumerate(events):
        if not isinstance(start, SubagentStarted):
            continue
        assert start.agent_id == parent_id
        assert AGENT_ID.match(start.subagent_id), start.subagent_id
        assert start.subagent_id != parent_id
        assert task_requests.get(start.tool_call_id, len(events)) < i, "a child without an approved task call"
        sid = start.subagent_id
        ends = [j for j, e in enumerate(events) if isinstance(e, SubagentFinished) and e.subagent_id == sid]
        assert len(ends) == 1, f"{start.subagent_id} should finish exactly once"
        end = ends[0]
        finished = events[end]
        assert isinstance(finished, SubagentFinished)
        assert finished.agent_id == parent_id and finished.tool_call_id == start.tool_call_id and end > i
        own = [j for j, e in enumerate(events) if e.agent_id == start.subagent_id]
        assert all(i < j < end for j in own), f"an event of {start.subagent_id} outside its start and finish"
        results = [
            (j, e)
            for j, e in enumerate(events)
            if isinstance(e, ToolOutput) and e.agent_id == parent_id and e.tool_call_id == start.tool_call_id
        ]
        assert len(results) == 1 and results[0][0] > end, "one ToolOutput of the task call, after the child ended"
        answers = [e.content for j in own if isinstance(e := events[j], Response) and e.final]
        runs[start.prompt] = ChildRun(start, finished, results[0][1], answers[-1] if answers else "")
    assert len({run.started.subagent_id for run in runs.values()}) == len(runs), "agent ids must be distinct"
    return runs


def most_alive_by_events(events: Iterable[AgentEvent]) -> int:
    alive_now = peak = 0
    for event in events:
        if isinstance(event, SubagentStarted):
            alive_now += 1
        elif isinstance(event, SubagentFinished):
            alive_now -= 1
        peak = max(peak, alive_now)
    return peak


def most_overlapping(intervals: Iterable[tuple[float, float]]) -> int:
    marks = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    running = peak = 0
    for _, step in marks:  # at equal times an end (-1) sorts before a start: touching is not overlapping
        running += step
        peak = max(peak, running)
    return peak


def interval_cell(marks: Path, name: str, *, rendezvous: int = 1, hold: float = 0.0) -> str:
    """A cell that records when it ran into `marks/<name>.json`.

    It waits (up to 60 s) until `rendezvous` cells have started, so children that really run at
    the same time end only after meeting; run one after another, the first would wait alone.
    """
    return f"""
import json, os, pathlib, time
marks = pathlib.Path({str(marks)!r})
start = time.time()
(marks / "{name}.start").write_text(str(start))
deadline = start + 60
while len(list(marks.glob("*.start"))) < {rendezvous} and time.time() < deadline:
    time.sleep(0.02)
time.sleep({hold})
end = time.time()
(marks / "{name}.json").write_text(json.dumps([start, end]))
print(f"PID={{os.getpid()}} START={{start!r}} END={{end!r}}")
"""


def read_intervals(marks: Path) -> list[tuple[float, float]]:
    spans = []
    for path in sorted(marks.glob("*.json")):
        start, end = json.loads(path.read_text())
        spans.append((float(start), float(end)))
    return spans


# -- isolation, identity, inheritance ----------------------------------------------------------


async def test_child_kernel_is_fresh_and_cannot_see_parent_variables(workdir: Path) -> None:
    parent = Script(
        [cell("secret_value = 42\nimport fractions as parent_only_module\n" + PRINT_PID)],
        [task("look", "report what you see")],
        ["The child reported back."],
    )
    look = Script(
        [
            cell(
                PRINT_PID
                + "_builtin = {'In', 'Out', 'exit', 'quit', 'get_ipython', 'open'}\n"
                + "print('USER_NAMES', sorted(n for n in globals() if not n.startswith('_') and n not in _builtin))\n"
                + "print('CELLS_RUN', len(In) - 1)\n"
                + "print('SEES_SECRET', 'secret_value' in globals())\n"
            )
        ],
        echo_results("child saw: "),
    )
    model = routed(parent, {"look": look})
    async with Agent(config(model.model, workdir, kernel_pool_size=1, max_subagents=1, prestart_pools=True)) as agent:
        pool = agent.tree.supplies.pool
        await until(lambda: pool.ready == 1, "the kernel pool should fill")
        parent_kernel = agent.kernel.pid if agent.kernel else None
        pooled = set(kernel_processes()) - {parent_kernel}  # the one ready kernel of the pool
        watch = await watched(agent, PARENT)

    runs = children_of(watch, agent.agent_id)
    run = runs[child("look", "report what you see")]
    child_output = watch.of(CodeExecutionOutput, run.started.subagent_id)
    assert len(child_output) == 1
    text = child_output[0].content
    assert "SEES_SECRET False" in text
    assert "USER_NAMES ['os']" in text  # only what its own cell defined so far
    assert "CELLS_RUN 1" in text  # a pooled kernel has never run code
    (child_pid,) = watch.pids[run.started.subagent_id]
    (parent_pid,) = watch.pids[agent.agent_id]
    assert child_pid != parent_pid
    assert child_pid in pooled, "the child should get a kernel from the pool"
    assert run.finished.status == "done"
    # the child's final text is the task's result, as event and in the parent's history
    assert run.answer.startswith("child saw: ") and "SEES_SECRET False" in run.answer
    assert run.result.content == run.answer and run.result.tool_name == "task" and not run.result.is_error
    assert parent.tool_results(2) == {"task-look": run.answer}
    assert watch.alive_at_finish[run.started.subagent_id] == []


async def test_children_have_distinct_ids_kernels_and_tag_their_events(workdir: Path) -> None:
    parent = Script([task("a"), task("b"), task("c", max_turns=3)], ["all done"])
    children = {
        name: Script(
            [Think(f"thinking {name}"), f"working on {name}", cell(PRINT_PID)],
            [f"answer {name}"],
        )
        for name in "abc"
    }
    model = routed(parent, children)
    async with Agent(config(model.model, workdir, kernel_pool_size=1, max_subagents=3)) as agent:
        watch = await watched(agent, PARENT)
        parent_kernel = agent.kernel.pid if agent.kernel else None

    runs = children_of(watch, agent.agent_id)
    assert len(runs) == 3
    ids = {run.started.subagent_id for run in runs.values()}
    assert agent.agent_id not in ids and len(ids) == 3
    kernels = [pid for sid in ids for pid in watch.pids[sid]]
    assert len(kernels) == 3 and len(set(kernels)) == 3 and parent_kernel not in kernels
    assert watch.pids[agent.agent_id] == set()  # the parent ran no cell itself

    for name in "abc":
        run = runs[child(name)]
        sid = run.started.subagent_id
        assert run.started.max_turns == (3 if name == "c" else 10)  # the schema's default is 10
        assert "".join(e.content for e in watch.of(ThoughtsChunk, sid)) == f"thinking {name}"
        assert [e.content for e in watch.of(Thoughts, sid)] == [f"thinking {name}"]
        assert f"working on {name}" in "".join(e.content for e in watch.of(ResponseChunk, sid))
        assert [e.tool_name for e in watch.of(ApprovalRequest, sid)] == ["execute_ipython_cell"]
        assert watch.of(CodeExecutionOutputChunk, sid) and len(watch.of(CodeExecutionOutput, sid)) == 1
        assert [e.turn for e in watch.of(TurnStarted, sid)] == [1, 2]
        assert run.answer == f"answer {name}" == run.result.content
        assert run.finished.status == "done" and run.finished.turns_used == 2
        assert watch.alive_at_finish[sid] == []
    final = [e for e in watch.of(Response, agent.agent_id) if e.final]
    assert [e.content for e in final] == ["all done"]


async def test_child_inherits_model_settings_prompt_and_mcp_config_with_new_connections(
    workdir: Path, calc_server_config: dict
) -> None:
    parent = Script(
        [Call("calc_server_pid", {}, id="pid-1"), task("x"), task("y")],
        [Call("calc_server_pid", {}, id="pid-2")],
        ["done"],
    )
    children = {
        name: Script([Call("calc_server_pid", {}), cell(PRINT_PID)], echo_results(f"{name} got ")) for name in "xy"
    }
    model = routed(parent, children)
    settings = {"temperature": 0.25, "max_tokens": 321}
    cfg = config(
        model.model,
        workdir,
        system_prompt="You are the scripted test agent.",
        model_settings=settings,
        mcp_servers={"calc": calc_server_config},
        max_subagents=2,
    )
    async with Agent(cfg) as agent:
        watch = await watched(agent, PARENT)

    runs = children_of(watch, agent.agent_id)
    parent_server = {int(e.content) for e in watch.of(ToolOutput, agent.agent_id) if e.tool_name == "calc_server_pid"}
    assert len(parent_server) == 1, "the parent keeps its one connection while children come and go"
    servers = [int(e.content) for e in watch.of(ToolOutput) if e.tool_name == "calc_server_pid"]
    child_servers = [p for p in servers if p not in parent_server]
    assert len(child_servers) == 2 and len(set(child_servers)) == 2, "each child gets a server of its own"
    for run in runs.values():
        assert run.finished.status == "done"
        assert watch.alive_at_finish[run.started.subagent_id] == [], "kernel and MCP server stop when the child ends"

    def system_prompt(messages: list[ModelMessage]) -> str:
        return next(p.content for m in messages for p in getattr(m, "parts", []) if isinstance(p, SystemPromptPart))

    parent_tools = sorted(t.name for t in parent.infos[0].function_tools)
    (task_tool,) = [t for t in parent.infos[0].function_tools if t.name == "task"]
    schema = task_tool.parameters_json_schema
    assert schema["required"] == ["prompt"] and schema["properties"]["prompt"]["type"] == "string"
    assert schema["properties"]["max_turns"]["type"] == "integer"
    assert schema["properties"]["subagent_type"]["default"] == "general"
    assert "`general`:" in (task_tool.description or ""), "the task tool lists the agent types"
    description = (task_tool.description or "").lower()
    for promise in ("fresh context", "fresh ipython kernel", "final text", "subagent or subtask", "parallel"):
        assert promise in description, f"the task tool's description should say {promise!r}"
    assert "task" in parent_tools and "calc_server_pid" in parent_tools
    for script in (parent, *children.values()):
        for messages, info in zip(script.requests, script.infos, strict=True):
            # the configured prompt, then the section on the agent's MCP tools (the same for parent and child), and
            # for the parent, who can start subagents, the section on starting them from code
            assert system_prompt(messages).startswith("You are the scripted test agent.")
            assert ("## Subagents from code" in system_prompt(messages)) == (script is parent)
            same = [re.sub(r"\n\n## Subagents from code\n.*?(?=\n\n## |\Z)", "\n",
                           re.sub(r"agent-[0-9a-f]+", "agent-X", system_prompt(m)), flags=re.S)
                    for m in (messages, parent.requests[0])]
            assert same[0].rstrip() == same[1].rstrip()
            assert info.model_settings is not None
            assert {k: info.model_settings.get(k) for k in settings} == settings
    for script in children.values():
        family = ("task", "task_output", "task_stop", "task_list", "task_send")
        expected = sorted([*(n for n in parent_tools if n not in family), "task_report"])  # only a child reports
        assert sorted(t.name for t in script.infos[0].function_tools) == expected


# Both halves of an agent's start wait, each in its own process, until the other half has been
# spawned: the kernel (in an IPython startup file) until there are as many MCP servers as kernels,
# the MCP server (in a wrapper, before it speaks MCP) until there are as many kernels as servers.
# Started together, they meet at once; started one after the other, the first waits for a
# partner that never comes and, after a while, records that it gave up.
PARTNER_COUNT = """
import json, os, re, sys, time
import psutil

KERNEL_SOCKET = re.compile(r"freeact-sub-\\d+/kernel-[^/]+/run/")

def _counts():
    host = psutil.Process(int(os.environ["FREEACT_TEST_HOST"]))
    kernels = servers = 0
    for process in host.children(recursive=True):
        try:
            if process.status() == psutil.STATUS_ZOMBIE:
                continue
            command = " ".join(process.cmdline())
            if "calc_server." in command:
                servers += 1
            elif "ipykernel_launcher" in command or any(
                KERNEL_SOCKET.search(c.laddr or "") is not None for c in process.net_connections(kind="unix")
            ):
                kernels += 1
        except psutil.Error:
            continue
    return kernels, servers

def _meet(kind, partner_is_there):
    deadline = time.time() + 20
    while not (met := partner_is_there(*_counts())) and time.time() < deadline:
        time.sleep(0.02)
    marks = os.environ["FREEACT_TEST_MARKS"]
    with open(os.path.join(marks, f"{kind}-{os.getpid()}.json"), "w") as f:
        json.dump({"met": met}, f)
"""
KERNEL_STARTUP = PARTNER_COUNT + "_meet('kernel', lambda kernels, servers: servers >= kernels)\n"
SERVER_WRAPPER = (
    PARTNER_COUNT
    + "_meet('server', lambda kernels, servers: kernels >= servers)\n"
    + "os.execv(sys.argv[1], sys.argv[1:])\n"
)


async def test_kernel_and_mcp_servers_of_an_agent_start_together(workdir: Path, calc_server_config: dict) -> None:
    """An agent that opens its servers at start (the first of its tree to use them: here the main agent)
    starts them beside its kernel. A subagent opens its connection later, at its first call
    (`test_mcp_lazy.py`)."""
    marks = workdir / "marks"
    marks.mkdir()
    startup = workdir / "ipython" / "profile_default" / "startup"
    startup.mkdir(parents=True)
    (startup / "00-meet.py").write_text(KERNEL_STARTUP)
    wrapper = workdir / "meet_then_serve.py"
    wrapper.write_text(SERVER_WRAPPER)
    env = {"FREEACT_TEST_HOST": str(os.getpid()), "FREEACT_TEST_MARKS": str(marks)}
    server = {
        "command": sys.executable,
        "args": [str(wrapper), calc_server_config["command"], *calc_server_config["args"]],
        "env": {**env, "PATH": os.environ["PATH"]},
    }
    script = Script([Call("calc_server_pid", {}), cell(PRINT_PID)], ["paired"])
    cfg = config(
        script.model,
        workdir,
        mcp_servers={"calc": server},
        kernel_env={**env, "IPYTHONDIR": str(workdir / "ipython")},
    )
    async with Agent(cfg) as agent:
        events = [event async for event in agent.stream("pair up")]
    assert [e.content for e in events if isinstance(e, Response) and e.final] == ["paired"]
    met = {path.stem: json.loads(path.read_text())["met"] for path in marks.glob("*.json")}  # "kernel-<pid>": …
    assert sorted(name.split("-")[0] for name in met) == ["kernel", "server"]
    assert all(met.values()), f"the kernel or the server started without its partner (one after the other): {met}"


# -- parallelism and its bound -------------------------------------------------------------------


async def test_children_run_in_parallel(workdir: Path) -> None:
    marks = workdir / "marks"
    marks.mkdir()
    parent = Script([task("p1"), task("p2")], ["done"])
    children = {name: Script([cell(interval_cell(marks, name, rendezvous=2))], ["finished"]) for name in ("p1", "p2")}
    model = routed(parent, children)
    async with Agent(config(model.model, workdir, kernel_pool_size=2, max_subagents=2)) as agent:
        watch = await watched(agent, PARENT)

    children_of(watch, agent.agent_id)
    spans = [
        (float(m.group(1)), float(m.group(2)))
        for e in watch.of(CodeExecutionOutput)
        if (m := re.search(r"START=([\d.]+) END=([\d.]+)", e.content))
    ]
    assert len(spans) == 2
    latest_start = max(start for start, _ in spans)
    earliest_end = min(end for _, end in spans)
    assert latest_start < earliest_end, f"the two children's cells did not overlap: {spans}"


async def test_never_more_than_max_subagents_children_alive(workdir: Path) -> None:
    marks = workdir / "marks"
    marks.mkdir()
    names = [f"b{i}" for i in range(4)]  # 2 x max_subagents
    parent = Script([task(name) for name in names], ["done"])
    children = {
        name: Script([cell(interval_cell(marks, name, rendezvous=2, hold=0.5))], [f"finished {name}"]) for name in names
    }
    model = routed(parent, children)
    async with Agent(config(model.model, workdir, kernel_pool_size=0, max_subagents=2)) as agent:
        watch = await watched(agent, PARENT)

    runs = children_of(watch, agent.agent_id)
    assert len(runs) == 4 and all(run.finished.status == "done" for run in runs.values())
    assert most_alive_by_events(watch.events) == 2
    assert most_overlapping(read_intervals(marks)) == 2
    assert parent.tool_results(1) == {f"task-{name}": f"finished {name}" for name in names}


async def test_no_kernel_starts_before_its_child_takes_a_slot(workdir: Path) -> None:
    """The bound is taken before a child's kernel starts: kernel processes are counted while 2 x the bound run."""
    names = [f"k{i}" for i in range(4)]  # 2 x max_subagents
    parent = Script([task(name) for name in names], ["done"])
    children = {name: Script([cell(PRINT_PID + "import time\ntime.sleep(1)\n")], ["ok"]) for name in names}
    model = routed(parent, children)
    # no pool: every kernel in the process tree is the parent's or a child's
    async with Agent(config(model.model, workdir, kernel_pool_size=0, max_subagents=2)) as agent:
        async with KernelCounter() as counter:
            watch = await watched(agent, PARENT)

    assert len(children_of(watch, agent.agent_id)) == 4
    assert counter.peak <= 1 + 2, f"{counter.peak} kernels at once: more than the parent's and two children's"


async def test_cancelled_calls_leave_no_kernel_behind(workdir: Path) -> None:
    """Cancelled while two children's kernels boot and a third call waits: only the parent's kernel remains."""
    names = ["w1", "w2", "w3"]  # two take a slot and start, the third waits
    parent = Script([task(name) for name in names])
    children = {name: Script([cell(PRINT_PID)]) for name in names}
    model = routed(parent, children)
    async with Agent(config(model.model, workdir, kernel_pool_size=0, max_subagents=2)) as agent:
        pool = agent.tree.supplies.pool

        async def cancel_while_kernels_boot() -> None:
            while len(pool._booting) < 2:  # noqa: ASYNC110 - the pool has no event for this
                await asyncio.sleep(0.005)
            agent.cancel()

        canceller = asyncio.create_task(cancel_while_kernels_boot())
        watch = await watched(agent, PARENT)
        await canceller
        parent_kernel = agent.kernel.pid if agent.kernel else None
        assert kernel_processes() == [parent_kernel], "with the pool off, only the parent's kernel should remain"
        assert pool.ready == 0

    assert isinstance(watch.events[-1], RunCancelled)
    assert {e.status for e in watch.of(SubagentFinished)} == {"cancelled"}
    assert watch.of(CodeExecutionOutput) == []  # no child's cell ran: their kernels were still booting


async def test_seven_subagents_in_one_response(workdir: Path) -> None:
    """The issue's scenario with the default bound (5) and the default kernel pool (2)."""
    marks = workdir / "marks"
    marks.mkdir()
    names = [f"s{i}" for i in range(7)]
    parent = Script([f"Starting {len(names)} subagents.", *(task(name) for name in names)], ["All seven are done."])
    children = {
        name: Script([cell(interval_cell(marks, name, rendezvous=2, hold=0.3))], [f"result of {name}"])
        for name in names
    }
    model = routed(parent, children)
    cfg = AgentConfig(model=model.model, working_dir=workdir, auto_approve=True)
    assert cfg.max_subagents == 5 and cfg.kernel_pool_size == 2
    async with Agent(cfg) as agent:
        async with KernelCounter() as counter:
            watch = await watched(agent, PARENT)

    runs = children_of(watch, agent.agent_id)
    assert sorted(runs) == sorted(child(name) for name in names)
    assert all(run.finished.status == "done" for run in runs.values())
    assert {run.started.tool_call_id: run.result.content for run in runs.values()} == {
        f"task-{name}": f"result of {name}" for name in names
    }
    assert parent.tool_results(1) == {f"task-{name}": f"result of {name}" for name in names}
    assert 2 <= most_alive_by_events(watch.events) <= 5
    assert 2 <= most_overlapping(read_intervals(marks)) <= 5
    assert counter.peak <= 1 + 2 + 5, f"{counter.peak} kernels: parent + pool (2) + children (5) at most"
    kernels = [pid for run in runs.values() for pid in watch.pids[run.started.subagent_id]]
    assert len(set(kernels)) == 7
    assert all(watch.alive_at_finish[run.started.subagent_id] == [] for run in runs.values())
    assert [e.content for e in watch.of(Response, agent.agent_id) if e.final] == ["All seven are done."]


# -- limits: no nesting, max_turns ---------------------------------------------------------------


async def test_children_cannot_start_children(workdir: Path) -> None:
    parent = Script([task("nest")], ["done"])
    nest = Script(
        [Call("task", {"prompt": "CHILD-grandchild: go deeper"}, id="nested")],
        echo_results("nesting said: "),
    )
    grandchild = Script()  # any request here fails the run: a grandchild must never start
    model = routed(parent, {"nest": nest, "grandchild": grandchild})
    async with Agent(config(model.model, workdir, max_subagents=2)) as agent:
        watch = await watched(agent, PARENT)

    runs = children_of(watch, agent.agent_id)
    assert len(runs) == 1
    run = runs[child("nest")]
    sid = run.started.subagent_id
    assert "task" not in [t.name for t in nest.infos[0].function_tools]
    assert grandchild.calls == 0
    assert not [e for e in watch.of(SubagentStarted) if e.agent_id == sid]
    refused = watch.of(ToolOutput, sid)
    assert len(refused) == 1 and refused[0].is_error and refused[0].tool_name == "task"
    assert "Unknown tool 'task'" in refused[0].content
    assert not watch.of(ApprovalRequest, sid), "an unknown tool is refused before any approval"
    assert run.finished.status == "done"
    assert run.result.content.startswith("nesting said: Unknown tool 'task'")


async def test_child_stops_at_max_turns_and_returns_its_last_response(workdir: Path) -> None:
    parent = Script([task("loop", max_turns=2)], echo_results("parent got: "))
    loop = Script(*([f"round {n}", cell(f"print({n})")] for n in range(1, 6)))
    model = routed(parent, {"loop": loop})
    async with Agent(config(model.model, workdir)) as agent:
        watch = await watched(agent, PARENT)

    run = children_of(watch, agent.agent_id)[child("loop")]
    sid = run.started.subagent_id
    assert loop.calls == 2
    assert [e.turn for e in watch.of(TurnStarted, sid)] == [1, 2]
    assert len(watch.of(CodeExecutionOutput, sid)) == 2
    assert run.finished.status == "turn_limit" and run.finished.turns_used == 2
    assert "round 2" in run.result.content and "limit of 2 turns" in run.result.content
    assert run.result.is_error  # an unfinished job is not a result the parent may take as done
    assert parent.tool_results(1) == {"task-loop": run.result.content}
    assert [e.content for e in watch.of(Response, agent.agent_id) if e.final] == ["parent got: " + run.result.content]


async def test_a_limit_of_one_turn_is_said_once(workdir: Path) -> None:
    parent = Script([task("once", max_turns=1)], ["parent done"])
    once = Script(["one round", cell("print(1)")], ["never asked"])
    model = routed(parent, {"once": once})
    async with Agent(config(model.model, workdir)) as agent:
        watch = await watched(agent, PARENT)

    run = children_of(watch, agent.agent_id)[child("once")]
    assert "limit of 1 turn." in run.result.content and "1 turns" not in run.result.content
    assert run.result.is_error


async def test_an_empty_answer_becomes_a_sentence(workdir: Path) -> None:
    parent = Script([task("mute")], ["parent done"])
    mute = Script([cell("x = 1")], [""])
    model = routed(parent, {"mute": mute})
    async with Agent(config(model.model, workdir)) as agent:
        watch = await watched(agent, PARENT)

    run = children_of(watch, agent.agent_id)[child("mute")]
    assert run.finished.status == "done"
    assert run.started.subagent_id in run.result.content and "response was empty" in run.result.content
    assert not run.result.is_error
    assert parent.tool_results(1) == {"task-mute": run.result.content}


# -- faults in a child become the task's result; the parent goes on -------------------------------


async def test_child_failure_becomes_the_tool_result(workdir: Path, calc_server_config: dict) -> None:
    parent = Script([task("boom")], echo_results("parent saw: "))
    boom = Script(
        [Call("calc_server_pid", {}), cell(PRINT_PID)],
        [Fail(RuntimeError("the child's model broke"))],
    )
    model = routed(parent, {"boom": boom})
    cfg = config(model.model, workdir, mcp_servers={"calc": calc_server_config})
    async with Agent(cfg) as agent:
        watch = await watched(agent, PARENT)

    run = children_of(watch, agent.agent_id)[child("boom")]
    sid = run.started.subagent_id
    assert run.finished.status == "failed"
    assert sid in run.result.content and "the child's model broke" in run.result.content
    assert run.result.is_error
    assert parent.tool_results(1) == {"task-boom": run.result.content}
    assert len(watch.pids[sid]) == 2, "the child's kernel and its server both ran"
    assert watch.alive_at_finish[sid] == [], "a failed child's kernel and MCP server are stopped"
    assert [e.content for e in watch.of(Response, agent.agent_id) if e.final] == ["parent saw: " + run.result.content]


async def test_child_cell_timeout_becomes_the_tool_result(workdir: Path) -> None:
    parent = Script([task("slow")], ["parent goes on"])
    slow = Script([cell(PRINT_PID + "import time\ntime.sleep(60)\n")], echo_results("slow: "))
    model = routed(parent, {"slow": slow})
    async with Agent(config(model.model, workdir, execution_timeout=1.5)) as agent:
        watch = await watched(agent, PARENT)

    run = children_of(watch, agent.agent_id)[child("slow")]
    (output,) = watch.of(CodeExecutionOutput, run.started.subagent_id)
    assert output.status == "timeout"
    assert "timed out" in run.result.content
    assert parent.tool_results(1) == {"task-slow": run.result.content}
    assert [e.content for e in watch.of(Response, agent.agent_id) if e.final] == ["parent goes on"]


async def test_rejected_child_call_becomes_the_tool_result(workdir: Path) -> None:
    parent = Script([task("ask")], echo_results("parent saw: "))
    ask = Script([cell("print('must not run')")], ["never asked"])
    model = routed(parent, {"ask": ask})
    async with Agent(config(model.model, workdir, auto_approve=False)) as agent:

        def decide(event: AgentEvent) -> None:
            if isinstance(event, ApprovalRequest):
                event.approve(event.agent_id == agent.agent_id)  # yes to the parent, no to the child

        watch = await watched(agent, PARENT, decide)

    run = children_of(watch, agent.agent_id)[child("ask")]
    sid = run.started.subagent_id
    assert not watch.of(CodeExecutionOutput, sid), "a rejected cell does not run"
    assert ask.calls == 1
    assert run.finished.status == "rejected"
    assert run.result.is_error
    content = run.result.content
    assert "rejected" in content and sid in content  # names the child
    assert "execute_ipython_cell" in content and "print('must not run')" in content  # and what was rejected
    assert "this turn ends" not in content  # the parent's own turn goes on
    assert parent.tool_results(1) == {"task-ask": run.result.content}
    assert [e.content for e in watch.of(Response, agent.agent_id) if e.final] == ["parent saw: " + run.result.content]


# -- approvals of several children ---------------------------------------------------------------


async def test_waiting_children_are_answered_in_reverse_order(workdir: Path) -> None:
    parent = Script([task("first"), task("second")], ["done"])
    children = {name: Script([cell(f"print('ran {name}')")], [f"{name} done"]) for name in ("first", "second")}
    model = routed(parent, children)
    async with Agent(config(model.model, workdir, auto_approve=False, max_subagents=2, kernel_pool_size=2)) as agent:
        waiting: dict[str, ApprovalRequest] = {}
        order: list[str] = []
        prompts: dict[str, str] = {}

        def decide(event: AgentEvent) -> None:
            if isinstance(event, SubagentStarted):
                prompts[event.subagent_id] = event.prompt.split(":")[0]
            elif isinstance(event, ApprovalRequest):
                if event.agent_id == agent.agent_id:
                    event.approve(True)
                    return
                waiting[prompts[event.agent_id]] = event
                assert not event.decided
                if len(waiting) == 2:  # both children wait: answer the later one first
                    order.append("approve second")
                    waiting["CHILD-second"].approve(True)
            elif isinstance(event, CodeExecutionOutput):
                order.append(f"output {prompts[event.agent_id]}")
                if prompts[event.agent_id] == "CHILD-second":
                    order.append("approve first")
                    waiting["CHILD-first"].approve(True)

        watch = await watched(agent, PARENT, decide)

    assert order == ["approve second", "output CHILD-second", "approve first", "output CHILD-first"]
    runs = children_of(watch, agent.agent_id)
    assert [run.finished.status for run in runs.values()] == ["done", "done"]
    assert {run.result.content for run in runs.values()} == {"first done", "second done"}


# -- cancellation --------------------------------------------------------------------------------


async def test_cancel_stops_running_children_and_waiting_calls(workdir: Path) -> None:
    names = ["c1", "c2", "c3"]  # two run, the third waits for the bound
    parent = Script([task(name) for name in names])
    children = {
        name: Script([cell(PRINT_PID + "print('RUNNING', flush=True)\nimport time\ntime.sleep(120)\n")])
        for name in names
    }
    model = routed(parent, children)
    async with Agent(config(model.model, workdir, max_subagents=2, kernel_pool_size=0)) as agent:
        history_before = agent.history
        running: set[str] = set()

        def cancel_when_both_run(event: AgentEvent) -> None:
            if isinstance(event, CodeExecutionOutputChunk) and "RUNNING" in event.content:
                running.add(event.agent_id)
                if len(running) == 2:
                    agent.cancel()

        watch = await watched(agent, PARENT, cancel_when_both_run)
        assert agent.tree.children(agent.agent_id) == []
        # the parent's history says that its task calls were interrupted (the children did not finish)
        interrupted = agent.history[len(history_before):][-1]
        assert all(f"task-{name}" in str(interrupted) for name in names)
        assert str(interrupted).count("interrupted") >= 4  # three results and the note

        # the parent is usable again, and its next turn can start children
        parent.add([task("again")], ["second turn done"])
        again = Script([cell(PRINT_PID)], ["again done"])
        model.scripts["CHILD-again:"] = again
        second = await watched(agent, PARENT + " again")

    assert isinstance(watch.events[-1], RunCancelled) and watch.events[-1].agent_id == agent.agent_id
    started = watch.of(SubagentStarted)
    assert sorted(e.prompt for e in started) == [child("c1"), child("c2")], "the waiting call never started"
    queued = watch.of(SubagentQueued)
    assert [e.prompt for e in queued] == [child("c3")], "the third call waited for a slot, and said so"
    finished = watch.of(SubagentFinished)  # the two that ran, and the one stopped while it waited
    assert sorted(e.subagent_id for e in finished) == sorted(e.subagent_id for e in [*started, *queued])
    assert all(e.status == "cancelled" for e in finished)
    for event in started:
        assert len(watch.pids[event.subagent_id]) == 1
        assert watch.alive_at_finish[event.subagent_id] == [], "a cancelled child's kernel is shut down"
    assert children["c3"].calls == 0
    assert not watch.of(ToolOutput, agent.agent_id), "no task result for a cancelled turn"
    assert [run.result.content for run in children_of(second, agent.agent_id).values()] == ["again done"]


async def test_cancel_while_children_start(workdir: Path, calc_server_config: dict) -> None:
    """Cancelled while a child's kernel and MCP server are still starting: both are stopped."""
    parent = Script([task("s1"), task("s2")])
    children = {name: Script([cell(PRINT_PID)]) for name in ("s1", "s2")}
    model = routed(parent, children)
    cfg = config(model.model, workdir, max_subagents=2, mcp_servers={"calc": calc_server_config})
    async with Agent(cfg) as agent:
        started: list[str] = []

        def cancel_on_second_start(event: AgentEvent) -> None:
            if isinstance(event, SubagentStarted):
                started.append(event.subagent_id)
                if len(started) == 2:
                    agent.cancel()

        watch = await watched(agent, PARENT, cancel_on_second_start)
        assert agent.tree.children(agent.agent_id) == []
        assert len(calc_servers()) == 1, "only the parent's MCP server runs: the starting children's are stopped"

    assert all(script.calls == 0 for script in children.values()), "no child got as far as its model"
    assert sorted(e.subagent_id for e in watch.of(SubagentFinished)) == sorted(started)
    assert {e.status for e in watch.of(SubagentFinished)} == {"cancelled"}
    assert isinstance(watch.events[-1], RunCancelled)


async def test_invalid_task_arguments_start_no_child(workdir: Path) -> None:
    parent = Script(
        [
            Call("task", {"max_turns": 3}, id="no-prompt"),
            Call("task", {"prompt": "CHILD-never: x", "max_turns": 0}, id="zero-turns"),
            Call("task", {"prompt": "CHILD-never: x", "depth": 2}, id="unknown-argument"),
        ],
        ["I will fix my calls."],
    )
    never = Script()
    model = routed(parent, {"never": never})
    async with Agent(config(model.model, workdir)) as agent:
        watch = await watched(agent, PARENT)

    assert not watch.of(SubagentStarted) and never.calls == 0
    results = parent.tool_results(1)
    assert sorted(results) == ["no-prompt", "unknown-argument", "zero-turns"]
    assert "prompt" in results["no-prompt"]
    assert "max_turns" in results["zero-turns"]
    assert "depth" in results["unknown-argument"]
    assert all(e.is_error for e in watch.of(ToolOutput, agent.agent_id))


async def test_standing_approval_for_a_child_seen_starting(workdir: Path) -> None:
    """A consumer can approve everything of a child it has just seen start; its calls arrive decided."""
    parent = Script([task("trusted"), task("asked")], ["done"])
    children = {
        name: Script([cell(f"print('{name} 1')")], [cell(f"print('{name} 2')")], [f"{name} done"])
        for name in ("trusted", "asked")
    }
    model = routed(parent, children)
    async with Agent(config(model.model, workdir, auto_approve=False, max_subagents=2, kernel_pool_size=2)) as agent:
        asked: list[ApprovalRequest] = []

        def decide(event: AgentEvent) -> None:
            if isinstance(event, SubagentStarted) and event.prompt.startswith("CHILD-trusted:"):
                agent.approvals.always(event.subagent_id)
            elif isinstance(event, ApprovalRequest) and not event.decided:
                asked.append(event)
                event.approve(True)

        watch = await watched(agent, PARENT, decide)

    runs = children_of(watch, agent.agent_id)
    trusted = runs[child("trusted")].started.subagent_id
    untrusted = runs[child("asked")].started.subagent_id
    assert [r.auto_approved for r in watch.of(ApprovalRequest, trusted)] == [True, True]
    assert [r.auto_approved for r in watch.of(ApprovalRequest, untrusted)] == [False, False]
    assert {r.agent_id for r in asked} == {agent.agent_id, untrusted}
    assert {run.result.content for run in runs.values()} == {"trusted done", "asked done"}


async def test_cancel_while_child_waits_for_approval(workdir: Path) -> None:
    parent = Script([task("wait")])
    wait = Script([cell(PRINT_PID)])
    model = routed(parent, {"wait": wait})
    async with Agent(config(model.model, workdir, auto_approve=False)) as agent:
        asked: list[ApprovalRequest] = []

        def decide(event: AgentEvent) -> None:
            if isinstance(event, ApprovalRequest):
                if event.agent_id == agent.agent_id:
                    event.approve(True)
                else:
                    asked.append(event)
                    agent.cancel()

        watch = await watched(agent, PARENT, decide)
        assert agent.tree.children(agent.agent_id) == []
        parent_kernel = agent.kernel.pid if agent.kernel else None
        assert kernel_processes() == [parent_kernel]

    assert len(asked) == 1 and asked[0].decision is False  # a request pending at the cancel ends rejected
    (finished,) = watch.of(SubagentFinished)
    assert finished.status == "cancelled"
    assert not watch.of(CodeExecutionOutput)
    assert isinstance(watch.events[-1], RunCancelled)


async def test_closing_the_stream_stops_children(workdir: Path) -> None:
    """A consumer that stops iterating and closes the stream ends the turn: the children go with it."""
    parent = Script([task("left")])
    left = Script([cell(PRINT_PID + "print('RUNNING', flush=True)\nimport time\ntime.sleep(120)\n")])
    model = routed(parent, {"left": left})
    async with Agent(config(model.model, workdir)) as agent:
        watch = Watch()
        async with asyncio.timeout(RUN_LIMIT), contextlib.aclosing(agent.stream(PARENT)) as events:
            async for event in events:
                watch(event)
                if isinstance(event, CodeExecutionOutputChunk) and "RUNNING" in event.content:
                    break
        assert agent.tree.children(agent.agent_id) == []
        parent_kernel = agent.kernel.pid if agent.kernel else None
        assert kernel_processes() == [parent_kernel]
        (started,) = watch.of(SubagentStarted)
        (child_kernel,) = watch.pids[started.subagent_id]
        assert not alive(child_kernel)
        assert "task-left" in str(agent.history[-1]) and "interrupted" in str(agent.history[-1])

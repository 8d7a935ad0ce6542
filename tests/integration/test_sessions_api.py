"""Sessions through the API, with real kernels and scripted models: saved as it happens, resumed, read back."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter, ModelRequest, ToolReturnPart, UserPromptPart

from freeact_sub import (
    Agent,
    AgentConfig,
    AgentEvent,
    ApprovalRequest,
    CodeExecutionOutput,
    ConfigError,
    Response,
    SessionError,
    SubagentFinished,
    SubagentStarted,
    ToolOutput,
)
from freeact_sub.sessions import RESUME_NOTE, UserPrompt, list_sessions, open_session
from tests.scripting import Block, Call, Router, Script, drive, single_agent_config


def dumped(messages: list[ModelMessage]) -> bytes:
    return ModelMessagesTypeAdapter.dump_json(messages)


def prompts_of(request: ModelMessage) -> list[str]:
    return [p.content for p in request.parts if isinstance(p, UserPromptPart) and isinstance(p.content, str)]


async def test_resume_loads_the_history_gives_a_fresh_kernel_and_says_so(workdir: Path) -> None:
    script = Script(
        [Call("execute_ipython_cell", {"code": "secret = 41\nprint(secret + 1)"})],
        ["The answer is 42."],
    )
    async with Agent(single_agent_config(script, workdir, auto_approve=True)) as first:
        await drive(first.stream("compute it"))
        session_id, main_id, history = first.session_id, first.agent_id, first.history
    assert session_id is not None

    # the files alone give the conversation back
    saved = open_session(session_id, workdir)
    assert dumped(saved.messages()) == dumped(history)
    assert saved.main_id == main_id and saved.first_prompt == "compute it"
    assert saved.agents[main_id].status == "stopped"

    script.reset(
        [Call("execute_ipython_cell", {"code": "print('secret' in globals())"})],
        ["It is gone."],
    )
    resumed = Agent(single_agent_config(script, workdir, auto_approve=True), session=session_id)
    assert resumed.agent_id == main_id
    async with resumed:
        assert dumped(resumed.history) == dumped(history)
        events = await drive(resumed.stream("is secret still there?"))
    first_request = script.requests[0]
    assert dumped(first_request[: len(history)]) == dumped(history)  # the model sees the whole conversation
    assert prompts_of(first_request[-1]) == [RESUME_NOTE, "is secret still there?"]
    cell = next(e for e in events if isinstance(e, CodeExecutionOutput))
    assert cell.content.strip() == "False"  # a fresh kernel
    # one session, one transcript that continues
    [listed] = list_sessions(workdir)
    assert listed.session_id == session_id and listed.prompts == ["compute it", "is secret still there?"]
    assert len(listed.messages()) == len(history) + 4


async def test_a_second_agent_on_a_running_session_is_refused(workdir: Path) -> None:
    script = Script(["hello"])
    async with Agent(single_agent_config(script, workdir)) as agent:
        await drive(agent.stream("hi"))
        other = Agent(single_agent_config(Script(), workdir), session=agent.session_id)
        with pytest.raises(SessionError, match="in use by another process"):
            await other.start()
        assert not other.started


async def test_unknown_session_is_refused_at_once(workdir: Path) -> None:
    with pytest.raises(SessionError, match="no session 'missing'"):
        Agent(single_agent_config(Script(), workdir), session="missing")


async def test_a_working_dir_that_cannot_hold_sessions_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / ".freeact-sub").write_text("not a folder")  # where the sessions folder would go
    agent = Agent(single_agent_config(Script(), tmp_path))
    # one clear error before anything starts, naming the folder and what needs it
    with pytest.raises(ConfigError, match=r"/\.freeact-sub cannot be made or written \(it is not a folder\); "
                                          r"it holds the saved sessions"):
        await agent.start()
    assert not agent.started


async def test_sessions_off_writes_nothing(workdir: Path) -> None:
    async with Agent(single_agent_config(Script(["hi"]), workdir, save_sessions=False)) as agent:
        await drive(agent.stream("hello"))
        assert agent.session_id is None
    assert list_sessions(workdir) == []


async def test_nothing_secret_is_written(workdir: Path, calc_server_config: dict[str, Any],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SESSION_TEST_KEY", "sk-very-secret-key")
    server = {**calc_server_config, "env": {"CALC_TOKEN": "mcp-secret-token"}}
    config = single_agent_config(Script(["hi"]), workdir, mcp_servers={"calc": server},
                                 kernel_env={"KERNEL_SECRET": "kernel-secret-value"}, api_key_env="SESSION_TEST_KEY")
    async with Agent(config) as agent:
        await drive(agent.stream("hello"))
    folder = open_session("latest", workdir).path
    written = b"".join(path.read_bytes() for path in folder.rglob("*") if path.is_file())  # checkpoints too
    for secret in (b"sk-very-secret-key", b"mcp-secret-token", b"kernel-secret-value", b"calc_server"):
        assert secret not in written


def _comparable(events: list[AgentEvent]) -> list[tuple[Any, ...]]:
    """What a transcript keeps of a stream: complete texts, calls with their arguments, results."""
    kept: list[tuple[Any, ...]] = []
    for event in events:
        match event:
            case Response(content=content, final=final):
                kept.append(("response", content, final))
            case ApprovalRequest(tool_name=name, tool_args=args, tool_call_id=call_id):
                kept.append(("call", name, args, call_id))
            case CodeExecutionOutput(content=text, tool_call_id=call_id):
                kept.append(("cell", text, call_id))
            case ToolOutput(content=content, tool_name=name, tool_call_id=call_id):
                kept.append(("tool", name, content, call_id))
    return kept


async def test_three_childrens_transcripts_read_back_equal_what_was_streamed(workdir: Path) -> None:
    parent = Script(
        [Call("task", {"prompt": f"CHILD-{n}: job {n}"}, id=f"task-{n}") for n in "abc"],
        ["All three are done."],
    )
    children = {
        n: Script(
            [f"Working on {n}.", Call("execute_ipython_cell", {"code": f"print('child {n}', 6 * 7)"}, id=f"cell-{n}")],
            [f"Child {n} says 42."],
        )
        for n in "abc"
    }
    router = Router({"PARENT": parent, **{f"CHILD-{n}:": s for n, s in children.items()}})
    config = AgentConfig(model=router.model, working_dir=workdir, auto_approve=True, kernel_pool_size=0)
    async with Agent(config) as agent:
        streamed = await drive(agent.stream("PARENT: run three jobs"))
        session_id = agent.session_id
    saved = open_session(session_id or "", workdir)
    started = {e.subagent_id: e for e in streamed if isinstance(e, SubagentStarted)}
    assert len(started) == 3 and {c.agent_id for c in saved.children()} == set(started)
    for child_id, start in started.items():
        record = saved.agents[child_id]
        assert (record.parent_id, record.tool_call_id, record.status) == (agent.agent_id, start.tool_call_id, "done")
        live = [e for e in streamed if e.agent_id == child_id]
        replayed = saved.events(child_id)
        assert _comparable(replayed) == _comparable(live)
        assert isinstance(replayed[0], UserPrompt) and replayed[0].content == start.prompt
    # the parent's replay frames each child as the live stream did
    replayed = saved.events()
    assert [e.subagent_id for e in replayed if isinstance(e, SubagentStarted)] == list(started)
    finished = [e for e in replayed if isinstance(e, SubagentFinished)]
    assert [e.status for e in finished] == ["done"] * 3
    # the parent's results arrived as the children finished; the transcript keeps them in call order
    assert sorted(map(repr, _comparable([e for e in replayed if e.agent_id == agent.agent_id]))) == sorted(
        map(repr, _comparable([e for e in streamed if e.agent_id == agent.agent_id]))
    )


async def test_cancelled_turn_leaves_a_transcript_that_resumes(workdir: Path) -> None:
    gate = asyncio.Event()
    script = Script(
        [Call("execute_ipython_cell", {"code": "print('round one')"})],
        ["Thinking more", Block(gate)],
    )
    agent = Agent(single_agent_config(script, workdir, auto_approve=True))
    async with agent:
        async def cancel_when_blocked() -> None:
            while script.calls < 2:  # noqa: ASYNC110
                await asyncio.sleep(0.01)
            agent.cancel()

        canceller = asyncio.create_task(cancel_when_blocked())
        await drive(agent.stream("go"))
        await canceller
        history = agent.history
    saved = open_session(agent.session_id or "", workdir)
    assert dumped(saved.messages(repaired=True)) == dumped(history)
    # the repaired history is valid for a model: every call has its result
    messages = saved.messages(repaired=True)
    calls = {p.tool_call_id for m in messages for p in m.parts if p.part_kind == "tool-call"}
    results = {p.tool_call_id for m in messages if isinstance(m, ModelRequest) for p in m.parts
               if isinstance(p, ToolReturnPart)}
    assert calls == results
    # the agent's note that the turn was interrupted is not shown as something the user typed
    assert [e.content for e in saved.events() if isinstance(e, UserPrompt)] == ["go"]


async def test_task_resume_continues_a_child_of_an_earlier_process(workdir: Path) -> None:
    parent = Script([Call("task", {"prompt": "CHILD: first job"}, id="task-1")], ["Child said it."])
    child = Script(
        [Call("execute_ipython_cell", {"code": "kept = 7\nprint('first', kept)"}, id="cell-1")],
        ["First job done."],
    )
    router = Router({"PARENT": parent, "CHILD:": child})
    config = AgentConfig(model=router.model, working_dir=workdir, auto_approve=True, kernel_pool_size=0)
    async with Agent(config) as agent:
        events = await drive(agent.stream("PARENT: start a child"))
        child_id = next(e.subagent_id for e in events if isinstance(e, SubagentStarted))
        session_id = agent.session_id
    child_history = open_session(session_id or "", workdir).messages(child_id)

    # a new process: the session is resumed, and the parent resumes the child it started before
    parent.reset([Call("task", {"prompt": "second job", "resume": child_id}, id="task-2")], ["Resumed child said it."])
    child.reset([Call("execute_ipython_cell", {"code": "print('kept' in globals())"}, id="cell-2")], ["Second done."])
    async with Agent(config, session=session_id) as agent:
        events = await drive(agent.stream("PARENT: resume that child"))
    result = next(e for e in events if isinstance(e, ToolOutput) and e.tool_call_id == "task-2")
    assert result.content == "Second done." and not result.is_error
    assert next(e for e in events if isinstance(e, SubagentStarted)).subagent_id == child_id  # the same child
    sent = child.requests[0]
    assert dumped(sent[: len(child_history)]) == dumped(child_history)  # its whole conversation, from the files
    assert [p.content for p in sent[-1].parts if isinstance(p, UserPromptPart)][-1] == "second job"
    assert any("kernel is new" in str(p.content) for p in sent[-1].parts if isinstance(p, UserPromptPart))
    cell = next(e for e in events if isinstance(e, CodeExecutionOutput) and e.agent_id == child_id)
    assert cell.content.strip() == "False"  # a fresh kernel
    saved = open_session(session_id or "", workdir)
    assert [c.agent_id for c in saved.children()] == [child_id]  # one child, one transcript that goes on
    assert saved.agents[child_id].status == "done"
    assert dumped(saved.messages(child_id)[: len(child_history)]) == dumped(child_history)
    assert len(saved.messages(child_id)) == len(child_history) + 4


async def test_the_replay_names_each_childs_type_title_and_model_and_calls_that_never_ran(workdir: Path) -> None:
    parent = Script(
        [Call("task", {"prompt": "CHILD: review", "subagent_type": "reviewer", "description": "Review it"}, id="t"),
         Call("reset_kernel", {}, id="reset")],
        ["done"],
    )
    router = Router({"PARENT": parent, "CHILD:": Script(["looks fine"])})
    config = AgentConfig(model=router.model, working_dir=workdir, kernel_pool_size=0,
                         agents={"reviewer": {"description": "reviews"}}, approvals={"reset_kernel": "deny"})
    async with Agent(config) as agent:
        streamed = await drive(agent.stream("PARENT: go"))
        session_id = agent.session_id
    replayed = open_session(session_id or "", workdir).events()
    (live,) = [e for e in streamed if isinstance(e, SubagentStarted)]
    (again,) = [e for e in replayed if isinstance(e, SubagentStarted)]
    replayed_kind = (again.agent_type, again.description, again.model)
    assert replayed_kind == (live.agent_type, live.description, live.model) == ("reviewer", "Review it",
                                                                                   "scripted-router")
    (refused,) = [e for e in replayed if isinstance(e, ApprovalRequest) and e.tool_call_id == "reset"]
    assert refused.decision is False  # a deny rule refused it: it never ran, and the replay says so

"""The scripted demo model server, spoken to through pydantic-ai's real OpenAI chat and Anthropic models."""

from __future__ import annotations

import asyncio
import json
import threading
import urllib.error
import urllib.request

import pytest
from pydantic_ai.direct import model_request, model_request_stream
from pydantic_ai.messages import (
    ModelRequest,
    ModelResponse,
    PartDeltaEvent,
    PartStartEvent,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ThinkingPartDelta,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.tools import ToolDefinition

from freeact_sub import AgentConfig
from freeact_sub.demo import (
    DEMO_ANTHROPIC_MODEL,
    DEMO_MODEL,
    PI_TASK,
    PRIMES_TASK,
    REVIEW_TASK,
    DemoServer,
    demo_config,
    start_demo_server,
)
from freeact_sub.demo.scenario import Reply, respond


def _tool(name: str) -> ToolDefinition:
    return ToolDefinition(name=name, description=name, parameters_json_schema={"type": "object", "properties": {}})


MAIN_TOOLS = ModelRequestParameters(function_tools=[_tool("execute_ipython_cell"), _tool("task")])
SUB_TOOLS = ModelRequestParameters(function_tools=[_tool("execute_ipython_cell"), _tool("demo_constant")])


def _model(server: DemoServer):
    return AgentConfig(model=DEMO_MODEL, base_url=server.base_url).resolve_model()


@pytest.fixture
def server():
    with start_demo_server(chunk_delay=0) as running:
        yield running


async def test_streams_thinking_text_and_a_code_call_through_pydantic_ai(server: DemoServer) -> None:
    messages = [ModelRequest(parts=[SystemPromptPart("sys"), UserPromptPart("Show me the tour")])]
    thinking_deltas = []
    async with model_request_stream(_model(server), messages, model_request_parameters=MAIN_TOOLS) as stream:
        async for event in stream:
            if isinstance(event, PartStartEvent) and isinstance(event.part, ThinkingPart):
                thinking_deltas.append(event.part.content)
            elif isinstance(event, PartDeltaEvent) and isinstance(event.delta, ThinkingPartDelta):
                thinking_deltas.append(event.delta.content_delta)
        response = stream.get()
    kinds = [type(p) for p in response.parts]
    assert kinds == [ThinkingPart, TextPart, ToolCallPart]
    assert len(thinking_deltas) > 3  # the thinking arrived in pieces, not at once
    assert "".join(d or "" for d in thinking_deltas) == response.parts[0].content
    call = response.parts[2]
    assert call.tool_name == "execute_ipython_cell"
    assert "display(Image(" in call.args_as_dict()["code"]


async def test_main_agent_starts_two_parallel_tasks_then_answers_with_their_results(server: DemoServer) -> None:
    model = _model(server)
    history: list = [ModelRequest(parts=[SystemPromptPart("sys"), UserPromptPart("Show me the tour")])]
    first = await model_request(model, history, model_request_parameters=MAIN_TOOLS)
    cell = first.parts[-1]
    history += [
        first,
        ModelRequest(parts=[ToolReturnPart("execute_ipython_cell", "338350", tool_call_id=cell.tool_call_id)]),
    ]
    second = await model_request(model, history, model_request_parameters=MAIN_TOOLS)
    tasks = [p for p in second.parts if isinstance(p, ToolCallPart)]
    assert [t.tool_name for t in tasks] == ["task", "task"]
    assert [t.args_as_dict()["prompt"] for t in tasks] == [PRIMES_TASK, PI_TASK]
    answers = ["There are 17984 primes below 200,000.", "The user rejected the call to `execute_ipython_cell`."]
    history += [
        second,
        ModelRequest(
            parts=[ToolReturnPart("task", a, tool_call_id=t.tool_call_id) for t, a in zip(tasks, answers, strict=True)]
        ),
    ]
    final = await model_request(model, history, model_request_parameters=MAIN_TOOLS)
    text = "".join(p.content for p in final.parts if isinstance(p, TextPart))
    assert not any(isinstance(p, ToolCallPart) for p in final.parts)
    assert "17984" in text
    assert "rejected" in text  # a rejected subagent is reported, not invented


async def test_a_subagent_request_gets_the_subagent_script(server: DemoServer) -> None:
    messages = [ModelRequest(parts=[SystemPromptPart("sys"), UserPromptPart(PI_TASK)])]
    response = await model_request(_model(server), messages, model_request_parameters=SUB_TOOLS)
    call = response.parts[-1]
    assert isinstance(call, ToolCallPart)
    assert (call.tool_name, call.args_as_dict()) == ("demo_constant", {"name": "pi"})
    assert isinstance(response.parts[0], ThinkingPart)


def test_the_decision_depends_only_on_the_request() -> None:
    main = {"messages": [{"role": "user", "content": "hi"}], "tools": [{"function": {"name": "task"}}]}
    sub = {
        "messages": [{"role": "user", "content": PRIMES_TASK}],
        "tools": [{"function": {"name": "execute_ipython_cell"}}],
    }
    replies = [respond(main), respond(sub), respond(main)]
    assert all(isinstance(r, Reply) for r in replies)
    assert replies[0].text == replies[2].text != replies[1].text
    assert "sieve" in replies[1].tool_calls[0].arguments["code"]


def test_a_new_prompt_starts_the_script_again_after_an_earlier_turn() -> None:
    tools = [{"function": {"name": "task"}}]
    earlier = [
        {"role": "user", "content": "one cell please"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function"}]},
        {"role": "tool", "tool_call_id": "c1", "content": "RESULT: 5050"},
        {"role": "assistant", "content": "The sum of 1 to 100 is **5050**."},
    ]
    follow_up = respond({"messages": [*earlier, {"role": "user", "content": "one cell again"}], "tools": tools})
    assert isinstance(follow_up, Reply) and follow_up.tool_calls  # step 0 of the new turn, not the answer


def test_non_streaming_completion_and_model_error() -> None:
    with start_demo_server(chunk_delay=0) as server:
        body = {
            "model": DEMO_MODEL,
            "messages": [{"role": "user", "content": "one cell"}],
            "tools": [{"type": "function", "function": {"name": "task", "parameters": {}}}],
        }
        reply = _post(server, body)
        message = reply["choices"][0]["message"]
        assert message["reasoning_content"] and message["tool_calls"][0]["function"]["name"] == "execute_ipython_cell"
        body["messages"][0]["content"] = "please cause a model error"
        with pytest.raises(urllib.error.HTTPError) as failure:
            _post(server, body)
        assert failure.value.code == 400
        assert "asked to fail" in json.loads(failure.value.read())["error"]["message"]


def _post(server: DemoServer, body: dict) -> dict:
    request = urllib.request.Request(
        f"{server.base_url}/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


async def test_starts_from_inside_a_running_event_loop_and_closes_idempotently() -> None:
    server = start_demo_server(chunk_delay=0)
    try:
        assert server.base_url.startswith("http://127.0.0.1:") and server.base_url.endswith("/v1")
        messages = [ModelRequest(parts=[UserPromptPart("one cell")])]
        response = await model_request(_model(server), messages, model_request_parameters=MAIN_TOOLS)
        assert isinstance(response, ModelResponse)
    finally:
        server.close()
    server.close()
    assert not any(t.name.startswith(f"freeact-sub-demo-server:{server.port}") for t in threading.enumerate())
    with pytest.raises(urllib.error.URLError):
        _post(server, {"messages": []})
    await asyncio.sleep(0)


def test_demo_config_points_at_the_server_with_the_demo_mcp_server(tmp_path) -> None:
    with start_demo_server() as server:
        config = demo_config(server, working_dir=tmp_path, max_subagents=2)
    assert config.base_url == server.base_url and config.model == DEMO_MODEL
    assert "demo" in config.mcp_servers and config.max_subagents == 2 and config.working_dir == tmp_path
    reviewer = config.agents["reviewer"]
    assert reviewer.model == f"anthropic:{DEMO_ANTHROPIC_MODEL}"
    assert reviewer.base_url == server.base_url_for("anthropic") == server.base_url.removesuffix("/v1")
    assert reviewer.tools == ["demo_word_count"] and reviewer.approvals == {"demo_word_count": "allow"}
    assert not reviewer.needs_kernel


def test_demo_config_adds_types_of_its_own_to_the_demo_types(tmp_path) -> None:
    with start_demo_server() as server:
        config = demo_config(server, working_dir=tmp_path, agents={"explorer": {"description": "Explores."}})
    assert sorted(config.agents) == ["explorer", "reviewer"]


TOUR_SYSTEM = "... `from mcptools.demo import constant` ..."  # what the code-action prompt says in "both" mode
TASK_WITH_REVIEWER = ToolDefinition(
    name="task",
    description="Start a subagent. Types:\n- `general`: a clone.\n- `reviewer`: Reviews a short text.",
    parameters_json_schema={"type": "object", "properties": {}},
)


async def test_the_tour_calls_mcp_tools_from_code_then_starts_a_typed_reviewer_beside_two_children(
    server: DemoServer,
) -> None:
    model = _model(server)
    tools = ModelRequestParameters(function_tools=[_tool("execute_ipython_cell"), TASK_WITH_REVIEWER])
    history: list = [ModelRequest(parts=[SystemPromptPart(TOUR_SYSTEM), UserPromptPart("Show me what you can do")])]
    outputs = [
        "Python 3.11 in the kernel\n338350",
        "reference values: pi = 3.141593, e = 2.718282",
        "There are 17984 primes below 200,000.",
        "π ≈ 3.14067, off by 0.00092 from the reference 3.14159.",
        "The summary has 15 words: short enough.",
    ]
    calls: list[list[ToolCallPart]] = []
    while True:
        response = await model_request(model, history, model_request_parameters=tools)
        step = [p for p in response.parts if isinstance(p, ToolCallPart)]
        if not step:
            break
        calls.append(step)
        returns = [ToolReturnPart(c.tool_name, outputs.pop(0), tool_call_id=c.tool_call_id) for c in step]
        history += [response, ModelRequest(parts=returns)]
    image, from_code, tasks = calls
    assert "def png(" in image[0].args_as_dict()["code"]
    code = from_code[0].args_as_dict()["code"]
    assert "from mcptools.demo import constant" in code and "for name in (" in code
    assert [t.args_as_dict().get("subagent_type", "general") for t in tasks] == ["general", "general", "reviewer"]
    assert tasks[2].args_as_dict() == {
        "prompt": REVIEW_TASK,
        "subagent_type": "reviewer",
        "description": "Review the summary",
    }
    text = "".join(p.content for p in response.parts if isinstance(p, TextPart))
    assert "(pi = 3.141593, e = 2.718282)" in text and "17984" in text and "π ≈ 3.14067" in text
    assert "**Review (`reviewer`, Anthropic protocol):** The summary has 15 words" in text


async def test_one_server_answers_the_reviewer_over_the_anthropic_protocol(server: DemoServer) -> None:
    from freeact_sub.config.agent_types import AgentType, configure

    types = demo_config(server).agents
    parent = AgentConfig(model=DEMO_MODEL, base_url=server.base_url)
    reviewer = configure(parent, AgentType.model_validate(types["reviewer"]), "reviewer").resolve_model()
    assert reviewer.system == "anthropic" and reviewer.model_name == DEMO_ANTHROPIC_MODEL
    count = ModelRequestParameters(function_tools=[_tool("demo_word_count")])
    history: list = [ModelRequest(parts=[SystemPromptPart("sys"), UserPromptPart(REVIEW_TASK)])]
    first = await model_request(reviewer, history, model_request_parameters=count)
    assert [type(p) for p in first.parts] == [ThinkingPart, TextPart, ToolCallPart]
    call = first.parts[-1]
    assert call.tool_name == "demo_word_count" and call.args_as_dict()["text"].startswith("Code runs in kernels")
    history += [first, ModelRequest(parts=[ToolReturnPart("demo_word_count", "15", tool_call_id=call.tool_call_id)])]
    second = await model_request(reviewer, history, model_request_parameters=count)
    verdict = "".join(p.content for p in second.parts if isinstance(p, TextPart))
    assert "The summary has 15 words: short enough" in verdict

    await model_request(_model(server), history[:1], model_request_parameters=MAIN_TOOLS)  # the OpenAI side
    anthropic, openai = (list(server.requests_by_protocol[p]) for p in ("anthropic", "openai"))
    assert [b["model"] for b in anthropic] == [DEMO_ANTHROPIC_MODEL] * 2 and "system" in anthropic[0]
    assert [b["model"] for b in openai] == [DEMO_MODEL]
    assert list(server.requests) == [*anthropic, *openai]


def test_closing_the_server_closes_both_protocols() -> None:
    server = start_demo_server(chunk_delay=0)
    server.close()
    for url in (f"{server.base_url_for('openai')}/chat/completions", f"{server.base_url_for('anthropic')}/v1/messages"):
        with pytest.raises(urllib.error.URLError):
            urllib.request.urlopen(urllib.request.Request(url, data=b"{}"), timeout=5)


def test_the_streaming_pace_comes_from_the_environment_and_a_bad_value_is_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from freeact_sub.demo.server import DEFAULT_CHUNK_DELAY, chunk_delay_from_env

    monkeypatch.setenv("FREEACT_SUB_DEMO_CHUNK_DELAY", "0.25")
    with start_demo_server() as server:
        assert server.chunk_delay == 0.25
    monkeypatch.delenv("FREEACT_SUB_DEMO_CHUNK_DELAY")
    assert chunk_delay_from_env() == DEFAULT_CHUNK_DELAY
    for bad in ("fast", "-1", "nan"):
        monkeypatch.setenv("FREEACT_SUB_DEMO_CHUNK_DELAY", bad)
        with pytest.raises(ValueError, match="FREEACT_SUB_DEMO_CHUNK_DELAY: expected seconds"):
            chunk_delay_from_env()


async def test_the_demo_server_serves_the_demo_mcp_server_over_http_and_leaves_the_hosts_logging_alone(
    tmp_path,
) -> None:
    import logging

    import httpx
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    with start_demo_server() as server:
        config = demo_config(server, working_dir=tmp_path)
        assert config.mcp_servers["demo"].url == server.mcp_url
        async with httpx.AsyncClient() as client, streamable_http_client(server.mcp_url, http_client=client) as (
            read, write, *_
        ), ClientSession(read, write) as session:
            await session.initialize()
            tools = await session.list_tools()
            assert sorted(tool.name for tool in tools.tools) == ["constant", "word_count"]
            pi = await session.call_tool("constant", {"name": "pi"})
            assert not pi.is_error and "3.14159" in pi.content[0].text
            unknown = await session.call_tool("constant", {"name": "nope"})
            assert unknown.is_error and "unknown constant 'nope'" in unknown.content[0].text
    assert root.handlers == handlers and root.level == level  # the SDK's logging.basicConfig() did not run here

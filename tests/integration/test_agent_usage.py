"""Token usage per agent: recorded for every model response, reported as it happens, summed per agent and tree.

A scripted `FunctionModel` reports a deterministic usage for each response (pydantic-ai's
estimate); the demo server sends a real OpenAI `usage` chunk at the end of each stream.
"""

from __future__ import annotations

from pathlib import Path

from pydantic_ai.messages import ModelResponse

from freeact_sub import Agent, AgentConfig, ModelUsage, SubagentFinished, SubagentStarted, Usage
from freeact_sub.demo import DEMO_MODEL, demo_config, start_demo_server
from tests.scripting import Call, Router, Script, drive, of


def summed(events: list[ModelUsage]) -> tuple[int, int, int]:
    return len(events), sum(e.input_tokens for e in events), sum(e.output_tokens for e in events)


def totals(usage: Usage) -> tuple[int, int, int]:
    return usage.requests, usage.input_tokens, usage.output_tokens


def responses_usage(agent: Agent) -> tuple[int, int, int]:
    responses = [m for m in agent.history if isinstance(m, ModelResponse)]
    return (len(responses), sum(r.usage.input_tokens for r in responses),
            sum(r.usage.output_tokens for r in responses))


async def test_usage_of_every_response_is_recorded_per_agent_and_for_the_tree(workdir: Path) -> None:
    parent = Script(
        ["Two jobs.", Call("task", {"prompt": "CHILD-a: add"}, id="t-a"),
         Call("task", {"prompt": "CHILD-b: mul"}, id="t-b")],
        ["Both done, a long final answer with several words in it."],
    )
    child_a = Script([Call("execute_ipython_cell", {"code": "print(1 + 1)"})], ["two"])
    child_b = Script(["six, without any tool"])
    model = Router({"PARENT": parent, "CHILD-a:": child_a, "CHILD-b:": child_b}).model
    config = AgentConfig(model=model, working_dir=workdir, auto_approve=True, kernel_pool_size=0)
    async with Agent(config) as agent:
        events = await drive(agent.stream("PARENT: go"))
        main = agent.agent_id
        usage = agent.usage
        assert responses_usage(agent) == totals(usage.of(main))

    reported = of(ModelUsage, events)
    children = {e.prompt: e.subagent_id for e in of(SubagentStarted, events)}
    by_agent = {agent_id: [e for e in reported if e.agent_id == agent_id] for agent_id in [main, *children.values()]}
    assert [len(by_agent[a]) for a in (main, children["CHILD-a: add"], children["CHILD-b: mul"])] == [2, 2, 1]
    assert all(e.output_tokens > 0 and e.input_tokens > 0 and e.cost is None for e in reported)  # scripted: no price
    for agent_id, mine in by_agent.items():
        assert totals(usage.of(agent_id)) == summed(mine)
    assert totals(usage.total) == summed(reported)
    assert usage.total.cost is None and usage.total.unpriced_requests == 5
    for finished in of(SubagentFinished, events):
        assert finished.usage == usage.of(finished.subagent_id)
    # each response's usage is reported before the turn goes on with its tool calls
    first_task = next(i for i, e in enumerate(events) if isinstance(e, SubagentStarted))
    assert any(isinstance(e, ModelUsage) and e.agent_id == main for e in events[:first_task])


async def test_usage_from_the_openai_protocol_usage_chunk(workdir: Path) -> None:
    with start_demo_server(chunk_delay=0) as server:
        async with Agent(demo_config(server, working_dir=workdir, kernel_pool_size=0, auto_approve=True)) as agent:
            events = await drive(agent.stream("run one cell"))
            main_usage = agent.usage.of(agent.agent_id)
            assert responses_usage(agent) == totals(main_usage)
    reported = [e for e in of(ModelUsage, events) if e.agent_id == agent.agent_id]
    assert reported and all(e.input_tokens > 0 and e.output_tokens > 0 for e in reported)
    assert all(e.model_name == DEMO_MODEL for e in reported)
    assert summed(reported) == totals(main_usage)
    assert main_usage.cost is None  # a local server is not priced as OpenAI

"""The person's own directed turns: `stream(..., agent_type=...)` (`@type` in the front ends) and command
files (`stream_command`). Real kernels, scripted models; the request logs show what each agent was sent."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic_ai.messages import ModelRequest, ModelResponse, ToolCallPart, ToolReturnPart, UserPromptPart

from freeact_sub import Agent, AgentConfig, ApprovalRequest, ConfigError, SubagentStarted, ToolOutput
from tests.scripting import Router, Script, drive, first_prompt, of


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


async def test_a_directed_subagent_is_asked_runs_and_its_answer_is_in_the_main_agents_history(workdir: Path) -> None:
    write(workdir / ".freeact-sub" / "commands" / "find.md",
          "---\ndescription: Find where something is defined\nagent: general\n---\nFind where $ARGUMENTS is defined.\n")
    write(workdir / ".freeact-sub" / "commands" / "short.md", "Answer in one word: $ARGUMENTS\n")
    main = Script(["It is in parser.py, as the subagent found."])
    child = Script(["parser.py:12"])
    by_command = Script(["lexer.py:3"])
    other = Script(["yes"])  # the model of a command's turn, or of `stream(model=...)`
    model = Router({"[The user started": main, "CHILD": child, "Find where the lexer": by_command}).model
    config = AgentConfig(model=model, working_dir=workdir, kernel_pool_size=0, mcp_pool_size=0)
    async with Agent(config) as agent:
        events = await drive(agent.stream("CHILD: find the parser", agent_type="general"))
        (asked,) = of(ApprovalRequest, events)
        assert (asked.agent_id, asked.tool_name, asked.tool_args["subagent_type"], asked.auto_approved) == (
            agent.agent_id, "task", "general", False)  # asked of the person as the model's call would be
        (started,) = of(SubagentStarted, events)
        (result,) = [e for e in of(ToolOutput, events) if e.agent_id == agent.agent_id]
        assert result.content == "parser.py:12" and result.tool_call_id == started.tool_call_id
        assert main.calls == 0  # the main agent's model was not asked during the directed turn

        await drive(agent.stream("PARENT: where is it?"))
        await drive(agent.stream_command("find", "the lexer"))
        await drive(agent.stream("no model of its own", model=other.model))
        rejected = await drive(agent.stream("CHILD: never", agent_type="general"), decide=False)
        assert agent.turns.last_turn_rejected and not of(SubagentStarted, rejected)
        assert "The user rejected this call" in str(agent.history[-1].parts[0].content)  # type: ignore[union-attr]
        with pytest.raises(ValueError, match="unknown agent type 'nope'; the known types are explore, general"):
            await anext(agent.stream("x", agent_type="nope"))
        with pytest.raises(ConfigError, match="unknown command 'nope'; the commands are /find, /short"):
            await anext(agent.stream_command("nope"))
        # a person's text as the terminal and the notebook read it
        assert agent.read_prompt("/find the lexer") == ("Find where the lexer is defined.", "general", None)
        assert agent.read_prompt("/short it", reserved={"/short"}) == ("/short it", None, None)  # the surface's own
        assert agent.read_prompt("@explore the tests") == ("the tests", "explore", None)
        assert agent.read_prompt("mail me@explore.org") == ("mail me@explore.org", None, None)
        assert agent.read_prompt("/usr/bin is a path") == ("/usr/bin is a path", None, None)
        write(workdir / ".freeact-sub" / "commands" / "ghost.md", "---\nagent: nope\n---\nx\n")
        with pytest.raises(ConfigError, match=r"ghost\.md: agent: unknown agent type 'nope'; the known types are"):
            agent.stream_command("ghost")
        with pytest.raises(ConfigError, match=r"ghost\.md: agent: unknown agent type 'nope'"):
            agent.read_prompt("/ghost")

    # the main agent's next request holds the person's prompt, the call and the subagent's answer
    (request,) = main.requests
    sent = request
    assert isinstance(sent[0], ModelRequest)
    prompts = [str(p.content) for p in sent[0].parts if isinstance(p, UserPromptPart)]
    assert prompts[0].startswith("[The user started a subagent of type `general` directly")
    assert prompts[1] == "CHILD: find the parser"
    assert isinstance(sent[1], ModelResponse) and isinstance(call := sent[1].parts[0], ToolCallPart)
    assert call.tool_name == "task" and call.args_as_dict()["prompt"] == "CHILD: find the parser"
    assert isinstance(sent[2], ModelRequest)
    returned = [p for p in sent[2].parts if isinstance(p, ToolReturnPart)]
    assert [p.content for p in returned] == ["parser.py:12"]
    assert [p.content for p in sent[2].parts if isinstance(p, UserPromptPart)] == ["PARENT: where is it?"]
    # the command's body with $ARGUMENTS filled in was its subagent's prompt
    assert first_prompt(by_command.requests[0]) == "Find where the lexer is defined."
    # `model=` put that turn on the other model: it got the prompt, the usual model did not
    assert [p.content for p in other.requests[0][-1].parts if isinstance(p, UserPromptPart)] == ["no model of its own"]
    assert main.calls == 1

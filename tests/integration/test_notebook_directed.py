"""The notebook view takes `@type` prompts and the person's `/commands`, and a running subagent's panel has a
message box: driven in-process (`Button.click()` runs a browser click's handlers), real kernels, scripted models."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from pydantic_ai.messages import ModelMessage, ModelRequest, UserPromptPart

from freeact_sub import Agent, AgentConfig
from freeact_sub.notebook import AgentView
from tests.scripting import Block, Call, Router, Script, until

pytestmark = pytest.mark.timeout(120)



def prompts(messages: list[ModelMessage]) -> list[str]:
    return [str(p.content) for m in messages if isinstance(m, ModelRequest) for p in m.parts
            if isinstance(p, UserPromptPart)]


async def test_at_type_a_command_and_the_message_box_of_a_running_subagent(workdir: Path) -> None:
    commands = workdir / ".freeact-sub" / "commands"
    commands.mkdir(parents=True)
    (commands / "check.md").write_text("---\nagent: general\n---\n[sub-cmd] check $ARGUMENTS\n", encoding="utf-8")
    release = asyncio.Event()
    main = Script([Call("task", {"prompt": "[sub-bg] a long job", "run_in_background": True})], ["started it"])
    direct = Script(["found it at parser.py:12"])
    by_command = Script(["the lexer is fine"])
    background = Script([Block(release), Call("execute_ipython_cell", {"code": "print(1)"})], ["finished"])
    scripts = {"[The user started": main, "[sub-direct]": direct, "[sub-cmd]": by_command, "[sub-bg]": background}
    model = Router(scripts).model
    config = AgentConfig(model=model, working_dir=workdir, kernel_pool_size=0, auto_approve=True)
    async with Agent(config) as agent:
        view = AgentView(agent)
        await view.run("@general [sub-direct] find the parser")
        assert view.answer == "found it at parser.py:12"
        assert view.panel is not None and [p.agent_type for p in view.panel.panels.values() if p.subagent] == [
            "general"]
        await view.run("/check the lexer")
        assert view.answer == "the lexer is fine"
        assert prompts(by_command.requests[0])[0] == "[sub-cmd] check the lexer"

        await view.run("[main] start a background job")
        panel = view.panel
        (child,) = [p for p in panel.panels.values() if p.subagent]
        assert child.message_box is not None and panel.main.message_box is None  # only subagents get one
        child.message_text.value = "use the metric system"
        child.send_button.click()
        assert child.message_text.value == "" and child.send_note.value == ""
        await until(lambda: "→ message from you: use the metric system" in panel.static_text(),
                    "the message shown in the subagent's panel")
        release.set()
        await until(lambda: child.finished, "the background subagent to finish")
        assert child.message_text.disabled and child.send_button.disabled
        # an ended subagent keeps no message box and no Stop: they are gone, not greyed out
        assert child.message_box.layout.display == "none" and child.stop_button is not None
        assert child.stop_button.layout.display == "none"
        child.fold()  # folded and opened again, its message box stays gone
        child.fold(False)
        assert child.message_box.layout.display == "none" and child._body.layout.display is None
    told = [p for p in prompts(background.requests[-1]) if "metric" in p]  # the whole conversation, once
    assert told == ["[A message from the user, sent while you work:]\nuse the metric system"]

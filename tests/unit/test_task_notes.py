"""A `task` call waiting for approval says what it will start: type, title, limits, mode; never "None"."""

from __future__ import annotations

import io

from rich.console import Console

from freeact_sub import ApprovalRequest
from freeact_sub.notebook.call_view import _describe
from freeact_sub.subagents.task_notes import task_call_notes
from freeact_sub.terminal.palette import Palette
from freeact_sub.terminal.render import Renderer
from freeact_sub.terminal.status import SubagentBoard

AGENT = "agent-00c0"
TYPED = {
    "prompt": "Review the summary.",
    "subagent_type": "reviewer",
    "description": "Review  the summary",
    "max_turns": 1,
    "max_tokens": 20000,
    "run_in_background": True,
}


def test_a_typed_background_call_lists_its_settings_in_words() -> None:
    assert task_call_notes(TYPED) == [
        "reviewer", "“Review the summary”", "at most 1 turn", "at most 20,000 tokens", "in the background",
    ]


def test_a_picked_model_is_named() -> None:
    assert task_call_notes({"prompt": "p", "subagent_type": "explore", "model": "claude-haiku-4-5"}) == [
        "explore", "on claude-haiku-4-5",
    ]


def test_a_plain_call_has_no_notes_and_wrong_types_are_left_out() -> None:
    assert task_call_notes({"prompt": "p"}) == []
    assert task_call_notes({"prompt": "p", "subagent_type": "general", "max_turns": None, "fork": "yes"}) == []
    assert task_call_notes({"prompt": "p", "resume": "agent-1a2b", "fork": True, "max_tool_calls": 3}) == [
        "at most 3 tool calls", "continues agent-1a2b", "with a copy of this conversation",
    ]


def _terminal(arguments: dict) -> str:  # called from async tests: a request needs a running loop
    output = io.StringIO()
    palette = Palette()
    renderer = Renderer(Console(file=output, width=160), palette, SubagentBoard(palette), main_id=AGENT)
    renderer.show_request(ApprovalRequest(agent_id=AGENT, tool_name="task", tool_args=arguments, tool_call_id="t1"))
    return output.getvalue()


async def test_the_terminal_shows_a_task_calls_type_and_title_and_no_none() -> None:
    text = _terminal(TYPED)
    assert "reviewer · “Review the summary” · at most 1 turn" in text and "in the background" in text
    plain = _terminal({"prompt": "count primes"})
    assert "count primes" in plain and "None" not in plain and "max turns" not in plain


def test_the_notebook_shows_a_task_calls_type_and_title() -> None:
    html = _describe("task", TYPED)
    assert "reviewer · “Review the summary” · at most 1 turn" in html and "in the background" in html
    assert "(" not in _describe("task", {"prompt": "count primes"}).split("<pre")[0]

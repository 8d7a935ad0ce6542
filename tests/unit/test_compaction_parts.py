"""The parts of compaction that need no model or kernel: where history is cut, how a session file records a
compaction, the next request's estimate, and what the terminal, the notebook and the timeline show of one."""

from __future__ import annotations

import io
from pathlib import Path

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.usage import RequestUsage
from rich.console import Console

from freeact_sub import ApprovalPolicy, ContextCompacted
from freeact_sub.agent.compaction_text import compacted_request, cut_point, latest_prompt, summary_prompt
from freeact_sub.models.context import estimate_tokens
from freeact_sub.notebook.agent_panel import AgentPanel
from freeact_sub.sessions.transcript import TranscriptWriter, read_messages
from freeact_sub.terminal.palette import Palette
from freeact_sub.terminal.render import Renderer
from freeact_sub.terminal.status import SubagentBoard
from freeact_sub.timelines import TimelineBuilder

AGENT = "agent-c0c0"


def rounds(count: int, output: str = "x" * 400) -> list[ModelMessage]:
    """A first prompt, then `count` rounds of one cell call and its result."""
    messages: list[ModelMessage] = [ModelRequest(parts=[SystemPromptPart("sys"), UserPromptPart("do the thing")])]
    for i in range(count):
        messages.append(ModelResponse(parts=[ToolCallPart("execute_ipython_cell", {"code": f"a{i} = {i}"}, f"c{i}")],
                                      usage=RequestUsage(input_tokens=10, output_tokens=5)))
        messages.append(ModelRequest(parts=[ToolReturnPart("execute_ipython_cell", output, f"c{i}")]))
    return messages


def test_the_cut_keeps_whole_rounds_within_the_budget() -> None:
    messages = rounds(10)
    cut = cut_point(messages, keep_rounds=3, budget_tokens=10_000)
    assert cut == len(messages) - 6 and isinstance(messages[cut], ModelResponse)  # three rounds, calls with results
    assert cut_point(messages, keep_rounds=3, budget_tokens=150) == len(messages) - 2  # the budget holds one round
    assert cut_point(messages, keep_rounds=0, budget_tokens=10_000) == len(messages)  # keeps none
    # a huge last result: nothing kept verbatim, the summary takes it (clipped)
    messages[-1] = ModelRequest(parts=[ToolReturnPart("execute_ipython_cell", "y" * 100_000, "c9")])
    assert cut_point(messages, keep_rounds=3, budget_tokens=1_000) == len(messages)
    text = summary_prompt(messages, "a0  int  0", focus="the numbers", budget_tokens=2_000)
    assert len(text) < 2_000 * 4 + 500 and "characters cut" in text and "[user]\ndo the thing" in text
    assert "<kernel>\na0  int  0\n</kernel>" in text and text.endswith("Focus the summary on: the numbers")


def test_the_compacted_request_carries_the_prompt_when_it_was_summarized() -> None:
    messages = rounds(4)
    first = compacted_request(messages[0], "S", "a0 int", latest_prompt(messages),  # type: ignore[arg-type]
                              focus=None, continue_note=True, metadata={"prompt": "do the thing"})
    text = first.parts[-1].content
    assert isinstance(first.parts[0], SystemPromptPart) and "<summary>\nS\n</summary>" in str(text)
    assert "verbatim:\ndo the thing" in str(text) and "Continue the work" in str(text)
    assert latest_prompt([first, *messages[-2:]]) == "do the thing"  # a second compaction still knows it


def test_the_estimate_is_the_providers_count_or_the_text_whichever_is_larger() -> None:
    messages = rounds(3)
    text_only = estimate_tokens(messages, measured_from=len(messages))
    assert 300 < text_only < 400  # 1,200 characters of results and the calls' framing
    messages[-2] = ModelResponse(parts=messages[-2].parts, usage=RequestUsage(input_tokens=5_000, output_tokens=20))
    assert estimate_tokens(messages) == 5_020 + -(-len("x" * 400 + " " * 20) // 4)
    assert estimate_tokens(messages, measured_from=len(messages)) == text_only  # measured before a compaction
    # counted once per message: the cache gives what a fresh count gives as the history grows, loses its last
    # message, has it replaced, or starts over from a summary
    cache: dict = {}
    history = rounds(5)
    for change in range(5):
        assert estimate_tokens(history, cache=cache) == estimate_tokens(history)
        if change == 0:
            history += rounds(2)[1:]
        elif change == 1:
            history.pop()
        elif change == 2:
            history[-1] = ModelRequest(parts=[UserPromptPart("y" * 4_000)])
        else:
            history = [ModelRequest(parts=[UserPromptPart("summary")]), *history[-3:]]


def test_a_session_file_keeps_the_full_record_and_resumes_compacted(tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    messages = rounds(6)
    writer = TranscriptWriter(path)
    writer.sync(messages)
    summary = ModelRequest(parts=[UserPromptPart("[compacted] S")], metadata={"compaction": {"trigger": "auto"}})
    writer.compacted(messages, 2, summary)
    history = [summary, *messages[-2:]]
    history.append(ModelResponse(parts=[TextPart("done")]))
    writer.sync(history)
    history.pop()  # a rolled-back turn after the compaction: a `truncate` in the compacted history's terms
    writer.sync(history)
    history.append(ModelResponse(parts=[TextPart("again")]))
    writer.sync(history)
    writer.close()
    resumed, record = read_messages(path), read_messages(path, record=True)
    assert resumed == history
    assert record == [*messages[:-2], summary, *messages[-2:], history[-1]]


def test_the_terminal_the_notebook_and_the_timeline_show_a_compaction() -> None:
    event = ContextCompacted(agent_id=AGENT, trigger="overflow", tokens_before=151_204, tokens_after=9_812,
                             context_window=200_000, summary="<b>kept</b>", messages_summarized=212, messages_kept=4,
                             focus="the tables", started=100.0, at=103.0)
    output = io.StringIO()
    palette = Palette()
    Renderer(Console(file=output, width=200), palette, SubagentBoard(palette), main_id=AGENT).handle(event)
    assert ("context compacted (the provider refused a request as too long): 151,204 → 9,812 tokens · 212 messages "
            "summarized, 4 kept · focus: the tables") in output.getvalue()
    panel = AgentPanel(AGENT, policy=ApprovalPolicy())
    panel.handle(event)
    shown = " ".join(getattr(child, "value", "") for child in panel._body.children)
    assert "151,204 → 9,812 tokens" in shown and "&lt;b&gt;kept&lt;/b&gt;" in shown and "<b>" not in shown
    builder = TimelineBuilder()
    builder.add(event)
    spans = [s for lane in builder.build().lanes for s in lane.spans if s.state == "compacting"]
    assert [(s.start, s.end) for s in spans] == [(100.0, 103.0)] and "9,812 tokens" in spans[0].label

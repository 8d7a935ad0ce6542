"""Context compaction with a scripted model (`FunctionModel`) and real kernels.

One agent works through cells with big printed output under a small context window: it compacts
on its own (`auto`), the summary request gets the kernel's live names (`%whos`), the `PreCompact`
hook runs and its note joins the focus, no tool result is ever sent without its call, the event
says tokens before and after, and `Agent.compact(focus=…)` compacts between turns (a hook's `deny`
skips it). A child compacts its own history. The provider's real overflow errors over HTTP, and a
300-round session that resumes: `tests/e2e/test_compaction_e2e.py`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from pydantic_ai.exceptions import ModelContextWindowExceededError
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, SystemPromptPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel
from rich.console import Console

from freeact_sub import Agent, AgentConfig, ContextCompacted, SubagentFinished
from freeact_sub.agent.compaction_text import SUMMARY_SYSTEM_PROMPT
from freeact_sub.notebook import AgentView
from freeact_sub.sessions import open_session
from freeact_sub.terminal.session import Session
from freeact_sub.terminal.sessions_cmd import print_transcript
from tests.scripting import drive, of

CELL = "n = globals().get('n', 0) + 1\nrows_{i} = list(range(n))\nprint(n)\nprint('word ' * 400)"


class Worker:
    """A model that runs cells until the kernel's counter reaches `rounds`, then answers; it summarizes when asked
    (a request with the summary system prompt), and, with a `task` tool, first hands the job to a child."""

    def __init__(self, rounds: int, summary_limit: int | None = None) -> None:
        self.rounds = rounds
        self.summary_limit = summary_limit
        """A summary request longer than this (characters) is refused as overflowing the window."""
        self.refused = 0
        self.summary_requests: list[str] = []
        self.requests: list[list[ModelMessage]] = []
        self.model = FunctionModel(stream_function=self._stream, model_name="worker")

    def _stream(self, messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        first = messages[0].parts[0] if messages else None
        if isinstance(first, SystemPromptPart) and first.content == SUMMARY_SYSTEM_PROMPT:
            text = str(messages[0].parts[1].content)  # type: ignore[union-attr]
            if self.summary_limit is not None and len(text) > self.summary_limit:
                self.refused += 1
                raise ModelContextWindowExceededError(model_name="worker", message="prompt is too long")
            self.summary_requests.append(text)
            return _say(f"SUMMARY {len(self.summary_requests)}: cells ran; the counter n and rows_* hold the data.")
        self.requests.append(list(messages))
        tools = {t.name for t in info.function_tools}
        last = messages[-1]
        results = [p for p in last.parts if isinstance(p, ToolReturnPart)]
        if "task" in tools:  # the parent: hand it to a child, then pass on its answer
            if not results:
                return _call("task", {"prompt": f"CHILD: run {self.rounds} cells", "description": "cells"})
            return _say(f"The child said: {results[0].model_response_str()[:80]}")
        done = int(results[0].model_response_str().split()[0]) if results else 0
        if done >= self.rounds:
            return _say(f"done after {done} cells")
        return _call("execute_ipython_cell", {"code": CELL.format(i=done + 1)})


class _Lines:
    """The terminal's prompt reader, typing `lines`; then a moment for background events to show, then Ctrl-D."""

    def __init__(self, *lines: str) -> None:
        self.lines = list(lines)

    async def read(self) -> str:
        if self.lines:
            return self.lines.pop(0)
        await asyncio.sleep(0.3)
        raise EOFError


async def _say(text: str) -> AsyncIterator[Any]:
    yield text


async def _call(name: str, args: dict[str, Any]) -> AsyncIterator[Any]:
    yield {0: DeltaToolCall(name=name, json_args=json.dumps(args), tool_call_id=f"call-{name}-{id(args)}")}


def _pairs_intact(messages: list[ModelMessage]) -> bool:
    """Every tool result answers a call of the response right before it, and every call has its result."""
    for index, message in enumerate(messages):
        if isinstance(message, ModelRequest):
            returns = {p.tool_call_id for p in message.parts if isinstance(p, ToolReturnPart)}
            before = messages[index - 1] if index else None
            calls = {p.tool_call_id for p in before.parts if p.part_kind == "tool-call"} \
                if isinstance(before, ModelResponse) else set()
            if returns != calls:
                return False
    return True


def _config(model: Any, workdir: Path, **settings: Any) -> AgentConfig:
    return AgentConfig(model=model, working_dir=workdir, auto_approve=True, kernel_pool_size=0, mcp_pool_size=0,
                       context_window=4_000, compact_at=0.6, compact_keep_rounds=1, **settings)


async def test_an_agent_compacts_with_its_kernels_names_and_keeps_tool_pairs(tmp_path: Path) -> None:
    worker = Worker(rounds=12)
    moments: list[dict[str, Any]] = []

    def pre_compact(moment: dict[str, Any]) -> dict[str, Any] | None:
        moments.append(moment)
        if moment["focus"] == "skip me":
            return {"decision": "deny", "reason": "not now"}
        return {"note": "keep the counter"}

    config = _config(worker.model, tmp_path, enable_subagents=False, hooks={"PreCompact": [pre_compact]})
    async with Agent(config) as agent:
        events = await drive(agent.stream("count with cells"))
        compactions = of(ContextCompacted, events)
        assert compactions, "the agent never compacted"
        assert all(e.trigger == "auto" and e.tokens_after < e.tokens_before for e in compactions)
        assert all(e.context_window == 4_000 and e.focus == "keep the counter" for e in compactions)
        assert events[-1].content == "done after 12 cells"  # type: ignore[attr-defined]
        # the summary request had the kernel's live names and types, and the hook's note as its focus
        first = worker.summary_requests[0]
        assert "<kernel>" in first and "rows_1" in first and "list" in first
        assert "Focus the summary on: keep the counter" in first
        assert [m["trigger"] for m in moments] == ["auto"] * len(compactions)
        # no request ever sent a tool result without its call (or a call without its result)
        assert all(_pairs_intact(request) for request in worker.requests)
        # every request after the first compaction stayed under the window's share
        history = agent.history
        assert history[0].metadata["compaction"]["trigger"] == "auto"  # type: ignore[union-attr,index]
        assert "rows_" in str(history[0].parts[-1].content)  # type: ignore[union-attr]  # the names, verbatim
        # between turns: `/compact the rows` in the terminal (which calls `Agent.compact(focus=…)`); a hook's deny
        # skips one
        console = Console(record=True, width=200, force_terminal=False)
        await Session(agent, console, ask_keys=False).interactive(_Lines("/compact the rows"))  # type: ignore[arg-type]
        # shown once (issue 40, item 3: it came both as the call's result and as a background event)
        assert console.export_text(clear=False).count("context compacted (asked):") == 1
        assert "Focus the summary on: the rows; keep the counter" in worker.summary_requests[-1]
        assert agent.history[0].metadata["compaction"]["trigger"] == "manual"  # type: ignore[union-attr,index]
        assert await agent.compact(focus="skip me") is None
        assert moments[-1]["trigger"] == "manual" and moments[-1]["focus"] == "skip me"
        # in the notebook: a run, then `view.compact()`, shown in its own cell (test_notebook_compact.py)
        view = AgentView(agent)
        await view.run("one more cell")
        assert view.answer == "done after 13 cells"
        await view.compact("the notebook")
        assert view.compaction is not None and view.compaction.focus is not None
        # the kernel's variables survived every compaction
        rows = await agent.kernel.execute("print(len(rows_12), n)")  # type: ignore[union-attr]
        assert rows.text.split() == ["12", "13"]
        session = agent.session_id
    # the saved session keeps the full record for showing, and resumes from the compacted history
    saved = open_session(session, tmp_path)  # type: ignore[arg-type]
    record, resumed = saved.messages(record=True), saved.messages(repaired=True)
    assert len(record) > len(resumed) and resumed[0].metadata["compaction"]["trigger"] == "manual"  # type: ignore
    assert sum(1 for m in record if (m.metadata or {}).get("compaction")) == len(compactions) + 2
    shown = of(ContextCompacted, saved.events())
    assert [e.trigger for e in shown] == ["auto"] * len(compactions) + ["manual", "manual"]
    assert shown[0].tokens_before == compactions[0].tokens_before and shown[0].summary.startswith("SUMMARY 1")
    assert shown[0].context_window == 4_000 and shown[0].started == compactions[0].started
    print_transcript(console, saved, saved.main_id)  # `sessions show`
    assert console.export_text().count("context compacted (window nearly full)") == len(compactions)


async def test_a_child_compacts_its_own_history(tmp_path: Path) -> None:
    # its model's window is smaller than the child thinks: the first summary request overflows, and is sent once
    # more in a quarter of the room
    worker = Worker(rounds=8, summary_limit=4_000)
    async with Agent(_config(worker.model, tmp_path)) as agent:
        events = await drive(agent.stream("MAIN: delegate the counting"))
    finished = of(SubagentFinished, events)
    assert len(finished) == 1 and finished[0].status == "done"
    compactions = of(ContextCompacted, events)
    assert compactions and all(e.agent_id == finished[0].subagent_id for e in compactions)
    assert worker.refused >= 1 and len(worker.summary_requests) == len(compactions)
    assert all(len(text) <= 4_000 for text in worker.summary_requests)
    assert "done after 8 cells" in events[-1].content  # type: ignore[attr-defined]

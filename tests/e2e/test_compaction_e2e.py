"""A long session never overflows: 300 rounds of cells with big output against a scripted provider whose context
window refuses longer requests with its real error, over HTTP (OpenAI chat completions, then Anthropic messages).

The first run has no window configured and no automatic compaction: each compaction follows a
refused request (OpenAI's 400 `context_length_exceeded`), and the round is sent once more. The
session never fails, the kernel's variables survive every compaction, and the saved session
resumes from the compacted history, now over the Anthropic protocol with the window set and
`compact_at` on: it compacts before it would overflow, so the provider refuses nothing.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from freeact_sub import Agent, AgentConfig, ContextCompacted, ModelUsage
from freeact_sub.agent.compaction_text import SUMMARY_SYSTEM_PROMPT
from freeact_sub.demo import DemoServer
from freeact_sub.demo.faults import ContextLimit
from freeact_sub.demo.scenario import Reply, ToolCall
from freeact_sub.models.context import is_overflow
from freeact_sub.sessions import RESUME_NOTE, open_session
from tests.scripting import drive, of

WINDOW = 8_000
"""The provider's context window (tokens, as the demo server counts them: four characters of the messages' JSON)."""
CELL = "n = globals().get('n', 0) + 1\nseen = [*globals().get('seen', []), n]\nprint(n)\nprint('row ' * 250)"
"""A tiny cell with a big printed output (~1,000 characters)."""


def respond(request: Mapping[str, Any]) -> Reply:
    """Summaries when asked; otherwise a cell per round until the kernel's counter reaches the prompt's goal."""
    messages = request["messages"]
    if messages and messages[0].get("role") == "system" and messages[0].get("content") == SUMMARY_SYSTEM_PROMPT:
        return Reply(text="The agent ran counting cells; `n` counts them and `seen` lists them.")
    goals = [int(found) for m in messages if m.get("role") == "user"
             for found in re.findall(r"[Cc]ount to (\d+)", str(m.get("content")))]
    goal = goals[-1]
    results = [str(m.get("content")) for m in messages if m.get("role") == "tool"]
    done = int(results[-1].split()[0]) if results and messages[-1].get("role") == "tool" else 0
    if done >= goal:
        return Reply(text=f"Counted to {done}.")
    return Reply(tool_calls=(ToolCall("execute_ipython_cell", {"code": CELL}),))


def _config(server: DemoServer, workdir: Path, wire: str, **settings: Any) -> AgentConfig:
    model = "openai:scripted" if wire == "openai" else "anthropic:claude-demo"
    return AgentConfig(model=model, base_url=server.base_url_for(wire), working_dir=workdir, auto_approve=True,
                       enable_subagents=False, kernel_pool_size=0, mcp_pool_size=0, compact_keep_rounds=2,
                       system_prompt="You count with cells.", **settings)


async def test_300_rounds_never_overflow_and_resume_from_the_compacted_history(tmp_path: Path) -> None:
    limit = ContextLimit(WINDOW)
    with DemoServer(responder=respond, chunk_delay=0, faults=limit).start() as server:
        began = time.monotonic()
        async with Agent(_config(server, tmp_path, "openai", compact_at=None)) as agent:
            events = await drive(agent.stream("Count to 300 with cells."), limit=300)
            compactions = of(ContextCompacted, events)
            assert events[-1].content == "Counted to 300."  # type: ignore[attr-defined]
            assert compactions and all(e.trigger == "overflow" for e in compactions)
            assert limit.refused == len(compactions)  # each refusal: one compaction, and the round went through
            check = await agent.kernel.execute("print(n, len(seen), seen == list(range(1, 301)))")  # type: ignore
            assert check.text.split() == ["300", "300", "True"]
            session, final = agent.session_id, agent.history
            usage = of(ModelUsage, events)
        first_run = time.monotonic() - began
        saved = open_session(session, tmp_path)  # type: ignore[arg-type]
        record, history = saved.messages(record=True), saved.messages(repaired=True)
        assert len(record) > 600 and len(history) == len(final) < 60  # the full record; the model's short history
        assert history[0].metadata["compaction"]["trigger"] == "overflow"  # type: ignore[index]
        # resumed over the other protocol, with the window set: compacts before it overflows
        refused = limit.refused
        async with Agent(_config(server, tmp_path, "anthropic", context_window=WINDOW, compact_at=0.7),
                         session=session) as resumed:
            more = await drive(resumed.stream("Now count to 20."), limit=60)
        first = server.requests_by_protocol["anthropic"][0]
        assert "The agent ran counting cells" in str(first["messages"][0]["content"])  # the compacted history
        assert RESUME_NOTE in str(first["messages"])
        assert more[-1].content == "Counted to 20."  # type: ignore[attr-defined]  # a new kernel counts anew
        assert of(ContextCompacted, more) and all(e.trigger == "auto" for e in of(ContextCompacted, more))
        assert limit.refused == refused and limit.largest <= WINDOW
    sizes = [(e.tokens_before, e.tokens_after) for e in compactions[:3]]
    print(f"\n300 rounds: {first_run:.1f} s, {len(compactions)} compactions, {len(usage)} responses; largest request "
          f"{limit.largest} tokens; tokens before/after: {sizes}")


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
async def test_the_providers_real_overflow_errors_read_as_overflow(tmp_path: Path, wire: str) -> None:
    """OpenAI's 400 `context_length_exceeded` and Anthropic's 400 "prompt is too long", as the demo server sends them,
    reach us as pydantic-ai's `ModelContextWindowExceededError` (what triggers a compaction and one retry)."""
    from pydantic_ai.direct import model_request
    from pydantic_ai.exceptions import ModelHTTPError
    from pydantic_ai.messages import ModelRequest

    limit = ContextLimit(10)
    with DemoServer(responder=respond, chunk_delay=0, faults=limit).start() as server:
        model = _config(server, tmp_path, wire).resolve_model()
        with pytest.raises(ModelHTTPError) as raised:
            await model_request(model, [ModelRequest.user_text_prompt("Count to 100. " * 20)])
    assert raised.value.status_code == 400 and is_overflow(raised.value) and limit.refused == 1
    assert ("context_length_exceeded" if wire == "openai" else "prompt is too long") in str(raised.value.body)

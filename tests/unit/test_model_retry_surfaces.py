"""Retries of model requests, apart from a running agent: what is retried and how long it waits, the settings
(config, environment, flag, agent type), and what the terminal, the notebook panel and the timeline show."""

from __future__ import annotations

import io
import json
import random
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic_ai.exceptions import (
    ModelAPIError,
    ModelAuthenticationError,
    ModelConnectionError,
    ModelHTTPError,
    ModelOverloadedError,
    ModelQuotaExceededError,
    ModelRateLimitError,
    ModelRequestRejectedError,
    ModelServerError,
)
from rich.console import Console

from freeact_sub import AgentConfig, ApprovalPolicy, ModelRetry, ModelSlot, Response, ResponseChunk, TurnStarted
from freeact_sub.config.agent_types import configure
from freeact_sub.config.definitions import AgentType
from freeact_sub.launch import build_config
from freeact_sub.models.retries import MAX_BACKOFF, StreamIdle, backoff, retry_reason
from freeact_sub.notebook.agent_panel import AgentPanel
from freeact_sub.terminal.arguments import build_parser
from freeact_sub.terminal.palette import Palette
from freeact_sub.terminal.render import Renderer
from freeact_sub.terminal.status import SubagentBoard, usage_report
from freeact_sub.timelines import TimelineBuilder
from freeact_sub.usage import TreeUsage, Usage
from tests.scripting import no_freeact_sub_environment

AGENT = "agent-00c0"
CHILD = "agent-0c01"

# -- what is retried -------------------------------------------------------------------------------------------


def _malformed() -> ModelAPIError:
    error = ModelAPIError("m", "Failed to decode response as JSON")
    try:
        json.loads("{not json")
    except json.JSONDecodeError as exc:
        error.__cause__ = exc
    return error


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (ModelRateLimitError("m", "slow down"), "rate limited"),
        (ModelOverloadedError("m", "Overloaded"), "overloaded"),
        (ModelServerError("m", "boom"), "server error"),
        (ModelHTTPError(408, "m"), "server error 408"),
        (ModelHTTPError(409, "m"), "server error 409"),
        (ModelHTTPError(599, "m"), "server error 599"),
        (ModelConnectionError("m", "peer closed", phase="read"), "stream dropped"),
        (ModelConnectionError("m", "refused", phase="connect"), "connection failed"),
        (StreamIdle(300), "silent for 300 s"),
        (_malformed(), "malformed stream"),
        (ModelQuotaExceededError("m", "insufficient_quota"), None),
        (ModelRequestRejectedError("m", "bad request"), None),
        (ModelAuthenticationError("m", "bad key"), None),
        (ModelHTTPError(404, "m"), None),
        (ModelAPIError("m", "something else"), None),
        (ValueError("a bug of ours"), None),
    ],
)
def test_what_is_retried_and_why(error: BaseException, reason: str | None) -> None:
    assert retry_reason(error) == reason


def test_backoff_doubles_with_jitter_up_to_its_cap_and_honours_retry_after() -> None:
    rng = random.Random(1)
    for retry in range(1, 12):
        full = min(MAX_BACKOFF, 1.0 * 2 ** (retry - 1))
        wait = backoff(retry, 1.0, None, rng=rng)
        assert full / 2 <= wait <= full
    for _ in range(50):
        assert 4.0 <= backoff(3, 1.0, 4.0, rng=rng) <= 4.8  # the provider's wait, plus up to a fifth
    assert backoff(1, 1.0, 0.0, rng=rng) == 0.0


# -- where it is set -------------------------------------------------------------------------------------------


@pytest.fixture
def clean_environment() -> Iterator[None]:
    with no_freeact_sub_environment():
        yield


def test_defaults_and_every_layer_sets_the_retry_fields(tmp_path: Path, clean_environment: None) -> None:
    config = AgentConfig()
    assert (config.model_retries, config.model_retry_backoff, config.stream_idle_timeout,
            config.max_model_requests) == (5, 0.5, 300.0, 8)
    config_file = tmp_path / "freeact.toml"
    config_file.write_text("model_retries = 9\nmax_model_requests = 3\nstream_idle_timeout = 60\n")
    loaded = AgentConfig.load(config_file)
    assert (loaded.model_retries, loaded.max_model_requests, loaded.stream_idle_timeout) == (9, 3, 60.0)
    loaded = AgentConfig.load(config_file, environ={"FREEACT_SUB_MAX_MODEL_REQUESTS": "none",
                                                    "FREEACT_SUB_MODEL_RETRIES": "2"})
    assert (loaded.model_retries, loaded.max_model_requests) == (2, None)
    args = build_parser().parse_args(["--model-retries", "0", "--max-model-requests", "4",
                                      "--stream-idle-timeout", "30", "--config", str(config_file)])
    flagged = build_config(args, tmp_path, None)
    assert (flagged.model_retries, flagged.max_model_requests, flagged.stream_idle_timeout) == (0, 4, 30.0)
    with pytest.raises(Exception, match="model_retries"):
        AgentConfig(model_retries=-1)


def test_an_agent_type_sets_its_own_retries_and_idle_timeout() -> None:
    base = AgentConfig(model_retries=2)
    cheap = AgentType.model_validate({"description": "cheap", "modelRetries": 10, "streamIdleTimeout": 45})
    configured = configure(base, cheap, "cheap")
    assert (configured.model_retries, configured.stream_idle_timeout) == (10, 45.0)
    plain = configure(base, AgentType(description="plain"), "plain")
    assert (plain.model_retries, plain.stream_idle_timeout) == (2, 300.0)


# -- what a person sees ----------------------------------------------------------------------------------------


def retry(agent: str = AGENT, *, attempt: int = 2, wait: float = 4.0, discarded: bool = True) -> ModelRetry:
    return ModelRetry(agent_id=agent, attempt=attempt, attempts=6, wait=wait, reason="rate limited",
                      message="Rate limit reached for requests", discarded=discarded)


def test_the_terminal_drops_the_partial_response_and_says_when_it_retries() -> None:
    output = io.StringIO()
    palette = Palette()
    board = SubagentBoard(palette)
    renderer = Renderer(Console(file=output, width=160), palette, board, main_id=AGENT)
    renderer.handle(TurnStarted(agent_id=AGENT, turn=1))
    renderer.handle(ResponseChunk(agent_id=AGENT, content="Half an ans"))
    renderer.handle(retry())
    assert renderer.partials() == []  # the cut text is gone from the live view: never shown twice
    renderer.handle(ResponseChunk(agent_id=AGENT, content="The whole answer."))
    renderer.handle(Response(agent_id=AGENT, content="The whole answer.", final=True))
    text = output.getvalue()
    assert "retrying in 4 s · attempt 2/6 · rate limited" in text and "Rate limit reached" in text
    assert "Half an ans" not in text and text.count("The whole answer.") == 1


def test_the_live_table_counts_down_a_childs_retry_and_a_wait_for_a_model_slot() -> None:
    palette = Palette()
    board = SubagentBoard(palette)
    renderer = Renderer(Console(file=io.StringIO(), width=160), palette, board, main_id=AGENT)
    board.started(CHILD, 5, parent_id=AGENT)
    renderer.handle(retry(CHILD, wait=30))
    table = io.StringIO()
    Console(file=table, width=200).print(board.render())
    assert "retrying in 30 s · attempt 2/6 · rate limited" in table.getvalue()
    renderer.handle(ModelSlot(agent_id=CHILD, waiting=True, limit=8))
    table = io.StringIO()
    Console(file=table, width=200).print(board.render())
    assert "waiting for a model slot" in table.getvalue()
    board.retrying(CHILD, time.time() - 1, "attempt 3/6 · overloaded")  # its wait is over: it thinks again
    table = io.StringIO()
    Console(file=table, width=200).print(board.render())
    assert "thinking" in table.getvalue() and "retrying" not in table.getvalue()


def test_usage_counts_retries() -> None:
    usage = TreeUsage({AGENT: Usage(requests=3, retries=2), CHILD: Usage(requests=1, retries=1)})
    assert usage.total.retries == 3
    assert "usage: 4 model requests (3 retries)" in usage_report(usage, AGENT)


def test_the_notebook_header_shows_the_retry_and_the_partial_text_is_dropped() -> None:
    panel = AgentPanel(AGENT, policy=ApprovalPolicy())
    panel.handle(ResponseChunk(agent_id=AGENT, content="Half an ans"))
    panel.handle(retry(wait=30))
    header = panel._header.value
    assert "retrying in 30 s · attempt 2/6 · rate limited" in header and "1 retry" in header
    assert all("Half an ans" not in getattr(child, "value", "") for child in panel._body.children)
    panel.handle(ResponseChunk(agent_id=AGENT, content="Whole."))
    panel.handle(Response(agent_id=AGENT, content="Whole.", final=True))
    shown = " ".join(getattr(child, "value", "") for child in panel._body.children)
    assert shown.count("Whole.") == 1
    panel.handle(ModelSlot(agent_id=AGENT, waiting=True, limit=8))
    assert "waiting for a model slot (8 in flight)" in panel._header.value
    panel.handle(ModelSlot(agent_id=AGENT, waiting=False, limit=8, waited=1.0))
    assert "model slot" not in panel._header.value


def test_the_timeline_shows_a_retry_and_a_wait_for_a_model_slot_as_their_own_states() -> None:
    builder = TimelineBuilder()
    now = time.time()
    builder.add(TurnStarted(agent_id=AGENT, turn=1, at=now))
    builder.add(ModelSlot(agent_id=AGENT, waiting=True, limit=2, at=now + 1))
    builder.add(ModelSlot(agent_id=AGENT, waiting=False, limit=2, waited=1, at=now + 2))
    builder.add(ModelRetry(agent_id=AGENT, attempt=2, attempts=6, wait=3, reason="overloaded", at=now + 2.5))
    builder.add(Response(agent_id=AGENT, content="ok", final=True, at=now + 6))
    lane = builder.build().lane(AGENT)
    spans = [(s.state, round(s.start - now, 1), round((s.end or 0) - now, 1)) for s in lane.spans]
    assert spans == [("thinking", 0, 1), ("waiting_for_model", 1, 2), ("thinking", 2, 2.5), ("retrying", 2.5, 5.5),
                     ("thinking", 5.5, 6)]
    assert lane.spans[3].label == "attempt 2/6 · overloaded"


def test_the_docs_retry_example_builds_the_config_it_describes() -> None:
    import re

    page = (Path(__file__).resolve().parents[2] / "docs" / "models.md").read_text(encoding="utf-8")
    (block,) = [b for b in re.findall(r"```python\n(.*?)```", page, flags=re.S) if "model_retries=4" in b]
    scope: dict[str, object] = {}
    exec(block, scope)
    config = scope["config"]
    assert isinstance(config, AgentConfig)
    assert (config.model_retries, config.max_model_requests) == (4, 6)
    scout = configure(config, config.agents["scout"], "scout")
    assert scout.model_retries == 10 and scout.model == "openai:gpt-4.1-mini"


def test_a_replayed_retry_counts_but_shows_no_countdown() -> None:
    """A reopened notebook replays a saved session: its retries are counted, not shown as still waiting."""
    panel = AgentPanel(AGENT, policy=ApprovalPolicy())
    panel.handle(ModelRetry(agent_id=AGENT, attempt=2, attempts=6, wait=4, reason="overloaded", at=time.time() - 3600))
    assert "retrying" not in panel._header.value and "1 retry" in panel._header.value

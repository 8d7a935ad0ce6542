"""Small things a person meets in the terminal: messages, a flag's position, unknown commands."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from pydantic_ai.messages import ModelResponse, TextPart
from pydantic_ai.usage import RequestUsage
from rich.console import Console

from freeact_sub import Agent, AgentConfig, ConfigError
from freeact_sub.terminal.session import Session
from freeact_sub.terminal.sessions_cmd import build_parser
from freeact_sub.terminal.status import usage_report
from freeact_sub.usage import UsageLedger


def test_a_missing_provider_key_names_the_variable_and_the_flag_not_library_code(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigError) as caught:
        AgentConfig(model="openai:gpt-4.1").resolve_model()
    message = str(caught.value)
    assert "OPENAI_API_KEY" in message and "--api-key-env" in message
    assert "OpenAIProvider" not in message and "api_key=" not in message


@pytest.mark.parametrize("argv", [["--working-dir", "X", "list"], ["list", "--working-dir", "X"],
                                  ["show", "abc", "--working-dir", "X"]])
def test_sessions_working_dir_is_taken_before_or_after_the_subcommand(argv: list[str]) -> None:
    assert build_parser().parse_args(argv).working_dir == "X"


def test_one_model_request_is_said_in_the_singular() -> None:
    ledger = UsageLedger()
    response = ModelResponse(parts=[TextPart("hi")], usage=RequestUsage(input_tokens=3, output_tokens=2))
    ledger.record("agent-main", response)
    report = usage_report(ledger.snapshot(), "agent-main")
    assert "1 model request," in report and "1 model requests" not in report


def test_an_unknown_slash_command_is_not_sent_to_the_model_and_the_commands_are_listed(tmp_path: Path) -> None:
    out = io.StringIO()
    session = Session(Agent(AgentConfig(model="test", working_dir=tmp_path)), Console(file=out, width=120),
                      ask_keys=False)
    assert session.command("/agnets") is True  # handled here: nothing goes to the model
    assert "Unknown command /agnets" in out.getvalue() and "/agents" in out.getvalue()
    assert session.command("/help") is True and "/stop AGENT-ID" in out.getvalue()
    assert session.command("/etc/hosts has what in it?") is False  # a path is a prompt
    assert session.command("what is 2+2?") is False


def test_the_live_tables_total_counts_the_main_agent_and_narrow_terminals_keep_ids_whole() -> None:
    from decimal import Decimal

    from freeact_sub.terminal.palette import Palette
    from freeact_sub.terminal.status import SubagentBoard

    board = SubagentBoard(Palette())
    board.started("agent-c5f1", 4, model="a-model-with-a-rather-long-name")
    board.set_state("agent-c5f1", "waiting for approval")
    board.usage("agent-main", 1000, Decimal("0.01"))  # the main agent has no row
    board.usage("agent-c5f1", 200, Decimal("0.002"))
    out = io.StringIO()
    Console(file=out, width=70).print(board.render())
    lines = out.getvalue().splitlines()
    assert "agent-c5f1" in out.getvalue()  # never cut to agent-c5…
    total = next(line for line in lines if line.startswith("total"))
    assert "1,200" in total and "$0.0120" in total
    assert len(lines) == 3, lines  # header, one row, total: nothing wrapped over lines
    assert "waiting for approval" in lines[1] and "a-model" not in lines[1]  # the model gives way to the state
    assert "1,200" in lines[2]


async def test_a_background_question_left_open_by_a_turn_is_asked_again_above_the_prompt(tmp_path: Path) -> None:
    from freeact_sub import ApprovalRequest
    from freeact_sub.terminal.session import TurnOutcome

    out = io.StringIO()
    session = Session(Agent(AgentConfig(model="test", working_dir=tmp_path)), Console(file=out, width=160),
                      ask_keys=False)
    question = ApprovalRequest(agent_id="agent-bg01", tool_name="execute_ipython_cell",
                               tool_args={"code": "print('from the background')"}, tool_call_id="c1")
    session.desk.submit(question)  # it came in during the turn, and nobody answered it
    shown_during_the_turn = out.getvalue().count("from the background")
    session.after_turn(TurnOutcome("done", "the answer", None))
    after = out.getvalue()
    assert after.count("from the background") == shown_during_the_turn + 1  # shown again, with its code
    assert "agent-bg01 waits for your answer: /y approves" in after

"""The session store on its own: transcripts, the index, the lock, damaged files, histories a model accepts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.usage import RequestUsage

from freeact_sub import SessionError
from freeact_sub.sessions import (
    INTERRUPTED_RESULT,
    SessionStore,
    TranscriptWarning,
    list_sessions,
    open_session,
)
from freeact_sub.sessions.store import new_session_id
from freeact_sub.sessions.transcript import read_messages, valid_for_model


def prompt(text: str) -> ModelRequest:
    return ModelRequest(parts=[UserPromptPart(text)])


def call(call_id: str, code: str = "print(1)") -> ModelResponse:
    return ModelResponse(parts=[ToolCallPart("execute_ipython_cell", {"code": code}, call_id)],
                         usage=RequestUsage(input_tokens=10, output_tokens=3))


def result(call_id: str, text: str = "1") -> ModelRequest:
    return ModelRequest(parts=[ToolReturnPart("execute_ipython_cell", text, call_id)])


def answer(text: str) -> ModelResponse:
    return ModelResponse(parts=[TextPart(text)], usage=RequestUsage(input_tokens=20, output_tokens=5))


def same(a: list[ModelMessage], b: list[ModelMessage]) -> bool:
    return ModelMessagesTypeAdapter.dump_json(a) == ModelMessagesTypeAdapter.dump_json(b)


def test_history_written_as_it_grows_reads_back_equal(tmp_path: Path) -> None:
    store = SessionStore.create(tmp_path)
    log = store.agent("agent-main", model="openai:gpt-4.1")
    history: list[ModelMessage] = [ModelRequest(parts=[SystemPromptPart("sys"), UserPromptPart("hi")])]
    history.append(call("c1"))
    log.sync(history)
    history.append(result("c1"))
    log.sync(history)
    history.append(answer("done"))
    log.sync(history)
    log.sync(history)  # nothing new: nothing written
    store.close()
    path = store.path / "agent-main.jsonl"
    assert len(path.read_bytes().splitlines()) == 4
    assert same(read_messages(path), history)
    saved = open_session(store.session_id, tmp_path)
    assert saved.agents["agent-main"].model == "openai:gpt-4.1"
    assert (saved.agents["agent-main"].input_tokens, saved.agents["agent-main"].output_tokens) == (30, 8)
    assert same(saved.messages(), history)


def test_rollback_and_a_grown_last_request_replay_to_the_agents_history(tmp_path: Path) -> None:
    store = SessionStore.create(tmp_path)
    log = store.agent("agent-main")
    history: list[ModelMessage] = [prompt("one"), call("c1"), result("c1")]
    log.sync(history)
    history[-1] = ModelRequest(parts=[*history[-1].parts, UserPromptPart("two")])  # the next prompt joins it
    log.sync(history)
    before = list(history)
    history += [call("c2"), result("c2")]
    log.sync(history)
    history = before  # a failed model request rolled the turn back
    log.sync(history)
    history = [*history, answer("ok")]
    log.sync(history)
    store.close()
    assert same(read_messages(store.path / "agent-main.jsonl"), history)


def torn_transcript(tmp_path: Path) -> tuple[SessionStore, Path, list[ModelMessage]]:
    """A saved session whose main transcript ends in half a line (the writer was killed mid-line)."""
    store = SessionStore.create(tmp_path)
    log = store.agent("agent-main")
    history: list[ModelMessage] = [prompt("one"), answer("first")]
    log.sync(history)
    store.close()
    path = store.path / "agent-main.jsonl"
    with path.open("ab") as handle:
        handle.write(b'{"parts":[{"content":"half a mess')  # SIGKILL while writing
    return store, path, history


def test_partial_last_line_is_skipped_with_a_warning(tmp_path: Path) -> None:
    _, path, history = torn_transcript(tmp_path)
    with pytest.warns(TranscriptWarning, match="partial last line"):
        messages = read_messages(path)
    assert same(messages, history)


def test_corrupted_line_is_skipped_and_the_history_stays_valid(tmp_path: Path) -> None:
    store = SessionStore.create(tmp_path)
    log = store.agent("agent-main")
    log.sync([prompt("one"), call("c1"), result("c1"), answer("done")])
    store.close()
    path = store.path / "agent-main.jsonl"
    lines = path.read_bytes().splitlines()
    lines[1] = b'{"kind":"response","parts":[{"garbage'  # the tool call's line is damaged
    path.write_bytes(b"\n".join(lines) + b"\n")
    with pytest.warns(TranscriptWarning, match="line 2"):
        messages = read_messages(path)
    assert len(messages) == 3
    repaired = valid_for_model(messages)
    # the orphaned result is dropped: what remains is a prompt and an answer
    assert [m.kind for m in repaired] == ["request", "response"]
    assert not any(isinstance(p, ToolReturnPart) for m in repaired for p in m.parts)


def test_calls_without_results_get_an_interrupted_result() -> None:
    two_calls = ModelResponse(parts=[ToolCallPart("execute_ipython_cell", {"code": "1"}, "a"),
                                     ToolCallPart("task", {"prompt": "x"}, "b")])
    repaired = valid_for_model([prompt("go"), two_calls])
    assert isinstance(repaired[-1], ModelRequest)
    results = {p.tool_call_id: p for p in repaired[-1].parts if isinstance(p, ToolReturnPart)}
    assert set(results) == {"a", "b"} and results["b"].tool_name == "task"
    assert results["a"].content == INTERRUPTED_RESULT
    # a later user prompt follows the results in the same request
    repaired = valid_for_model([prompt("go"), two_calls, prompt("again")])
    assert [p.part_kind for p in repaired[-1].parts] == ["tool-return", "tool-return", "user-prompt"]


def test_a_complete_history_is_kept_as_it_is() -> None:
    history: list[ModelMessage] = [prompt("go"), call("c1"), result("c1"), answer("done")]
    repaired = valid_for_model(history)
    assert all(a is b for a, b in zip(repaired, history, strict=True))


def test_a_second_process_is_refused_with_a_clear_message(tmp_path: Path) -> None:
    store = SessionStore.create(tmp_path)
    store.agent("agent-main").prompt("hello")
    script = (
        "import sys\nfrom freeact_sub.sessions import SessionStore\n"
        "try:\n    SessionStore.open(sys.argv[1], sys.argv[2])\n"
        "except Exception as exc:\n    print(type(exc).__name__, exc)\n"
    )
    try:
        out = subprocess.run([sys.executable, "-c", script, str(tmp_path), store.session_id],
                             capture_output=True, text=True, timeout=60).stdout
        assert "SessionError" in out and "in use by another process" in out and str(os.getpid()) in out
        with pytest.raises(SessionError, match="in use"):  # also a second writer in this process
            SessionStore.open(tmp_path, store.session_id)
        assert open_session(store.session_id, tmp_path).in_use
    finally:
        store.close()
    reopened = SessionStore.open(tmp_path, store.session_id)  # free again once released
    reopened.close()


def test_listing_marks_an_abandoned_run_as_interrupted(tmp_path: Path) -> None:
    store = SessionStore.create(tmp_path)
    log = store.agent("agent-main")
    log.prompt("first question")
    log.status("running")
    child = log.child("agent-kid", tool_call_id="c1", prompt="sub job")
    child.status("done", turns=2, ended=True)
    store.close()  # without a final status: as if the process had died
    [saved] = list_sessions(tmp_path)
    assert saved.first_prompt == "first question"
    assert saved.agents["agent-main"].status == "interrupted"
    assert saved.agents["agent-kid"].status == "done"
    assert [a.agent_id for a in saved.children()] == ["agent-kid"]
    assert saved.children("agent-main")[0].tool_call_id == "c1"


def test_missing_session_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(SessionError, match="no saved session"):
        open_session("latest", tmp_path)
    with pytest.raises(SessionError, match="no session 'nope'"):
        open_session("nope", tmp_path)


def test_a_saved_child_resumes_in_another_process_and_continues_its_own_transcript(tmp_path: Path) -> None:
    store = SessionStore.create(tmp_path)
    main = store.agent("agent-main")
    kid = main.child("agent-kid", tool_call_id="task-1", prompt="sub job")
    kid_history: list[ModelMessage] = [prompt("sub job"), call("c1"), result("c1"), answer("done")]
    kid.sync(kid_history)
    kid.status("done", turns=2, ended=True)
    store.close()

    store = SessionStore.open(tmp_path, store.session_id)  # a new process, say
    main, _ = store.resume_agent("agent-main")
    assert main.saved_child("agent-other") is None and not main.has_saved_child("agent-other")
    history = main.saved_child("agent-kid")
    assert history is not None and same(history, kid_history)
    kid = main.resume_child("agent-kid")
    copy = read_messages(store.path / "agent-kid.jsonl")  # equal messages, other objects
    kid.sync([*copy, prompt("more"), answer("more done")])
    store.close()
    lines = (store.path / "agent-kid.jsonl").read_bytes().splitlines()
    assert len(lines) == 6 and not any(b"truncate" in line for line in lines)  # appended, nothing rewritten
    saved = open_session(store.session_id, tmp_path)
    assert saved.agents["agent-kid"].status == "interrupted"  # it ran again, and nobody said how it ended
    assert len(saved.messages("agent-kid")) == 6


def test_a_new_session_that_got_no_prompt_is_removed_when_it_closes(tmp_path: Path) -> None:
    store = SessionStore.create(tmp_path)
    store.agent("agent-main").status("running")
    store.close()
    assert not store.path.exists() and list_sessions(tmp_path) == []


def test_a_message_is_written_exactly_as_pydantic_ais_list_adapter_writes_it() -> None:
    from pydantic_ai.messages import (
        ModelMessagesTypeAdapter,
        ModelRequest,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )
    from pydantic_ai.usage import RequestUsage

    from freeact_sub.sessions.transcript import dump_message

    messages = [
        ModelRequest(parts=[UserPromptPart("count primes")], instructions="be brief"),
        ModelResponse(
            parts=[TextPart("ok"), ToolCallPart("execute_ipython_cell", {"code": "x = 1"}, tool_call_id="c1")],
            usage=RequestUsage(input_tokens=12, output_tokens=5),
            model_name="m",
        ),
        ModelRequest(parts=[ToolReturnPart("execute_ipython_cell", "done", tool_call_id="c1")]),
    ]
    for message in messages:
        assert dump_message(message) == bytes(ModelMessagesTypeAdapter.dump_json([message]))[1:-1]


def test_a_writer_after_a_torn_last_line_drops_it_so_later_resumes_read_clean(tmp_path: Path) -> None:
    import warnings

    store, path, _ = torn_transcript(tmp_path)

    store = SessionStore.open(tmp_path, store.session_id)  # the next process resumes
    with pytest.warns(TranscriptWarning, match="partial last line"):
        log, saved = store.resume_agent("agent-main")
    grown = [*saved, prompt("two"), answer("second")]
    log.sync(grown)
    store.close()

    with warnings.catch_warnings():
        warnings.simplefilter("error", TranscriptWarning)  # no "skipped line" on any later load
        messages = read_messages(path)
    assert [m.kind for m in messages] == ["request", "response", "request", "response"]
    assert [p.content for m in messages if m.kind == "response" for p in m.parts] == ["first", "second"]
    prompts = [p.content for m in messages for p in m.parts if isinstance(p, UserPromptPart)]
    assert prompts == ["one", "two"]  # the new prompt is there, once


def test_a_session_made_before_its_agent_resumes_empty_under_a_new_main_agent(tmp_path: Path) -> None:
    """ACP's `session/new` makes the session on disk before its agent starts; a process that ends in between
    leaves a session with no agent, which a client may load all the same (it was handed its id)."""
    from freeact_sub.agent.conversation import saved_main_agent

    session_id = new_session_id()
    made = SessionStore.create(tmp_path, session_id)
    made.mark_used()
    made.close()
    resumed_id, main, history = saved_main_agent(session_id, tmp_path, None)
    assert resumed_id == session_id and main.startswith("agent-") and history == []
    store = SessionStore.open(tmp_path, session_id)
    log, saved = store.resume_agent(main)
    assert saved == [] and log is not None
    store.close()
    assert open_session(session_id, tmp_path).main_id == main  # from now on it is an ordinary session
    store = SessionStore.open(tmp_path, session_id)
    with pytest.raises(SessionError, match="has no agent agent-other"):  # a session with a main agent is checked
        store.resume_agent("agent-other")
    store.close()

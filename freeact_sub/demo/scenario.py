"""The scripted demo model: what it answers, decided from the request alone.

The model keeps no state between requests, so one server can answer a main agent and its
subagents at the same time. It reads the OpenAI chat-completions request:

- an agent offered the `task` tool is the main agent; one without it is a subagent;
- the prompt that matters is the last `user` message, and the step is the number of
  `assistant` messages after it (each step is one model round of the current turn);
- the tool results after that prompt are what the earlier steps produced.

Main agent scripts, chosen by words in the user's prompt:

- anything (the tour), one model round per step:

  1. run a cell that draws a small PNG;
  2. run a cell whose code calls the demo MCP server's `constant` tool as a Python function in a
     loop (`from mcptools.demo import constant`), each call approved on its own (skipped when
     MCP tools are not offered in the kernel, `mcp_tools="calls"`);
  3. start subagents in parallel, in one response: one counts primes, one estimates π and asks
     the demo MCP server for the reference value, and, when the `reviewer` agent type is
     offered (`demo_config()` and `--demo` define it), a typed child on the *Anthropic*
     protocol (`anthropic:claude-demo` on the same server) that checks a summary's length
     with the MCP `word_count` tool, allowed by its type's approval rule;
  4. answer in Markdown with what each step and subagent reported;
- ``slow``: run a cell that prints a tick every half second for a minute (try Ctrl-C);
- ``one cell``: run one quick cell, then answer;
- ``draw``: run a cell that draws a small PNG, then say whether the picture itself came back
  with the result (a model that accepts images gets it) or only its saved path;
- ``from code``: run one cell whose code calls the demo MCP server's tools as Python functions
  (`from mcptools.demo import constant, word_count`), each call approved on its own, then answer;
- ``per row``: run one cell that starts one subagent per row of a small table from code
  (`freeact_sub_tasks.map_tasks`, answers as pydantic objects; each subagent answers the JSON its
  row asks for), then answer with what they counted;
- ``model error``: the server answers the request with HTTP 400 (a failing model).
- ``in the background``: start a subagent with `run_in_background` (it counts the words of a
  sentence, thinking aloud first, so its question comes after the turn ended) and end the
  turn; a later prompt mentioning ``background`` is answered with the note the agent adds when
  that subagent has ended (its result), or with "nothing has ended" when no note came.

A request to summarize (a compaction's, by its system prompt) is answered with a summary made from the
request: the first prompt, how many calls ran, and the kernel's names.

A subagent whose latest user message is a message sent to it while it works (`task_send`, `/send`)
answers that it read it (quoting it) and ends. Subagents follow the script their prompt names
(review, primes or π); each thinks aloud, asks
for approval of its code (the reviewer's rule approves its one MCP call), and reports what the
main agent quotes. A subagent whose last call was rejected with a reason (the reason comes back
as the call's result) stops and answers by quoting that result, so a person sees the reason
reached the model.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..agent.compaction_text import SUMMARY_SYSTEM_PROMPT
from .main_scripts import main_reply
from .replies import ModelErrorReply, Reply, ToolCall, read_request
from .subagent_scripts import subagent_reply

__all__ = ["ModelErrorReply", "Reply", "ToolCall", "respond"]


def respond(request: Mapping[str, Any]) -> Reply | ModelErrorReply:
    """The scripted answer to one chat-completions request."""
    conversation = read_request(request)
    if conversation.system == SUMMARY_SYSTEM_PROMPT:
        return _summary(conversation.prompt)
    return main_reply(conversation) if conversation.is_main else subagent_reply(conversation)


def _summary(text: str) -> Reply:
    """A compaction's summary, made from its request: the first prompt, how many calls ran, the kernel's names."""
    asked = text.partition("[user]\n")[2].split("\n\n", 1)[0].strip() or "(no prompt)"
    calls = text.count("[call ")
    names = [line.split()[0] for line in text.partition("<kernel>\n")[2].partition("\n</kernel>")[0].splitlines()
             if line.strip() and not line.startswith(("Variable", "-", "(", "Interactive"))]
    kernel = f" The kernel holds: {', '.join(f'`{n}`' for n in names[:20])}." if names else ""
    return Reply(text=f"The person asked: {asked[:300].rstrip('.')}. Tool calls so far: {calls}.{kernel}")

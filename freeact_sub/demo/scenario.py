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
- ``model error``: the server answers the request with HTTP 400 (a failing model).
- ``in the background``: start a subagent with `run_in_background` (it counts the words of a
  sentence, thinking aloud first, so its question comes after the turn ended) and end the
  turn; a later prompt mentioning ``background`` is answered with the note the agent adds when
  that subagent has ended (its result), or with "nothing has ended" when no note came.

A subagent whose latest user message is a message sent to it while it works (`task_send`, `/send`)
answers that it read it (quoting it) and ends. Subagents follow the script their prompt names
(review, primes or π); each thinks aloud, asks
for approval of its code (the reviewer's rule approves its one MCP call), and reports what the
main agent quotes. A subagent whose last call was rejected with a reason (the reason comes back
as the call's result) stops and answers by quoting that result, so a person sees the reason
reached the model.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "DEMO_ANTHROPIC_MODEL",
    "DEMO_MODEL",
    "PI_TASK",
    "PRIMES_TASK",
    "REVIEW_SUMMARY",
    "REVIEW_TASK",
    "ModelErrorReply",
    "Reply",
    "ToolCall",
    "respond",
]

DEMO_MODEL = "freeact-sub-demo"
"""The model name the demo server answers to (any name works; this one is shown in banners)."""
DEMO_ANTHROPIC_MODEL = "claude-demo"
"""The model name of the demo's `reviewer` type, sent over the Anthropic Messages protocol."""

PRIMES_TASK = (
    "Count the prime numbers below 200,000 with a simple sieve of Eratosthenes in Python. "
    "Print the count on a line of its own as `RESULT: <count>` and answer with the count."
)
PI_TASK = (
    "Estimate pi with a Monte Carlo simulation of 400,000 random points (seed 7). First ask the "
    "demo MCP server's `constant` tool for the reference value of pi, then print the estimate as "
    "`RESULT: <estimate>` and answer with the estimate and its error against the reference."
)
REVIEW_SUMMARY = "Code runs in kernels, helpers work in parallel, and every action waits for your approval."
"""The one-line summary the tour's reviewer checks."""
REVIEW_TASK = (
    f"Review this one-line summary for a newcomer: \"{REVIEW_SUMMARY}\" Count its words with the demo "
    "MCP server's word_count tool and say in one sentence whether it is short enough (at most 20 words)."
)


@dataclass(frozen=True)
class ToolCall:
    """A tool call the scripted model makes."""

    name: str
    arguments: dict[str, Any]
    id: str = field(default_factory=lambda: f"call_{uuid.uuid4().hex[:12]}")


@dataclass(frozen=True)
class Reply:
    """One scripted model response: thinking (`reasoning_content`), text and tool calls, in that order."""

    reasoning: str = ""
    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()


@dataclass(frozen=True)
class ModelErrorReply:
    """The request fails with this HTTP status and message."""

    status: int
    message: str


@dataclass(frozen=True)
class _Conversation:
    prompt: str
    step: int
    results: list[str]
    """Contents of the tool results after the prompt, in order."""
    tools: list[str]
    """Names of the tools the request offers."""
    system: str = ""
    """The system prompt (it says whether MCP tools are Python functions in the kernel)."""
    images: int = 0
    """Images the model received with the tool results after the prompt."""
    task_description: str = ""
    """The `task` tool's description (it lists the agent types the caller may start)."""

    @property
    def is_main(self) -> bool:
        return "task" in self.tools

    def tool_ending(self, suffix: str) -> str | None:
        return next((name for name in self.tools if name.endswith(suffix)), None)


def respond(request: Mapping[str, Any]) -> Reply | ModelErrorReply:
    """The scripted answer to one chat-completions request."""
    conversation = _read(request)
    prompt = conversation.prompt.lower()
    if not conversation.is_main:
        rejection = _rejection(conversation)
        if rejection is not None:
            return Reply(reasoning="The user rejected my call and said why.", text=f"I stopped: {rejection}")
        if prompt.startswith("[a message from") and conversation.step == 0:
            message = conversation.prompt.partition("\n")[2].strip()
            return Reply(reasoning="A message came while I worked; I take it into account and finish.",
                         text=f"I read your message ({message!r}) and finish here.")
        if "review" in prompt:
            return _reviewer_subagent(conversation)
        if "pi" in re.findall(r"[a-z]+", prompt):
            return _pi_subagent(conversation)
        if "prime" in prompt:
            return _primes_subagent(conversation)
        if "background" in prompt:
            return _background_subagent(conversation)
        return _generic_subagent(conversation)
    if "model error" in prompt:
        return ModelErrorReply(400, "the scripted demo model was asked to fail ('model error' in the prompt)")
    if "slow" in prompt:
        return _slow(conversation)
    if "one cell" in prompt:
        return _one_cell(conversation)
    if "draw" in prompt:
        return _draw(conversation)
    if "from code" in prompt:
        return _tools_from_code(conversation)
    if "background" in prompt:
        return _background(conversation)
    return _tour(conversation)


def _read(request: Mapping[str, Any]) -> _Conversation:
    messages: Sequence[Mapping[str, Any]] = request.get("messages") or []
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user" and not _carries_files(m)),
                    default=-1)
    prompt = _text(messages[last_user].get("content")) if last_user >= 0 else ""
    after = messages[last_user + 1 :]
    tools = [t.get("function", {}).get("name", "") for t in request.get("tools") or []]
    functions: list[Mapping[str, Any]] = [t.get("function") or {} for t in request.get("tools") or []]
    task: Mapping[str, Any] = next((f for f in functions if f.get("name") == "task"), {})
    return _Conversation(
        prompt=prompt,
        step=sum(1 for m in after if m.get("role") == "assistant"),
        results=[_text(m.get("content")) for m in after if m.get("role") == "tool"],
        tools=tools,
        task_description=str(task.get("description") or ""),
        system="".join(_text(m.get("content")) for m in messages if m.get("role") == "system"),
        images=sum(
            1
            for m in after
            if _carries_files(m)
            for part in m.get("content") or []
            if isinstance(part, Mapping) and part.get("type") == "image_url"
        ),
    )


def _carries_files(message: Mapping[str, Any]) -> bool:
    """A user message that only carries a tool result's files (chat completions has no images in tool messages)."""
    content = message.get("content")
    if message.get("role") != "user" or not isinstance(content, list) or not content:
        return False
    first = content[0]
    return isinstance(first, Mapping) and str(first.get("text", "")).startswith("<pyai:tool_result")


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, Mapping))
    return ""


def _rejection(c: _Conversation) -> str | None:
    """The last tool result, when it says the user rejected the call (with a reason, or the model would not see it)."""
    last = c.results[-1] if c.results and c.step > 0 else ""
    if "reject" not in last.lower() or _result_value(last) is not None:
        return None
    return " ".join(last.split())[:300]


def _result_value(text: str) -> str | None:
    match = re.search(r"RESULT:\s*(\S+)", text)
    return match.group(1) if match else None


def _cell(code: str) -> ToolCall:
    return ToolCall("execute_ipython_cell", {"code": code})


# -- main agent -----------------------------------------------------------------------------

_IMAGE_CELL = '''\
import struct, sys, zlib
from IPython.display import Image, display

def png(width, height, pixel):
    """Encode an RGB image as PNG with the standard library only."""
    rows = b"".join(
        b"\\x00" + bytes(c for x in range(width) for c in pixel(x, y)) for y in range(height)
    )
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    body = chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")
    return b"\\x89PNG\\r\\n\\x1a\\n" + body

print(f"Python {sys.version.split()[0]} in the kernel")
display(Image(data=png(96, 96, lambda x, y: (x * 255 // 95, y * 255 // 95, 180))))
sum(i * i for i in range(1, 101))'''


def _draw(c: _Conversation) -> Reply:
    if c.step == 0:
        return Reply(text="Drawing a small gradient.", tool_calls=(_cell(_IMAGE_CELL),))
    saved = re.findall(r"image saved: ([^\]]+)\]", c.results[-1] if c.results else "")
    if c.images:
        return Reply(
            reasoning="The image came back with the cell's result, so I can look at it.",
            text=f"I can see the image I drew ({c.images} image{'s' if c.images != 1 else ''} attached to the "
            f"result): a gradient from dark to light. It is saved at `{saved[0] if saved else '?'}`.",
        )
    return Reply(text=f"The image was saved at `{saved[0] if saved else '?'}`; I only got its path, not the picture.")


_TOUR_TOOLS_CELL = """\
from mcptools.demo import constant  # the demo MCP server's tool, as a Python function

# each call goes to this agent's own MCP session after its own approval; the values stay in variables
reference = {name: constant(name=name) for name in ("pi", "e")}
print("reference values: " + ", ".join(f"{name} = {value:.6f}" for name, value in reference.items()))"""


def _tour(c: _Conversation) -> Reply:
    steps = [_tour_kernel]
    if "mcptools.demo" in c.system:
        steps.append(_tour_tools_from_code)
    steps.append(_tour_subagents)
    if c.step < len(steps):
        return steps[c.step](c)
    return _tour_answer(c)


def _tour_kernel(c: _Conversation) -> Reply:
    return Reply(
        reasoning=(
            "The user wants to see the whole flow. First I'll check that my kernel works: "
            "print the Python version, draw a small gradient as a PNG with the standard "
            "library only, and compute a sum of squares."
        ),
        text="Let me first check my kernel and draw a small image.",
        tool_calls=(_cell(_IMAGE_CELL),),
    )


def _tour_tools_from_code(c: _Conversation) -> Reply:
    return Reply(
        reasoning=(
            "My MCP tools are Python functions in my kernel too. Looking up two constants in a loop "
            "is one cell instead of two tool calls, and only the line I print comes back to me."
        ),
        text="The kernel works. Next, one cell that calls the demo MCP server's `constant` tool from Python.",
        tool_calls=(_cell(_TOUR_TOOLS_CELL),),
    )


def _tour_subagents(c: _Conversation) -> Reply:
    tasks = [
        ToolCall("task", {"prompt": PRIMES_TASK, "max_turns": 4}),
        ToolCall("task", {"prompt": PI_TASK, "max_turns": 5}),
    ]
    if "`reviewer`" in c.task_description:
        tasks.append(
            ToolCall(
                "task",
                {"prompt": REVIEW_TASK, "subagent_type": "reviewer", "description": "Review the summary"},
            )
        )
    reviewed = len(tasks) > 2
    return Reply(
        reasoning=(
            "Counting primes and estimating pi are independent jobs, so I'll give each to a subagent "
            "and run them at the same time"
            + (", with a reviewer of its own type checking my summary meanwhile." if reviewed else ".")
        ),
        text=(
            "Now three subagents in parallel: two compute, and a `reviewer` (an agent type of its own, "
            "on the Anthropic protocol) checks a summary."
            if reviewed
            else "Now I'll hand two independent jobs to two subagents running in parallel."
        ),
        tool_calls=tuple(tasks),
    )


def _tour_answer(c: _Conversation) -> Reply:
    reviewed = "`reviewer`" in c.task_description
    count = 3 if reviewed else 2
    answers = c.results[-count:]
    labels = ("Primes below 200,000", "Monte Carlo estimate of π", "Review (`reviewer`, Anthropic protocol)")
    lines = []
    for label, answer in zip(labels, answers, strict=False):
        if "rejected" in answer.lower() or "refused" in answer.lower():
            lines.append(f"- **{label}:** not computed, the subagent's action was rejected.")
        elif "failed" in answer.lower() or not answer.strip():
            lines.append(f"- **{label}:** the subagent did not finish ({answer.strip()[:120] or 'no answer'}).")
        else:
            lines.append(f"- **{label}:** {answer.strip()}")
    steps = ["My kernel drew a 96×96 gradient (its file is shown above)"]
    if "mcptools.demo" in c.system:
        steps.append(_tools_from_code_outcome(c.results[1] if len(c.results) > 1 else ""))
    return Reply(
        reasoning="Every subagent reported back. I'll summarise their results for the user.",
        text=(
            "## Results\n\n"
            + ", ".join(steps)
            + ", and the subagents reported:\n\n"
            + "\n".join(lines)
            + "\n\nEach subagent worked in parallel (as far as `max_subagents` allows) with fresh MCP "
            "connections, the computing ones in a fresh kernel of their own."
        ),
    )


def _tools_from_code_outcome(result: str) -> str:
    """What the cell that called MCP tools from code did, read from its output (not from a line of its code).

    Its printed line starts a line of output; a traceback quotes the code that would have printed
    it, so only a whole output line counts, and an error is told by its last line.
    """
    printed = re.search(r"^reference values: (\w+ = [-\d.]+(?:, \w+ = [-\d.]+)*)$", result, re.MULTILINE)
    if printed:
        return f"one cell called the MCP tool `constant` from Python ({printed.group(1)})"
    error = re.findall(r"^(\w*(?:Error|Rejected|Cancelled|Exception)\b.*)$", result, re.MULTILINE)
    if error:
        return f"the cell that calls the MCP tool `constant` from Python stopped with `{error[-1][:160]}`"
    return "the cell that calls MCP tools from Python did not finish"


def _slow(c: _Conversation) -> Reply:
    if c.step == 0:
        return Reply(
            reasoning="The user asked for something slow; a cell that ticks for a minute will do.",
            text="Starting a slow cell: it prints a tick every half second for a minute.",
            tool_calls=(
                _cell("import time\nfor i in range(1, 121):\n    print(f'tick {i}', flush=True)\n    time.sleep(0.5)"),
            ),
        )
    return Reply(text="The slow cell finished.")


def _one_cell(c: _Conversation) -> Reply:
    if c.step == 0:
        return Reply(
            reasoning="One quick computation answers this.",
            text="Computing it.",
            tool_calls=(_cell("print(f'RESULT: {sum(range(1, 101))}')"),),
        )
    value = _result_value(c.results[-1]) if c.results else None
    if value is None:
        return Reply(text="The cell did not print a result.")
    return Reply(reasoning="The cell printed the sum.", text=f"The sum of 1 to 100 is **{value}**.")


_TOOLS_FROM_CODE_CELL = """\
from mcptools.demo import constant, word_count

# each call goes to the demo MCP server, after its own approval; the results stay in variables
values = {name: constant(name=name) for name in ("pi", "e", "phi")}
for name, value in values.items():
    print(f"{name:>3} = {value:.6f}")
sentence = "code that calls tools keeps their raw results out of the context window"
print(f"RESULT: {word_count(text=sentence)}")"""


def _tools_from_code(c: _Conversation) -> Reply:
    if c.step == 0:
        if "mcptools.demo" not in c.system:
            return Reply(text="My MCP tools are not offered as Python functions here (`mcp_tools` is `\"calls\"`).")
        return Reply(
            reasoning="Several tool calls whose results I only need to combine: one cell that calls them is best.",
            text="I'll call the demo MCP server's tools from one cell of code.",
            tool_calls=(_cell(_TOOLS_FROM_CODE_CELL),),
        )
    output = c.results[-1] if c.results else ""
    value = _result_value(output)
    if value is None:
        return Reply(text=f"The cell did not finish:\n\n```\n{output.strip()[-600:]}\n```")
    constants = [line.strip() for line in output.splitlines() if " = " in line]
    return Reply(
        reasoning="The cell printed the constants and the word count.",
        text="From one cell, four MCP calls: " + ", ".join(f"`{line}`" for line in constants)
        + f", and the sentence has **{value}** words.",
    )


BACKGROUND_TASK = (
    "As a background job, count the words of the sentence 'a background subagent works on while the "
    "conversation goes on'. Print the count as `RESULT: <count>` and answer with it."
)
_BACKGROUND_NOTE = "[the background subagent "


def _background(c: _Conversation) -> Reply:
    if c.prompt.lower().startswith(_BACKGROUND_NOTE):  # the agent told us a background subagent ended
        result = c.prompt.split("Its result:]", 1)[-1].strip()
        return Reply(
            reasoning="The agent tells me that my background subagent has ended; I'll pass its result on.",
            text=f"The background subagent has ended. It reported: {result}",
        )
    if c.step == 0 and "in the background" in c.prompt.lower():
        return Reply(
            reasoning="This job need not hold up the conversation: a background subagent can do it.",
            text="Starting a subagent in the background.",
            tool_calls=(ToolCall("task", {"prompt": BACKGROUND_TASK, "run_in_background": True,
                                          "description": "count words in the background"}),),
        )
    if c.step > 0:
        return Reply(text="It runs in the background; I will be told when it ends. Ask me about it any time.")
    return Reply(text="No background subagent has ended since I was last told.")


# -- subagents ------------------------------------------------------------------------------

_PRIMES_CELL = """\
import time
limit = 200_000
sieve = bytearray([1]) * limit
sieve[0:2] = b"\\x00\\x00"
for n in range(2, int(limit ** 0.5) + 1):
    if sieve[n]:
        sieve[n * n :: n] = bytes(len(range(n * n, limit, n)))
for part in range(1, 4):
    print(f"checking part {part} of 3 ...", flush=True)
    time.sleep(0.4)
print(f"RESULT: {sum(sieve)}")"""

_PI_CELL = """\
import random, time
random.seed(7)
points, inside = 400_000, 0
for batch in range(4):
    for _ in range(points // 4):
        x, y = random.random(), random.random()
        inside += x * x + y * y <= 1.0
    print(f"batch {batch + 1} of 4 done", flush=True)
    time.sleep(0.2)
print(f"RESULT: {4 * inside / points:.5f}")"""


def _primes_subagent(c: _Conversation) -> Reply:
    if c.step == 0:
        return Reply(
            reasoning="A sieve of Eratosthenes up to 200,000 is quick in pure Python.",
            text="Sieving the numbers below 200,000.",
            tool_calls=(_cell(_PRIMES_CELL),),
        )
    value = _result_value(c.results[-1]) if c.results else None
    if value is None:
        return Reply(text="The sieve did not print a count.")
    return Reply(reasoning="The sieve printed the count.", text=f"There are {value} primes below 200,000.")


def _pi_subagent(c: _Conversation) -> Reply:
    if c.step == 0:
        constant = c.tool_ending("_constant")
        if constant is not None:
            return Reply(
                reasoning="First the reference value of pi from the demo MCP server.",
                text="Asking the demo MCP server for the reference value of π.",
                tool_calls=(ToolCall(constant, {"name": "pi"}),),
            )
    reference = _reference(c.results)
    if c.step <= 1 and not any(_result_value(r) for r in c.results):
        return Reply(
            reasoning="Now the simulation: 400,000 random points in the unit square.",
            text="Running the Monte Carlo simulation.",
            tool_calls=(_cell(_PI_CELL),),
        )
    value = next((v for r in reversed(c.results) if (v := _result_value(r))), None)
    if value is None:
        return Reply(text="The simulation did not print an estimate.")
    if reference is None:
        return Reply(text=f"π ≈ {value} (no reference value to compare with).")
    error = abs(float(value) - reference)
    return Reply(
        reasoning="Compare the estimate with the reference value.",
        text=f"π ≈ {value}, off by {error:.5f} from the reference {reference:.5f}.",
    )


def _reviewer_subagent(c: _Conversation) -> Reply:
    summary = REVIEW_SUMMARY if REVIEW_SUMMARY in c.prompt else c.prompt
    word_count = c.tool_ending("_word_count")
    if c.step == 0 and word_count is not None:
        return Reply(
            reasoning="A summary for a newcomer should be short. I'll count its words with the word_count tool.",
            text="Counting the summary's words.",
            tool_calls=(ToolCall(word_count, {"text": summary}),),
        )
    counted = re.search(r"\d+", c.results[-1]) if c.results else None
    words = int(counted.group(0)) if counted else len(summary.split())
    verdict = "short enough" if words <= 20 else "too long"
    return Reply(
        reasoning="I have the count; now a one-sentence verdict.",
        text=f"The summary has {words} words: {verdict}, and it names kernels, parallel helpers and approvals.",
    )


def _reference(results: list[str]) -> float | None:
    for text in results:
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            data = text
        candidate = data.get("value") if isinstance(data, dict) else data
        try:
            return float(str(candidate).strip())
        except ValueError:
            continue
    return None


def _background_subagent(c: _Conversation) -> Reply:
    if c.step == 0:
        return Reply(
            reasoning=(
                "I run in the background, so nobody waits for me and I can take my time. The job is small: "
                "split the sentence on whitespace and count the parts. One short cell prints the count, then "
                "I answer with it. My parent is told when I end, at its next model request."
            ),
            text="Counting the words.",
            tool_calls=(_cell(f"sentence = {_quoted_sentence(c.prompt)!r}\n"
                              "print(f'RESULT: {len(sentence.split())}')"),),
        )
    value = _result_value(c.results[-1]) if c.results else None
    return Reply(text=f"The sentence has {value} words." if value else "The cell did not print a count.")


def _quoted_sentence(prompt: str) -> str:
    match = re.search(r"'([^']*)'", prompt)
    return match.group(1) if match else prompt


def _generic_subagent(c: _Conversation) -> Reply:
    if c.step == 0:
        return Reply(
            reasoning="A generic job; a short cell shows I can run code.",
            text="Running a short cell.",
            tool_calls=(_cell(f"print('RESULT: ' + str(len({c.prompt[:200]!r})))"),),
        )
    value = _result_value(c.results[-1]) if c.results else None
    return Reply(text=f"Done: the prompt had {value} characters.")

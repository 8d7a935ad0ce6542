"""The main agent's scripts, chosen by words in the user's prompt (see `scenario.py`): the tour and the short ones."""

from __future__ import annotations

import re
from collections.abc import Callable

from .replies import Conversation, ModelErrorReply, Reply, ToolCall, cell, result_value
from .tasks import BACKGROUND_TASK, PI_TASK, PRIMES_TASK, REVIEW_TASK

__all__ = ["ROWS_CELL", "main_reply"]


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


def _draw(c: Conversation) -> Reply:
    if c.step == 0:
        return Reply(text="Drawing a small gradient.", tool_calls=(cell(_IMAGE_CELL),))
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


def _tour(c: Conversation) -> Reply:
    steps = [_tour_kernel]
    if "mcptools.demo" in c.system:
        steps.append(_tour_tools_from_code)
    steps.append(_tour_subagents)
    if c.step < len(steps):
        return steps[c.step](c)
    return _tour_answer(c)


def _tour_kernel(c: Conversation) -> Reply:
    return Reply(
        reasoning=(
            "The user wants to see the whole flow. First I'll check that my kernel works: "
            "print the Python version, draw a small gradient as a PNG with the standard "
            "library only, and compute a sum of squares."
        ),
        text="Let me first check my kernel and draw a small image.",
        tool_calls=(cell(_IMAGE_CELL),),
    )


def _tour_tools_from_code(c: Conversation) -> Reply:
    return Reply(
        reasoning=(
            "My MCP tools are Python functions in my kernel too. Looking up two constants in a loop "
            "is one cell instead of two tool calls, and only the line I print comes back to me."
        ),
        text="The kernel works. Next, one cell that calls the demo MCP server's `constant` tool from Python.",
        tool_calls=(cell(_TOUR_TOOLS_CELL),),
    )


def _tour_subagents(c: Conversation) -> Reply:
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


def _tour_answer(c: Conversation) -> Reply:
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


def _slow(c: Conversation) -> Reply:
    if c.step == 0:
        return Reply(
            reasoning="The user asked for something slow; a cell that ticks for a minute will do.",
            text="Starting a slow cell: it prints a tick every half second for a minute.",
            tool_calls=(
                cell("import time\nfor i in range(1, 121):\n    print(f'tick {i}', flush=True)\n    time.sleep(0.5)"),
            ),
        )
    return Reply(text="The slow cell finished.")


def _one_cell(c: Conversation) -> Reply:
    if c.step == 0:
        return Reply(
            reasoning="One quick computation answers this.",
            text="Computing it.",
            tool_calls=(cell("print(f'RESULT: {sum(range(1, 101))}')"),),
        )
    value = result_value(c.results[-1]) if c.results else None
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


def _tools_from_code(c: Conversation) -> Reply:
    if c.step == 0:
        if "mcptools.demo" not in c.system:
            return Reply(text="My MCP tools are not offered as Python functions here (`mcp_tools` is `\"calls\"`).")
        return Reply(
            reasoning="Several tool calls whose results I only need to combine: one cell that calls them is best.",
            text="I'll call the demo MCP server's tools from one cell of code.",
            tool_calls=(cell(_TOOLS_FROM_CODE_CELL),),
        )
    output = c.results[-1] if c.results else ""
    value = result_value(output)
    if value is None:
        return Reply(text=f"The cell did not finish:\n\n```\n{output.strip()[-600:]}\n```")
    constants = [line.strip() for line in output.splitlines() if " = " in line]
    return Reply(
        reasoning="The cell printed the constants and the word count.",
        text="From one cell, four MCP calls: " + ", ".join(f"`{line}`" for line in constants)
        + f", and the sentence has **{value}** words.",
    )


ROWS_CELL = """\
from pydantic import BaseModel
from freeact_sub_tasks import map_tasks, TaskError

class Letters(BaseModel):
    word: str
    letters: int

words = ["kernel", "subagent", "approval", "sandbox"]
try:  # one subagent per row of a DataFrame
    import pandas as pd
    rows = pd.DataFrame({"word": words}).to_dict("records")
except ImportError:  # no pandas in this kernel: the same rows as dicts
    rows = [{"word": word} for word in words]
counted = await map_tasks("Count the letters of the word {word!r}.", rows, output=Letters)
for row in counted:
    print(f"{row.word}: {row.letters} letters" if isinstance(row, Letters) else f"failed: {row}")"""
"""The cell of the `per row` script: one subagent per row, answers as `Letters` objects."""


def _per_row(c: Conversation) -> Reply:
    if c.step == 0:
        if "freeact_sub_tasks" not in c.system:
            return Reply(text="My code cannot start subagents here (no kernel, or no `task` tool).")
        return Reply(
            reasoning="The same small job for every row: one cell that maps the rows through subagents.",
            text="One subagent per row, started from one cell; their answers come back as objects.",
            tool_calls=(cell(ROWS_CELL),),
        )
    counted = re.findall(r"^(\w+): (\d+) letters$", c.results[-1] if c.results else "", re.MULTILINE)
    if not counted:
        return Reply(text=f"The cell did not finish:\n\n```\n{(c.results or [''])[-1].strip()[-600:]}\n```")
    return Reply(
        reasoning="Every row's subagent answered; the cell printed one line per row.",
        text=f"{len(counted)} subagents, one per row, counted: "
        + ", ".join(f"**{word}** {letters}" for word, letters in counted) + ".",
    )


_BACKGROUND_NOTE = "[the background subagent "


def _background(c: Conversation) -> Reply:
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


_WRITE_CELL = """\
import csv, subprocess, sys

# a file written through Python's csv module, and one by a subprocess: /rewind takes both back
with open("report.csv", "w", newline="") as f:
    csv.writer(f).writerows([["city", "rain_mm"], ["Vienna", 620], ["Lima", 16]])
subprocess.run([sys.executable, "-c", "open('notes.txt', 'a').write('rainfall table written\\\\n')"], check=True)
print("RESULT: 2 files written")"""


def _write_files(c: Conversation) -> Reply:
    if c.step == 0:
        return Reply(text="Writing the rainfall table and a note.", tool_calls=(cell(_WRITE_CELL),))
    return Reply(text="Wrote `report.csv` and a line in `notes.txt`.")


_SCRIPTS: tuple[tuple[str, Callable[[Conversation], Reply]], ...] = (
    ("write files", _write_files),
    ("slow", _slow),
    ("one cell", _one_cell),
    ("draw", _draw),
    ("per row", _per_row),
    ("from code", _tools_from_code),
    ("background", _background),
)
"""The short scripts by the words of the prompt that choose them, first match wins; anything else: the tour."""


def main_reply(conversation: Conversation) -> Reply | ModelErrorReply:
    """The main agent's next reply: the script its prompt names, else the tour."""
    prompt = conversation.prompt.lower()
    if "model error" in prompt:
        return ModelErrorReply(400, "the scripted demo model was asked to fail ('model error' in the prompt)")
    script = next((script for words, script in _SCRIPTS if words in prompt), _tour)
    return script(conversation)

"""The built-in agent types: `general` (a clone of its parent) and the read-only `explore`, `plan` and `review`.

The three read-only ones run code only in their kernel (no MCP tools), under the `read-only`
sandbox profile, and have a turn limit of their own. `explore`'s cells are approved by one rule
of its own (`execute_ipython_cell: allow`), which holds only while the sandbox is enforced: where
the platform cannot enforce it, `agent_types.confine` runs the type under its parent's profile
and without that rule, so its cells are asked as any other. A type file or `agents` entry of the
same name replaces a built-in whole.
"""

from __future__ import annotations

from ..sandbox.profiles import BUILT_IN_PROFILES
from .definitions import GENERAL, AgentType

__all__ = ["BUILTIN_TYPES", "EXPLORE", "PLAN", "REVIEW"]

EXPLORE, PLAN, REVIEW = "explore", "plan", "review"

_KERNEL_ONLY = ["execute_ipython_cell", "reset_kernel"]
_READ_ONLY_PROFILE = BUILT_IN_PROFILES["read-only"]

_READ_ONLY = """\
Work read-only: never write, move or delete files, install packages or start servers. Where the
platform allows it, your kernel runs under a read-only sandbox, so writing (outside the kernel's
own temporary folder), installing and reaching the network fail; do not work around such a
failure, say what you could not do."""

_EXPLORE_PROMPT = f"""\
You find and read; you never change anything. Do the searching in your IPython kernel with
read-only Python:

- find files with `pathlib.Path(".").rglob("*.py")` or `glob`, skipping `.git`, virtual
  environments and `node_modules`;
- search their text with `re`, printing `path:line: text` for each hit
  (`for number, line in enumerate(text.splitlines(), 1)`);
- read the part of a file you need (a range of lines around a hit), not whole large files;
- look into data with `json`, `csv` or pandas: shape, columns, a few rows, counts;
- read-only commands through `subprocess.run([...], capture_output=True, text=True)` are fine
  (`git log`, `git grep`, `git show`).

Print only what you need to see; a cell that prints thousands of lines wastes your context.

{_READ_ONLY}

The job may say how thorough to be (`thoroughness: quick`, `medium` or `very thorough`):
quick: one or two searches in the most likely places, then answer; medium (the default):
follow the main leads and check the places they point to; very thorough: search every
likely place and spelling (other names, tests, configuration, docs) and confirm each finding
by reading it.

Answer with facts, not plans or fixes: file paths with line numbers (`src/app/models.py:42`),
what is there (quote a line or two when it helps), and what you searched for but did not find."""

_PLAN_PROMPT = f"""\
You plan changes; you do not make them. Read what the job concerns in your IPython kernel with
read-only Python: find the files (`pathlib.Path.rglob`), read the relevant parts, search with
`re`, and run read-only commands such as `git log` or `git diff` through `subprocess.run`,
until you know where each change goes and what depends on it.

{_READ_ONLY}

Answer with a numbered plan of changes, in the order they should be made. Each step names the
file (and the function, class or line) it changes, what changes, and why. Then list the risks
or open questions, and how to check the result (the tests to run or to write). Keep it
concrete and short; show code only where a snippet removes an ambiguity."""

_REVIEW_PROMPT = f"""\
You review code; you do not change it. Read the files or the diff the job names in your
IPython kernel: `open(path).read()` for files, `subprocess.run(["git", "diff", ...],
capture_output=True, text=True)` for a diff (the job says which; by default the uncommitted
changes). Read the code around each change too, and settle a doubt with a small read-only
check in the kernel: `compile(source, path, "exec")` for syntax, importing a module and calling
a pure function on a sample input.

{_READ_ONLY}

Look for bugs first (wrong logic, unhandled cases and errors, resources never released, races),
then risks (security, performance, behaviour that changed silently), then unclear code.

Answer with the problems, most serious first, one per item: `path:line` — bug, risk or style —
what is wrong and how to fix it. Say if you found nothing, and what you checked."""

BUILTIN_TYPES: dict[str, AgentType] = {
    GENERAL: AgentType(
        description="A general-purpose agent with the same model and tools as you (code execution and MCP "
        "tools), for any isolated multi-step job."
    ),
    EXPLORE: AgentType(
        description="Finds and reads, never changes: searches files and data in its own read-only kernel and "
        "answers with paths, line numbers and facts. Use it to find where something is defined or used, or what "
        "files or data contain, without filling your own context. Put how thorough it should be in the prompt: "
        "`thoroughness: quick`, `medium` (default) or `very thorough`.",
        prompt=_EXPLORE_PROMPT,
        tools=_KERNEL_ONLY,
        max_turns=20,
        sandbox=_READ_ONLY_PROFILE,
        approvals={"execute_ipython_cell": "allow"},
    ),
    PLAN: AgentType(
        description="Reads the code and data a change concerns and returns a numbered plan of changes (files, "
        "functions, order, risks, how to check); writes nothing. Use it before a change that touches several "
        "places, or when the user asks for a plan.",
        prompt=_PLAN_PROMPT,
        tools=_KERNEL_ONLY,
        max_turns=15,
        sandbox=_READ_ONLY_PROFILE,
    ),
    REVIEW: AgentType(
        description="Reviews the files or the diff you name (e.g. `git diff main`) and answers with problems by "
        "file and line, most serious first; changes nothing. Use it to check code, yours or the user's, before "
        "you report it done.",
        prompt=_REVIEW_PROMPT,
        tools=_KERNEL_ONLY,
        max_turns=15,
        sandbox=_READ_ONLY_PROFILE,
    ),
}
"""The types every agent tree knows, by name; a type file or `agents` entry of the same name replaces one."""

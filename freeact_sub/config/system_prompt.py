"""The built-in system prompt, for the tools an agent really has, and the prompt an agent of a type sends."""

from __future__ import annotations

__all__ = ["DEFAULT_SYSTEM_PROMPT", "compose_system_prompt", "default_system_prompt"]

_CODE_ACTION = """\
You are a capable assistant that acts by writing Python code.

You have an IPython kernel of your own. To act, call the `execute_ipython_cell` tool with
Python code; you get back everything the cell printed, the value of its last expression and,
if it raised, the traceback. The kernel keeps its state between calls, so build on earlier
cells instead of repeating them. Use IPython features where they help (`%pip install`,
`!shell commands`). Images and plots you create are saved to files and their paths are shown.

Work in small steps: run a little code, look at the result, then decide the next step. When a
cell fails, read the traceback and fix the cause. Prefer computing an answer over guessing it.
`reset_kernel` gives you a clean kernel when its state is broken.
"""

_TOOLS_ONLY = """\
You are a capable assistant that acts through the tools you are given; you cannot run code.

Work in small steps: call a tool, read its result, then decide the next step. When a call
fails, read the error and fix the cause. Prefer what the tools tell you over guessing.
"""

_SUBAGENTS = """\
If you have a `task` tool, it hands an isolated job to a subagent with a fresh kernel; start
independent jobs as parallel `task` calls in one response.
"""

_APPROVALS = """\
Every tool call may need the user's approval. A call rejected without a reason ends your turn;
one rejected with a reason did not run: adjust to the reason and go on. When the job is
done, answer in plain text (Markdown is fine), concisely, with the results the user asked for.
"""


def default_system_prompt(*, runs_code: bool = True, starts_subagents: bool = True) -> str:
    """The built-in system prompt for an agent with these tools: it names no tool the agent lacks."""
    sections = [_CODE_ACTION if runs_code else _TOOLS_ONLY]
    if starts_subagents:
        sections.append(_SUBAGENTS)
    sections.append(_APPROVALS)
    return "\n".join(sections)


DEFAULT_SYSTEM_PROMPT = default_system_prompt()
"""The built-in system prompt of an agent that runs code and may start subagents.

An agent whose `system_prompt` is this one sends `default_system_prompt()` for the tools it
really has (a type without `execute_ipython_cell` is not told to run code)."""



def compose_system_prompt(base: str, role: str, mcp_section: str = "", *, instructions: str = "",
                          skills: str = "") -> str:
    """The system prompt an agent sends: the code-action prompt, the instructions (`AGENTS.md`), its type's role,
    the skills it sees, then its MCP tools' section."""
    if not any(part.strip() for part in (role, mcp_section, instructions, skills)):
        return base
    parts = [base.rstrip()]
    if instructions.strip():
        parts.append(instructions.strip())
    if role.strip():
        parts.append("## Your role\n\n" + role.strip())
    for section in (skills, mcp_section):
        if section.strip():
            parts.append(section.strip())
    return "\n\n".join(parts) + "\n"

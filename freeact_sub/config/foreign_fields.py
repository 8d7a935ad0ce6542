"""Claude Code's and OpenCode's agent-file fields, read in this project's terms.

Both formats are YAML front matter like ours, with fields of their own. What has a meaning here
is translated; what has none is dropped with one warning naming the file and the field, so such
a file starts instead of failing on `color: blue`. A field neither format nor this project knows
stays an error (a typo such as `descripton` must not pass silently).

- `color` (both) is `color`: its agents' label colour in the terminal;
- `temperature`, `top_p` (OpenCode) go into `model_settings`; `maxSteps`, `steps` (OpenCode) are `max_turns`;
- `permissionMode` (Claude Code): `default` changes nothing, `bypassPermissions` is an `allow` rule for
  every tool (the file's own rules win), `plan` the `read-only` sandbox; other modes are warned;
- Claude Code's and OpenCode's own tools in `tools` (`Read, Grep, Bash, …`) are `execute_ipython_cell`
  (the kernel reads, searches, runs and writes), `Task` is `task`; the rest (`WebFetch`) and any
  of theirs in `disallowedTools` are warned and dropped; Claude Code's `Skill` is `load_skill`;
- `model: sonnet` (`opus`, `haiku`, `inherit`: Claude Code's aliases) is the parent's model, warned (not for
  `inherit`, which says just that);
- `skills` (Claude Code: skills preloaded into the agent's prompt) means the same here;
- `memory`, `permission`, `hidden`, `disable`, … have no concept here: warned, dropped.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

from ..errors import ConfigWarning

__all__ = ["CLAUDE_CODE_TOOLS", "OPENCODE_TOOLS", "translate_foreign_fields"]

CLAUDE_CODE_TOOLS = frozenset(
    {"Read", "Grep", "Glob", "LS", "Bash", "BashOutput", "KillShell", "Edit", "MultiEdit", "Write", "NotebookEdit",
     "NotebookRead", "WebFetch", "WebSearch", "TodoWrite", "Task", "SlashCommand", "Skill"}
)
"""Claude Code's built-in tool names, as its agent files list them in `tools` / `disallowedTools`."""

OPENCODE_TOOLS = frozenset(
    {"read", "grep", "glob", "list", "bash", "edit", "write", "patch", "todowrite", "todoread", "webfetch", "task"}
)
"""OpenCode's built-in tool names (its `tools: {write: false}` map disallows them)."""
_FOREIGN = CLAUDE_CODE_TOOLS | (OPENCODE_TOOLS - {"task"})

_MAPPED = {
    **dict.fromkeys(("Read", "Grep", "Glob", "LS", "Bash", "BashOutput", "KillShell", "Edit", "MultiEdit", "Write",
                     "NotebookEdit", "NotebookRead", "read", "grep", "glob", "list", "bash", "edit", "write",
                     "patch"), "execute_ipython_cell"),
    "Task": "task",
    "Skill": "load_skill",
}
"""Claude Code tools and the tool here that does their work (the kernel reads, searches, runs and writes)."""

_NO_CONCEPT = {
    "memory": "this project has no agent memory",
    "permission": "OpenCode's permissions name OpenCode's tools; use `approvals` rules",
    "hidden": "every type is listed",
    "disable": "remove the file to disable a type",
    "top_k": "not a setting every provider takes; use `model_settings`",
    "topK": "not a setting every provider takes; use `model_settings`",
    "reasoningEffort": "use `model_settings`",
    "textVerbosity": "use `model_settings`",
    "isolation": "every subagent has its own kernel already",
    "background": "the `task` call says whether a subagent runs in the background",
}
_CLAUDE_CODE_MODELS = frozenset({"sonnet", "opus", "haiku", "inherit", "opusplan", "default"})
"""Claude Code's model aliases in an agent file's `model`: they name no provider, so the parent's model is used."""
_SETTINGS = {"temperature": "temperature", "top_p": "top_p", "topP": "top_p"}
_TURNS = ("maxSteps", "steps")


def translate_foreign_fields(fields: Mapping[str, Any], source: str) -> dict[str, Any]:
    """`fields` with Claude Code's and OpenCode's own fields translated or dropped, each drop warned once.

    Fields of this project pass unchanged (a field of ours wins over a translated one); warnings are
    `ConfigWarning`s that name `source` and the field.
    """
    out = dict(fields)
    dropped: list[tuple[str, str]] = []
    if "colour" in out and "color" not in out:
        out["color"] = out.pop("colour")
    settings = {name: out.pop(name) for name in list(out) if name in _SETTINGS}
    if settings:
        own = out.get("model_settings", out.get("modelSettings"))
        merged = {_SETTINGS[name]: value for name, value in settings.items()}
        if isinstance(own, Mapping):
            merged.update(own)
        out.pop("modelSettings", None)
        out["model_settings"] = merged
    for name in _TURNS:
        if name in out:
            value = out.pop(name)
            if "max_turns" not in out and "maxTurns" not in out:
                out["max_turns"] = value
    if "permissionMode" in out:
        _permission_mode(out, out.pop("permissionMode"), dropped)
    model = out.get("model")
    if isinstance(model, str) and model.strip().lower() in _CLAUDE_CODE_MODELS:
        out.pop("model")  # the parent's model, which Claude Code's `inherit` says and its aliases cannot
        if model.strip().lower() != "inherit":
            dropped.append((f"model {model!r}", "Claude Code's alias, not a model of a provider here; the type runs on "
                            "its parent's model (name one, such as anthropic:claude-sonnet-4-5, to choose)"))
    for name in list(out):
        if name in _NO_CONCEPT:
            out.pop(name)
            dropped.append((name, _NO_CONCEPT[name]))
    for key in ("tools", "disallowed_tools", "disallowedTools"):
        if key in out:
            out[key] = _claude_code_tools(out[key], key, dropped)
    for field, why in dropped:
        warnings.warn(f"{source}: {field}: ignored ({why})", ConfigWarning, stacklevel=2)
    return out


def _permission_mode(out: dict[str, Any], mode: Any, dropped: list[tuple[str, str]]) -> None:
    if mode == "default":
        return
    if mode == "bypassPermissions":
        approvals = out.get("approvals")
        out["approvals"] = {"*": "allow", **(approvals if isinstance(approvals, Mapping) else {})}
    elif mode == "plan":
        out.setdefault("sandbox", "read-only")
    else:
        dropped.append((f"permissionMode {mode!r}", "only default, bypassPermissions and plan have a meaning here"))


def _claude_code_tools(value: Any, key: str, dropped: list[tuple[str, str]]) -> Any:
    """A tool list with Claude Code's tool names replaced by what does their work here."""
    names = [part.strip() for part in value.split(",") if part.strip()] if isinstance(value, str) else value
    if not isinstance(names, list) or not any(isinstance(n, str) and n in _FOREIGN for n in names):
        return value
    kept: list[Any] = []
    foreign = [n for n in names if isinstance(n, str) and n in _FOREIGN]
    allowing = key == "tools"
    for name in names:
        if not (isinstance(name, str) and name in _FOREIGN):
            kept.append(name)
        elif allowing and name in _MAPPED and _MAPPED[name] not in kept:
            kept.append(_MAPPED[name])
    unmapped = [n for n in foreign if not (allowing and n in _MAPPED)]
    if unmapped:
        why = ("Claude Code's or OpenCode's own tools; here the kernel (execute_ipython_cell) reads, searches, "
               "runs and writes" if allowing else
               "Claude Code's or OpenCode's own tools; disallow execute_ipython_cell to take away the kernel")
        dropped.append((f"{key} {', '.join(unmapped)}", why))
    return kept

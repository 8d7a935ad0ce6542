"""The terminal's own slash commands, as `/help` lists them (a person's command file of the same name is hidden)."""

from __future__ import annotations

__all__ = ["BUILT_IN_COMMANDS"]

BUILT_IN_COMMANDS = {
    "/agents": ("/agents", "list the live subagents and the agent types"),
    "/batch": ("/batch [ID]", "list each row of the last map_tasks batch: state, turns, tokens, cost, result"),
    "/skills": ("/skills", "list the skills (the model reads one when a job needs it)"),
    "/stop": ("/stop AGENT-ID", "stop a running subagent"),
    "/send": ("/send AGENT-ID TEXT", "send a message to a running subagent (it reads it at its next step)"),
    "/y": ("/y", "approve the oldest waiting question"),
    "/n": ("/n [reason]", "reject it"),
    "/s": ("/s", "stop the subagent that asks it"),
    "/compact": ("/compact [focus]", "compact the conversation now: older rounds become a summary"),
    "/rewind": ("/rewind [N]", "list the turns with the files each changed; /rewind N goes back to before turn N"),
    "/mode": ("/mode [ask|auto|plan]", "ask for every call, approve everything, or plan read-only"),
    "/help": ("/help", "this list"),
}

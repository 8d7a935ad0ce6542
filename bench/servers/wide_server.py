"""An MCP server with 20 tools of realistic shape (for the context-size benchmark), written with the `mcp` SDK.

    python bench/servers/wide_server.py NAME

Each tool has a description of a few sentences and typed, described arguments, like the tools
of real servers (issue trackers, file stores, calendars); calling one returns a small dict.
"""

from __future__ import annotations

import sys
from typing import Annotated, Literal

from mcp.server.mcpserver import MCPServer
from pydantic import Field

NOUNS = ("issue", "comment", "label", "milestone", "file")
VERBS = ("list", "get", "create", "update")

Query = Annotated[str, Field(description="Free-text search; matches titles and bodies, case-insensitive.")]
Limit = Annotated[int, Field(description="The most items to return (1-100).", ge=1, le=100)]
Ident = Annotated[str, Field(description="The item's id, as returned by the list and create tools.")]
State = Annotated[Literal["open", "closed", "all"], Field(description="Which items to include by state.")]
Title = Annotated[str, Field(description="A short title, one line, at most 200 characters.")]
Body = Annotated[str, Field(description="The full text, Markdown allowed.")]
Tags = Annotated[list[str], Field(description="Labels to attach; unknown labels are created.")]


def list_items(query: Query = "", state: State = "open", limit: Limit = 20) -> dict:
    return {"items": [], "query": query, "state": state, "limit": limit}


def get_item(id: Ident, include_history: bool = False) -> dict:
    return {"id": id, "history": [] if include_history else None}


def create_item(title: Title, body: Body = "", labels: Tags | None = None) -> dict:
    return {"id": "new-1", "title": title, "labels": labels or []}


def update_item(id: Ident, title: Title | None = None, body: Body | None = None, state: State | None = None) -> dict:
    return {"id": id, "updated": True}


TEMPLATES = {"list": list_items, "get": get_item, "create": create_item, "update": update_item}
DESCRIPTIONS = {
    "list": "List {noun}s of the {server} workspace that match a query, newest first. Results are paged: "
    "use `limit` to bound the page size. Returns ids, titles and states, not full bodies.",
    "get": "Get one {noun} of the {server} workspace by id, with its full body and metadata. Set "
    "`include_history` to also receive every earlier revision (slower for long-lived items).",
    "create": "Create a new {noun} in the {server} workspace. The title is required; the body and "
    "labels are optional. Returns the new item's id, which the other tools accept.",
    "update": "Change the title, body or state of an existing {noun} in the {server} workspace. Only "
    "the fields given are changed; the others keep their values.",
}


def build(server: str) -> MCPServer:
    app = MCPServer(server)
    for noun in NOUNS:
        for verb in VERBS:
            app.add_tool(
                TEMPLATES[verb], name=f"{verb}_{noun}", description=DESCRIPTIONS[verb].format(noun=noun, server=server)
            )
    return app


if __name__ == "__main__":
    build(sys.argv[1] if len(sys.argv) > 1 else "wide").run()

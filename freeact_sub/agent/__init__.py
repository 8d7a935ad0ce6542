"""One agent: its turns, its tool calls, its direct commands and its messages to children."""

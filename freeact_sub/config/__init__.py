"""What a person configures: the agent config, agent types, commands, MCP server entries and project trust."""

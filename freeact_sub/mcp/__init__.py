"""MCP servers as tools: one connection per server, the shared pool, and the tools they offer."""

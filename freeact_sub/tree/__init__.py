"""The agent tree: every agent of one run, and the kernels and MCP connections they share."""

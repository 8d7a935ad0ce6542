"""Subagents: the `task` tool that starts children, drives them and keeps background jobs."""

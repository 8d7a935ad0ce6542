"""The `freeact-sub` command: `freeact-sub acp` runs the Agent Client Protocol agent on stdio
(`freeact_sub.acp`); everything else is the terminal front end (`freeact_sub.terminal.cli`)."""

from __future__ import annotations

import sys

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Run the command; returns the exit code."""
    argv = sys.argv[1:] if argv is None else argv
    from freeact_sub.start_gc import starting

    starting()  # the imports of the start make little garbage: collected seldom until the agent is up
    if argv[:1] == ["acp"]:
        from freeact_sub.acp.main import acp_main

        return acp_main(argv[1:])
    from freeact_sub.terminal.cli import main as terminal_main

    return terminal_main(argv)


if __name__ == "__main__":
    sys.exit(main())

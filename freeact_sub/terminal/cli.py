"""The `freeact-sub` command: flags, configuration, and the lifecycle of one session.

Configuration precedence, highest first: flags > `FREEACT_SUB_*` environment variables >
`--config FILE`; a `.env` file in the working directory is loaded into the environment first
(without overriding variables already set), but only its provider keys and harmless settings
(`launch/env_file.py`). The project's agent types that carry powers are used only in a trusted folder
(`trust.py`: asked once, or `--trust-project` / `--no-trust-project`). Every configuration problem
(a bad file, an unknown model, a missing API key) is reported in one line before any kernel starts; a failing MCP server
is reported the same way, and whatever had started is stopped.

Exit codes: 0 done; 1 the turn failed, was rejected or hit its turn limit, or an MCP server or
kernel failed to start; 2 a usage or configuration error; 130 cancelled with Ctrl-C; 128+N
ended by signal N.
"""

from __future__ import annotations

import sys

from .arguments import build_parser

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Run the command; returns the exit code."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["sessions"]:
        from .sessions_cmd import sessions_main

        return sessions_main(argv[1:])
    if argv[:1] == ["trust"]:
        from .trust_cmd import trust_main

        return trust_main(argv[1:])
    args = build_parser().parse_args(argv)  # `--help` ends here, before asyncio or the agent is imported
    import asyncio
    import signal

    from freeact_sub.launch import UsageError

    from .output import complain
    from .runner import EXIT_CANCELLED, EXIT_USAGE, Runner

    runner = Runner(args)
    try:
        return asyncio.run(runner.run())
    except UsageError as exc:
        complain(str(exc))
        return EXIT_USAGE
    except KeyboardInterrupt:
        return EXIT_CANCELLED
    except asyncio.CancelledError:
        return 128 + (runner.ended_by or signal.SIGTERM)

if __name__ == "__main__":
    sys.exit(main())

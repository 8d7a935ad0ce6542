"""Entry point of the `freeact-sub` command (placeholder until the terminal UI lands)."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    from freeact_sub import __version__

    parser = argparse.ArgumentParser(prog="freeact-sub", description="A code-action agent in your terminal.")
    parser.add_argument("--version", action="version", version=f"freeact-sub {__version__}")
    parser.parse_args(argv)
    parser.print_help()
    return 0


if __name__ == "__main__":
    sys.exit(main())

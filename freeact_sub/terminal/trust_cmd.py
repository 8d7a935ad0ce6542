"""`freeact-sub trust`: the folders whose agent types with powers you trust, and taking that back.

    freeact-sub trust                  each trusted folder, with the hash of its files
    freeact-sub trust forget [DIR]     stop trusting DIR (default: here); its files are inert again
"""

from __future__ import annotations

import argparse
import os
import sys

__all__ = ["trust_main"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="freeact-sub trust",
        description="List the folders you trust to use their agent types with hooks, endpoints, keys' names, MCP "
        "servers, allow rules or a wider sandbox, or stop trusting one.",
    )
    commands = parser.add_subparsers(dest="command", metavar="{list,forget}")
    commands.add_parser("list", help="list the trusted folders (the default)")
    forget = commands.add_parser("forget", help="stop trusting a folder: the next run asks again")
    forget.add_argument("folder", nargs="?", metavar="DIR", help="the folder (default: here)")
    return parser


def trust_main(argv: list[str]) -> int:
    """Run `freeact-sub trust …`; returns the exit code."""
    from pathlib import Path

    from freeact_sub import ConfigError, forget_folder, trusted_folders
    from freeact_sub.config.project_trust import trusted_folders_file

    args = build_parser().parse_args(argv)
    try:
        if args.command == "forget":
            folder = str(Path(args.folder or os.getcwd()).expanduser().resolve())
            if not forget_folder(folder):
                print(f"freeact-sub: {folder} is not a trusted folder", file=sys.stderr)
                return EXIT_FAILED
            print(f"No longer trusted: {folder}")
            return EXIT_OK
        folders = trusted_folders()
    except ConfigError as exc:
        print(f"freeact-sub: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if not folders:
        print(f"No trusted folders ({trusted_folders_file()}).")
    for folder, digest in sorted(folders.items()):
        print(f"{folder}  {digest[:19]}")
    return EXIT_OK

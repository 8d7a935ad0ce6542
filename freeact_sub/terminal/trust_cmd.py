"""`freeact-sub trust`: the folders whose agent types with powers you trust, trusting one, and taking that back.

    freeact-sub trust                  each trusted folder, with the hash of its files
    freeact-sub trust add [DIR]        trust DIR (default: here) with the files it has now, after showing them
    freeact-sub trust forget [DIR]     stop trusting DIR (default: here); its files are inert again

`add` is the one line that works where nothing can ask (JupyterLab's chat, an editor's ACP agent): it shows
each file with what it would do, then remembers the folder as the terminal's question does, until those
files change.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

__all__ = ["trust_main"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="freeact-sub trust",
        description="List the folders you trust to use their agent types with hooks, endpoints, keys' names, MCP "
        "servers, allow rules or a wider sandbox (and its AGENTS.md and skills), trust one, or stop trusting one.",
    )
    commands = parser.add_subparsers(dest="command", metavar="{list,add,forget}")
    commands.add_parser("list", help="list the trusted folders (the default)")
    add = commands.add_parser("add", help="trust a folder with the files it has now (until they change)")
    add.add_argument("folder", nargs="?", metavar="DIR", help="the folder (default: here)")
    forget = commands.add_parser("forget", help="stop trusting a folder: the next run asks again")
    forget.add_argument("folder", nargs="?", metavar="DIR", help="the folder (default: here)")
    return parser


def trust_main(argv: list[str]) -> int:
    """Run `freeact-sub trust …`; returns the exit code."""
    from freeact_sub import ConfigError, forget_folder, trusted_folders
    from freeact_sub.config.project_trust import trusted_folders_file

    args = build_parser().parse_args(argv)
    try:
        if args.command == "add":
            return _add(Path(args.folder or os.getcwd()))
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


def _add(folder: Path) -> int:
    """Trust `folder` with its files as they are now, after naming each one and what it would do."""
    from freeact_sub import ConfigError
    from freeact_sub.config.type_files import project_agent_types

    folder = folder.expanduser().resolve()
    if not folder.is_dir():
        print(f"freeact-sub: {folder} is not a folder", file=sys.stderr)
        return EXIT_USAGE
    try:
        project = project_agent_types(folder)
    except ConfigError as exc:  # a file that cannot be read is not trusted blindly
        print(f"freeact-sub: {exc}", file=sys.stderr)
        return EXIT_FAILED
    if not project.powerful:
        print(f"Nothing in {folder} needs trust: no AGENTS.md, skills or agent types with powers.")
        return EXIT_OK
    if project.trusted:
        print(f"Already trusted, with these files: {folder}")
        return EXIT_OK
    print(project.question())
    where = project.remember()
    print(f"Trusted: {folder} (remembered in {where}; asked again when these files change).")
    return EXIT_OK

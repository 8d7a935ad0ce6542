"""Generated `mcptools` packages shared by the agents of one tree: one per tool set, written once.

A fan-out of children with the same MCP tools would otherwise write, compile and remove the
same package once per child. The shelf writes a package the first time a tool set is asked for,
compiles it (so no kernel pays for compiling it, also one whose sandbox cannot write
`__pycache__`), makes its files read-only, and keeps it until the tree closes::

    <working dir>/.freeact-sub/mcptools/<main agent id>/<hash of the sources>/mcptools/...

Sharing files does not share rights: a function in the package only sends `(server, tool,
arguments)` over its own agent's channel, where that agent's allowed tools, rules and approvals
decide, so a package (even one edited on disk) can reach no more than the agent calling it.
The tree's folder is claimed by this process, so a host that dies leaves it to the next host's sweep.
"""

from __future__ import annotations

import asyncio
import compileall
import hashlib
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..sandbox import kernel_folders
from ..sandbox.safe_files import make_folder
from .generate import PACKAGE, TASKS_MODULE, TASKS_SHIM, GeneratedModule, package_sources

if TYPE_CHECKING:
    from ..mcp.connection import McpTool

__all__ = ["PackageShelf", "SharedPackage"]


@dataclass
class SharedPackage:
    """One written `mcptools` package: where it is and what is in it."""

    root: Path
    """The folder put on a kernel's `sys.path`; the package is `root / "mcptools"`."""
    modules: list[GeneratedModule]
    """One module per server."""
    prompts: dict[str, str] = field(default_factory=dict)
    """The system prompt's MCP section by `mcp_tools` mode, made once per package."""

    @property
    def package(self) -> Path:
        return self.root / PACKAGE


class PackageShelf:
    """The packages of one agent tree, by tool set; `close()` removes them all."""

    def __init__(self, owner: str) -> None:
        self._owner = owner
        """The folder name under each base: the main agent's id."""
        self._by_tools: dict[tuple[Path, tuple[int, ...]], tuple[list[McpTool], asyncio.Future[SharedPackage]]] = {}
        """Packages by base folder and the identity of the tool objects (kept alive here, so ids are not reused)."""
        self._by_sources: dict[tuple[Path, str], asyncio.Future[SharedPackage]] = {}
        self._folders: set[Path] = set()

    async def get(self, base: Path, tools: list[McpTool]) -> SharedPackage:
        """The package for `tools` under `base` (`<working dir>/.freeact-sub/mcptools`), written on first use."""
        key = (base, tuple(id(tool) for tool in tools))
        known = self._by_tools.get(key)
        if known is None:
            known = self._by_tools[key] = (list(tools), asyncio.ensure_future(self._package(base, tools)))
        try:
            return await asyncio.shield(known[1])
        except BaseException:
            if known[1].done() and self._by_tools.get(key) is known:
                del self._by_tools[key]  # a failed write is tried again by the next agent
            raise

    async def _package(self, base: Path, tools: list[McpTool]) -> SharedPackage:
        # The same tools as other objects (a listing made anew) still find the package by its sources.
        modules, sources = package_sources(tools)
        digest = hashlib.sha256(repr(sorted(sources.items())).encode()).hexdigest()[:16]
        written = self._by_sources.get((base, digest))
        if written is None or (written.done() and written.exception() is not None):
            written = self._by_sources[(base, digest)] = asyncio.ensure_future(
                asyncio.to_thread(self._write, base, digest, modules, sources)
            )
        return await asyncio.shield(written)

    def _write(
        self, base: Path, digest: str, modules: list[GeneratedModule], sources: dict[str, str]
    ) -> SharedPackage:
        folder = base / self._owner
        # `base` is `<working folder>/.freeact-sub/mcptools`: a link planted there (a cloned repository's) is refused
        make_folder(base.parent.parent, base)
        if folder not in self._folders:
            kernel_folders.sweep_owned(base)
            kernel_folders.claim(folder)
            self._folders.add(folder)
        root = folder / digest
        package = root / PACKAGE
        if root.exists():  # left by an earlier start of this main agent that did not finish
            shutil.rmtree(root)
        package.mkdir(parents=True)
        for name, source in sources.items():
            (package / name).write_text(source, encoding="utf-8")
        shim = root / f"{TASKS_MODULE}.py"
        shim.write_text(TASKS_SHIM, encoding="utf-8")
        compileall.compile_dir(package, quiet=2, workers=1)
        compileall.compile_file(shim, quiet=2)
        for path in [*package.rglob("*.py*"), *root.glob("__pycache__/*.pyc"), shim]:
            path.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
        return SharedPackage(root=root, modules=modules)

    async def close(self) -> None:
        """Remove every package this shelf wrote (the tree's agents are gone)."""
        folders, self._folders = self._folders, set()
        self._by_tools.clear()
        self._by_sources.clear()
        for folder in folders:
            await asyncio.to_thread(shutil.rmtree, folder, True)

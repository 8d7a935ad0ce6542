"""Shared fixtures: every test is checked for processes it left running."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parent.parent
CALC_SERVER = ROOT / "tests" / "servers" / "calc_server.py"


def shared_zygotes() -> set[int]:
    """PIDs of this process's shared kernel zygotes and of its `freeact-sub` fork server (`tests/cli_fork.py`): they
    live as long as the process, not a test (the kernels and runs they fork are children of theirs, and still
    counted)."""
    zygote = sys.modules.get("freeact_sub.kernels.zygote")
    forks = sys.modules.get("tests.cli_fork")
    return (zygote.process_zygote_pids() if zygote is not None else set()) | (
        forks.cli_fork_server_pids() if forks is not None else set()
    )


def _children() -> dict[int, str]:
    found = {}
    shared = shared_zygotes()
    for child in psutil.Process().children(recursive=True):
        if child.pid in shared:
            continue
        try:
            found[child.pid] = " ".join(child.cmdline())[:200]
        except psutil.Error:
            continue
    return found


@pytest.fixture(autouse=True)
def no_leaked_processes(request: pytest.FixtureRequest):
    """Fail a test that leaves a child process (kernel, MCP server, browser, …) behind.

    Processes that existed before the test are ignored, and so is the process's kernel zygote. Survivors get
    a few seconds to exit, then they are killed by PID (only our own children) and the test fails naming them.
    """
    before = set(_children())
    yield
    deadline = time.monotonic() + 8.0
    leaked: dict[int, str] = {}
    while time.monotonic() < deadline:
        leaked = {pid: cmd for pid, cmd in _children().items() if pid not in before}
        if not leaked:
            return
        time.sleep(0.1)
    for pid in leaked:
        try:
            psutil.Process(pid).kill()
        except psutil.Error:
            pass
    pytest.fail(f"{request.node.nodeid} left processes running: {leaked}")


@pytest.fixture
def calc_server_config() -> dict:
    """The `mcpServers` entry of our own test MCP server (stdio; see `tests.servers.calc_server`)."""
    from tests.servers import calc_server

    return calc_server()


@pytest.fixture
def time_server_config() -> dict:
    """The `mcpServers` entry of a third-party MCP server from PyPI (`mcp-server-time`)."""
    return {"command": sys.executable, "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"]}


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path


SLOWEST_FIRST = (
    "tests/e2e/test_sessions_cli.py",
    "tests/integration/test_docs_examples.py",
    "tests/e2e/test_terminal_oneshot.py",
    # Not first: on a fresh machine CI installs Chromium in the background (.ci/run), and the project's own install
    # (uv, ~30 s) no longer outlasts apt's; a worker that started here would wait for it, idle.
    "tests/e2e/test_jupyterlab.py",
    "tests/e2e/test_terminal_session.py",
    "tests/e2e/test_acp.py",
    "tests/e2e/test_terminal_exit.py",
    "tests/e2e/test_timeline_cli.py",
    "tests/e2e/test_terminal_first_run.py",
    "tests/e2e/test_terminal_directed.py",
    "tests/e2e/test_cross_provider_types.py",
    "tests/e2e/test_compaction_e2e.py",
)
"""The files that take longest (seconds of worker time, measured), longest first (but for the browser's file).
With `-n 3` each file runs whole on one worker (`--dist loadfile`), in the order the files are collected
(`--no-loadscope-reorder`); the longest ones start first, so the short ones fill up the end and all workers
finish together."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {path: index for index, path in enumerate(SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.partition("::")[0], len(SLOWEST_FIRST)))  # stable otherwise


def pytest_collection_finish(session: pytest.Session) -> None:
    # The test modules imported freeact_sub, pydantic-ai, the provider SDKs, mcp and jupyter_client: hundreds of
    # thousands of objects that live as long as the worker. Frozen, the collector never walks them again (as
    # the `freeact-sub` command does once it has started: freeact_sub/start_gc.py).
    import gc

    gc.collect()
    gc.freeze()


def pytest_configure(config: pytest.Config) -> None:
    if sys.dont_write_bytecode:
        if not hasattr(config, "workerinput"):
            _compile_our_modules()
        # pytest rewrites each test module's asserts on import and caches the result as bytecode, unless
        # bytecode is not written: then every worker rewrites all of them again (a quarter of a collection's CPU)
        sys.dont_write_bytecode = False
    _import_jsonschema_without_the_iri_grammar()
    # Tests must not reach a real provider by accident.
    os.environ.pop("OPENAI_API_KEY", None)
    # The demo model streams a word every 20 ms for people to watch; the tests need not watch
    # (a test about timing passes its own delay). Kernels and notebooks the tests start inherit it.
    os.environ.setdefault("FREEACT_SUB_DEMO_CHUNK_DELAY", "0.001")


def _import_jsonschema_without_the_iri_grammar() -> None:
    """Import jsonschema as `freeact_sub.tools.jsonschema_module` does: without `rfc3987-syntax`'s 38 Lark parsers.

    nbformat (imported by the notebook tests at collection) imports jsonschema, which builds them when
    jupyterlab's extras installed that package: ~2 s of CPU in each worker, for a format no test checks.
    """
    from freeact_sub.tools import jsonschema_module

    jsonschema_module()


def _compile_our_modules() -> None:
    """Write the bytecode of freeact_sub and of the tests' helpers once, before the workers start.

    With PYTHONDONTWRITEBYTECODE set (as in some CI images) no process writes a `.pyc`, and an editable
    install has none: every one of the suite's hundreds of processes that imports freeact_sub (each CLI
    run, kernel, MCP server and notebook) would compile it from source again. Installed libraries are
    not affected: pip compiles them when it installs them.
    """
    import compileall

    for folder in (ROOT / "freeact_sub", ROOT / "tests"):
        compileall.compile_dir(folder, quiet=2, force=False)

"""The tests' `freeact-sub` runs forked from a server (`tests/cli_fork.py`) behave as the command started on its own.

The suite's CLI tests rely on this: the same output, exit codes and signals, the run ended with its launcher, and the
real command wherever a fork could not be the same.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pexpect
import psutil
import pytest

from tests.cli_fork import cli_command, cli_fork_server_pids, module_command, run_of

pytestmark = pytest.mark.timeout(120)


def test_a_forked_run_prints_and_exits_as_the_command_does(tmp_path: Path) -> None:
    real = subprocess.run([sys.executable, "-m", "freeact_sub.terminal.cli", "--no-such-flag"], cwd=tmp_path,
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60)
    forked = subprocess.Popen(cli_command("--no-such-flag"), cwd=tmp_path, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    out, err = forked.communicate(timeout=60)
    assert run_of(forked.pid) != forked.pid, "the run was forked by the server, not started by the launcher"
    assert (forked.returncode, out, err) == (real.returncode, real.stdout, real.stderr) and real.returncode == 2


def test_a_forked_run_gets_its_launchers_signals_and_dies_with_it(tmp_path: Path) -> None:
    # the ACP agent waits on its stdin: a run that stays until something ends it
    waiting = subprocess.Popen(module_command("freeact_sub.cli", "acp", "--demo"), cwd=tmp_path, stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    run = psutil.Process(_run_pid(waiting.pid))
    os.kill(waiting.pid, signal.SIGKILL)
    waiting.wait(30)
    run.wait(30)  # a run dies with its launcher (psutil.TimeoutExpired if not)

    # once the agent has answered `initialize` (its signal handlers are in place): SIGTERM is the agent's stop, it
    # exits 0; SIGUSR1, which it does not handle, kills it. Either way the launcher ends as the run ended.
    for signum, expected in ((signal.SIGTERM, 0), (signal.SIGUSR1, -signal.SIGUSR1)):
        launcher = subprocess.Popen(module_command("freeact_sub.cli", "acp", "--demo"), cwd=tmp_path,
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        assert launcher.stdin is not None and launcher.stdout is not None
        run = psutil.Process(_run_pid(launcher.pid))
        request = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                   "params": {"protocolVersion": 1, "clientCapabilities": {}}}
        launcher.stdin.write(json.dumps(request).encode() + b"\n")
        launcher.stdin.flush()
        assert json.loads(launcher.stdout.readline())["id"] == 1, "the agent answered initialize"
        os.kill(launcher.pid, signum)
        launcher.communicate(timeout=60)
        run.wait(30)
        assert launcher.returncode == expected, f"the launcher ended as the run did after signal {signum}"


def test_a_run_whose_start_settings_differ_is_the_real_command(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONHASHSEED": "7"}  # only an interpreter's start takes it: no fork can have it
    done = subprocess.Popen(cli_command("--version"), cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    done.communicate(timeout=60)
    assert run_of(done.pid) == done.pid and done.returncode == 0


def test_a_forked_run_on_a_terminal_leads_its_session_there(tmp_path: Path) -> None:
    command = cli_command("--no-such-flag")
    child = pexpect.spawn(command[0], command[1:], cwd=str(tmp_path), encoding="utf-8", timeout=60)
    child.expect("unrecognized arguments: --no-such-flag")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 2 and run_of(child.pid) != child.pid
    assert cli_fork_server_pids(), "the server lives on for the next run"


def _run_pid(launcher: int, timeout: float = 60.0) -> int:
    deadline = time.monotonic() + timeout
    while (run := run_of(launcher)) == launcher:
        assert time.monotonic() < deadline, "the server did not fork a run"
        time.sleep(0.02)
    return run


async def test_a_forked_notebook_kernel_runs_cells_is_interrupted_and_ends_with_its_launcher(tmp_path: Path) -> None:
    from tests.cli_fork import ForkedKernelManager

    manager = ForkedKernelManager(kernel_name="python3")
    await manager.start_kernel(cwd=str(tmp_path))
    client = manager.client()
    client.start_channels()
    try:
        await client.wait_for_ready(timeout=60)
        launcher = manager.provisioner.pid  # type: ignore[union-attr]
        kernel = psutil.Process(run_of(launcher))
        assert kernel.pid != launcher and kernel.ppid() in cli_fork_server_pids(), "forked by the server"
        reply = await client.execute_interactive("import os; print(os.getcwd())", timeout=30)
        assert reply["content"]["status"] == "ok"
        sleeping = client.execute("import time; time.sleep(60)")
        await asyncio.sleep(0.5)
        await manager.interrupt_kernel()  # a signal to the launcher's process group, passed on to the kernel
        while (message := await client.get_shell_msg(timeout=30))["parent_header"].get("msg_id") != sleeping:
            pass
        assert message["content"]["ename"] == "KeyboardInterrupt"
    finally:
        client.stop_channels()
        await manager.shutdown_kernel(now=True)  # kills the launcher: the kernel dies with it
    kernel.wait(30)

"""An agent tree on a real Jupyter Enterprise Gateway (127.0.0.1) that starts kernels only for `alice`.

Enterprise Gateway starts a kernel only for the user named by the start request's `KERNEL_USERNAME`
(and by default never for `root`). The tests check that every start of the tree names the
configured user (main agent, child, pool), that nothing is left on the gateway or among its
processes afterwards, and that a refused user gets the gateway's own reason instead of a guess
about tokens.

Enterprise Gateway cannot be installed into this project's environment (see `tests/gateway_server.py`):
these tests run it from `$FREEACT_SUB_TEST_EG_PYTHON` and are skipped without it.
"""

from __future__ import annotations

import asyncio
import getpass
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from freeact_sub import Agent, AgentConfig, CodeExecutionOutput, SubagentFinished
from freeact_sub.config.agent_config import KernelGatewayConfig
from freeact_sub.errors import KernelError
from freeact_sub.kernels.gateway import GatewayKernel
from tests.cli_fork import cli_command
from tests.gateway_server import (
    EG_PYTHON_ENV,
    GatewayServer,
    enterprise_gateway,
    enterprise_gateway_python,
    enterprise_gateway_unready,
)
from tests.scripting import Call, Router, Script, configs, drive, until

pytestmark = pytest.mark.skipif(
    enterprise_gateway_python() is None,
    reason=f"needs ${EG_PYTHON_ENV}: an interpreter with jupyter_enterprise_gateway (it pins jupyter_client<7)",
)

REPORT = "import os\nprint('USER=' + os.environ.get('KERNEL_USERNAME', '-'), 'PID=' + str(os.getpid()), flush=True)\n"


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayServer]:
    python = enterprise_gateway_python()
    assert python is not None
    if (why := enterprise_gateway_unready(python)) is not None:
        pytest.skip(why)
    with enterprise_gateway(
        tmp_path_factory.mktemp("enterprise-gateway"), python, "--EnterpriseGatewayApp.authorized_users=alice"
    ) as server:
        yield server


def config(model: Any, workdir: Path, gateway: GatewayServer, username: str | None, **overrides: Any) -> AgentConfig:
    gateway_kernels = {"url": gateway.url, "username": username}
    return configs(auto_approve=True, save_sessions=False, kernel_gateway=gateway_kernels)(model, workdir, **overrides)


def _fields(text: str) -> dict[str, str]:
    return dict(part.split("=", 1) for part in text.split() if "=" in part)


async def test_a_main_agent_and_a_child_run_as_the_configured_user_and_leave_nothing_behind(
    gateway: GatewayServer, workdir: Path
) -> None:
    parent = Script(
        [Call("execute_ipython_cell", {"code": REPORT}, id="main-cell")],
        [Call("task", {"prompt": "CHILD: report your kernel"}, id="task-1")],
        ["all done"],
    )
    child = Script([Call("execute_ipython_cell", {"code": REPORT})], ["child done"])
    model = Router({"PARENT": parent, "CHILD:": child})
    kernel_pids: dict[str, int] = {}

    def on_event(event: Any) -> None:
        if isinstance(event, CodeExecutionOutput) and "PID=" in event.content:
            pid = int(_fields(event.content)["PID"])
            kernel_pids[event.agent_id] = pid
            # while the cell's agent runs, its kernel is one of the gateway's own processes
            assert pid in {process.pid for process in gateway.kernel_processes()}

    async with Agent(config(model.model, workdir, gateway, "alice", kernel_pool_size=1)) as agent:
        assert isinstance(agent.kernel, GatewayKernel)
        events = await drive(agent.stream("PARENT"), on_event=on_event, limit=180)
        outputs = [e for e in events if isinstance(e, CodeExecutionOutput)]
        assert {e.agent_id for e in outputs} == set(kernel_pids) and len(kernel_pids) == 2  # main agent and child
        assert {_fields(e.content)["USER"] for e in outputs} == {"alice"}
        assert {e.status for e in events if isinstance(e, SubagentFinished)} == {"done"}
        assert agent.kernel.kernel_id in gateway.kernel_ids()
    assert gateway.kernel_ids() == []
    await until(lambda: gateway.kernel_processes() == [], "no kernel left on the gateway", 30, in_thread=True)


async def test_a_user_the_gateway_does_not_authorize_gets_its_reason(gateway: GatewayServer, workdir: Path) -> None:
    script = Script(["never"])
    agent = Agent(config(script.model, workdir, gateway, "mallory"))
    with pytest.raises(KernelError) as caught:
        await agent.start()
    message = str(caught.value)
    assert gateway.url in message and "HTTP 403" in message
    assert "User 'mallory' is not in the set of users authorized to start kernel" in message  # the gateway's words
    assert "kernel_gateway.username" in message
    assert "token" not in message.lower()
    assert not agent.started and script.calls == 0
    assert gateway.kernel_ids() == [] and gateway.kernel_processes() == []


async def test_without_a_username_kernels_start_for_kernel_envs_user_or_the_one_running_the_program(
    gateway: GatewayServer,
) -> None:
    settings = KernelGatewayConfig(url=gateway.url)
    with pytest.raises(KernelError, match=re.escape(f"User '{getpass.getuser()}' is not")):
        await GatewayKernel(settings).start()
    async with GatewayKernel(settings, env={"KERNEL_USERNAME": "alice"}) as alice:
        assert _fields((await alice.execute(REPORT)).text)["USER"] == "alice"
    assert gateway.kernel_ids() == []


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FREEACT_SUB_") and not k.endswith("_API_KEY")}
    return subprocess.run(
        cli_command(*args),
        cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=240,
    )


async def test_the_cli_starts_kernels_for_the_user_given_by_the_flag(gateway: GatewayServer, workdir: Path) -> None:
    common = ("--demo", "-p", "one cell", "--auto-approve", "--kernel-gateway", gateway.url)
    done = await asyncio.to_thread(_cli, *common, "--gateway-username", "alice", cwd=workdir)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "The sum of 1 to 100 is **5050**.\n"
    refused = await asyncio.to_thread(_cli, *common, "--gateway-username", "mallory", cwd=workdir)
    assert refused.returncode == 1 and refused.stdout == ""
    assert "User 'mallory' is not in the set of users authorized" in refused.stderr
    assert "Traceback" not in refused.stderr and "token" not in refused.stderr.lower()
    assert gateway.kernel_ids() == []
    await until(lambda: gateway.kernel_processes() == [], "no kernel left on the gateway", 30, in_thread=True)

